/** overbrainer.toml and the OVERBRAINER_* environment: parse, validate, edit, template. */
export * from './types';
export { parseConfig, type ParseOptions, KNOWN_KEYS } from './parse';
export { loadConfig, otherApiHost, runpodSettings, type LoadedConfig } from './load';
export { setDataCenterIds, setGpuTypes, setNetworkVolumeId, ConfigEditError } from './edit';
export { configTemplate } from './template';
export { gitignoreWords, protectWithGitignore, type GitignoreChange } from './gitignore';
export {
  ENV_API_KEY,
  ENV_BASE_URL,
  ENV_SSH_CLIENT,
  PROCESS_ENV_ONLY,
  readDotEnv,
  withDotEnv,
  type DotEnvIgnored,
  type Env,
} from './env';
export { TomlPositions, type TextPos } from './tomlPositions';
export { type BudgetConfig, DEFAULT_KEPT_POD_REMINDER_HOURS } from './budget';
export {
  type SweepConfig,
  type SweepParam,
  type SweepPruner,
  type SweepSampler,
  SWEEP_NAME,
  SWEEP_PRUNERS,
  SWEEP_SAMPLERS,
} from './sweep';
export type { SweepChoice } from './sweepParams';
export { nodesLine, nodesOf, nodesProblem, type NodesProblem } from './nodes';
