/**
 * overbrainer.toml and the OVERBRAINER_* environment as the front ends use them: the file's name,
 * its template and the edits that keep its comments (`init`, Create overbrainer.toml, Pick GPU
 * Types), its errors in words, and the names of the settings. Loading it for a command goes
 * through the Workspace (./workspace.ts).
 */
export {
  CONFIG_FILE,
  DEFAULT_KEPT_POD_REMINDER_HOURS,
  ENV_API_KEY,
  ENV_BASE_URL,
  configErrorWithoutHint,
  configTemplate,
  formatConfigError,
  gitignoreWords,
  loadConfig,
  protectWithGitignore,
  readDotEnv,
  setDataCenterIds,
  setGpuTypes,
  setNetworkVolumeId,
  type ConfigError,
  type DotEnvIgnored,
  type Env,
  type GitignoreChange,
  type LoadedConfig,
  type OverbrainerConfig,
  type RunpodTargetConfig,
  type TargetConfig,
} from '../config';
