/**
 * The run commands both front ends call (the extension and the CLI): train, attach, stop,
 * cancel, keep and release, for a Runpod target (a pod per run) and the local target. The only
 * layer that orchestrates the ones below it (runpod, train, runs, exec, config).
 */
export { type FlowDeps, FlowError, type FlowResult, chooseTarget, summaryLine } from './deps';
export { beforeTrain } from './beforeTrain';
export { type StartPhase, type TrainOptions, train } from './train';
export { generatedAxolotlConfig, pluginSource } from './runFiles';
export { trainingPlanLines } from './plan';
export { stopFollowingMessage } from '../follow/run';
export { type Recovered, attach, followAgainNow, recoverAbandoned, takenUpAgain } from './attach';
export { type StopResult, requestStop, stop } from './stop';
export { cancel } from './cancel';
export { keepPod } from './keep';
export { BudgetError, type BudgetDecision, budgetGate } from './budget';
export {
  afterTrainingS,
  heldByEarlierRuns,
  liveQuote,
  quoteForTarget,
  quoteLines,
  type Quote,
} from './quote';
export { settleGonePods } from './settleBills';
export {
  type OtherApiHost,
  SetupError,
  Workspace,
  type WorkspaceOptions,
  keyProblem,
  trustProblem,
  untrustedError,
} from './workspace';
export * from './config';
// A sweep's commands: flow/sweep.ts exports only what the front ends call.
export * from './sweep';
export type { RunpodClient } from '../runpod/client';
export type { RunStore } from '../runs/store';
export { CLIENT_VERSION } from '../runpod/client';
export { nodesProblem } from '../config/nodes';
