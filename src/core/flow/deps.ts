/**
 * What every run command works with: the dependencies, the typed error with its next action, the
 * run lock, the final line.
 */
import { HintedError } from '../errors';
import { type Clock } from '../clock';
import {
  OverbrainerConfig,
  TargetConfig,
  DEFAULT_ARTIFACTS,
  DEFAULT_MAX_RETRIEVE_GB,
} from '../config/types';
import type { EventBus } from '../events';
import type { RunpodClient } from '../runpod/client';
import type { Followed } from '../follow/collect';
import type { FollowEnd } from '../follow/run';
import { type PodCtx } from '../pod/context';
export { summaryLine } from '../follow/collect';
export { publishState } from '../pod/context';
import type { Timing } from '../timing';
import type { RunRecord } from '../runs/runRecord';
import { type RunStore } from '../runs/store';
import type { RunLock } from '../runs/lock';
import { withVramEstimate } from '../train/vram';
import { nodesProblem } from '../config/nodes';

/** What the flow works with; `client` is null when no Runpod API key is set (local target only). */
export interface FlowDeps {
  store: RunStore;
  client: RunpodClient | null;
  bus: EventBus;
  clock: Clock;
  timing: Timing;
  version: string;
  /** Who follows, for lock messages ("VS Code window", "overbrainer CLI"). */
  owner: string;
  /**
   * The environment the job's secrets are read from (OVERBRAINER_HF_TOKEN, `[training] secrets`):
   * the process env over the workspace's `.env`, with VS Code's stored secrets; none when absent.
   */
  env?: Readonly<Record<string, string | undefined>>;
}

export type FlowErrorKind =
  /** No API key to reach Runpod with. */
  | 'no_api_key'
  /** No target named, or none that overbrainer.toml defines. */
  | 'no_target'
  /** overbrainer.toml lacks what the command needs ([training], the run's target). */
  | 'bad_config'
  /** An option that does not apply (`--keep-pod` on a local target). */
  | 'bad_option'
  /** The installation lacks a file it ships (the metrics plugin). */
  | 'install_broken'
  /** An upload entry outside the workspace, missing, or holding what cannot be copied. */
  | 'bad_upload'
  /** Another client follows the run. */
  | 'followed_elsewhere'
  /** Another train of the project holds the budget check. */
  | 'budget_busy'
  /** The budget leaves too little for the run. */
  | 'over_budget'
  /** The run's job has not started. */
  | 'not_started'
  /** The run already ended. */
  | 'already_ended'
  /** The run has no pod (left) to act on. */
  | 'no_pod'
  /** The run's pod is in a state the command cannot act on. */
  | 'wrong_pod_state'
  /** The run to resume has no snapshot (yet, or at home). */
  | 'no_snapshot'
  /** Following stopped (asked): the message says what goes on and how to reach it. */
  | 'stopped_following';

/** The next action of each kind, where the flow has no more to say than that. */
const FLOW_HINTS: Record<FlowErrorKind, string> = {
  no_api_key: 'Run "Overbrainer: Set Runpod API Key", or set OVERBRAINER_RUNPOD__API_KEY.',
  no_target: 'Add a [targets.NAME] section to overbrainer.toml, or name one with --target.',
  bad_config: 'Fix overbrainer.toml as the message says, then run the command again.',
  bad_option: 'Run the command again without that option.',
  install_broken: 'Reinstall Overbrainer: a file it ships is missing.',
  bad_upload: 'Fix the upload entries under [training] in overbrainer.toml, then train again.',
  followed_elsewhere: 'Watch it there, or close that client and attach here.',
  budget_busy: 'Run it again once the other train of this project has started.',
  over_budget:
    "Raise the caps under [budget] in overbrainer.toml, lower the run's max_cost_usd, or wait for the next day or month.",
  not_started:
    'Wait for its job to start (`overbrainer runs ls`), or cancel it (`overbrainer train cancel` with its ID).',
  already_ended: 'Nothing to do: `overbrainer runs show` with its ID says how it ended.',
  no_pod: '`overbrainer runs show` with its ID says what it left; train again for a new pod.',
  wrong_pod_state: "`overbrainer pod ls` shows the pod's state; act on it from there.",
  no_snapshot: 'Resume a run that saved a snapshot, or train afresh.',
  stopped_following:
    'Follow it again with `overbrainer train attach` (VS Code: Attach to Run) with its ID.',
};

/**
 * A user-facing failure of the flow: what happened and the next action (`hint`, else the one of
 * its kind).
 */
export class FlowError extends HintedError<FlowErrorKind> {
  constructor(kind: FlowErrorKind, message: string, hint: string | null = null) {
    super(kind, message, hint ?? FLOW_HINTS[kind]);
    this.name = 'FlowError';
  }
}

/**
 * A command on one recorded run, as both front ends call it (cancel, stop; attach takes the same
 * arguments): the flow's dependencies, the config (null: none readable), the run's ID and the
 * signal that stops following it.
 */
export type RunCommand<R = FlowResult> = (
  deps: FlowDeps,
  config: OverbrainerConfig | null,
  runId: string,
  signal?: AbortSignal,
) => Promise<R>;

/** A run command's result: the run followed to its end (its record, its pod's, the final line). */
export type FlowResult = Followed;

/** The flow's result of a follow: its end collected, or a FlowError when following was stopped. */
export function endOf(end: FollowEnd): FlowResult {
  if (end.kind === 'stopped') throw new FlowError('stopped_following', end.message, null);
  return end.result;
}

export function podCtx(deps: FlowDeps): PodCtx {
  if (deps.client === null) {
    throw new FlowError(
      'no_api_key',
      'no Runpod API key is set',
      'Run "Overbrainer: Set Runpod API Key", or set OVERBRAINER_RUNPOD__API_KEY.',
    );
  }
  return {
    store: deps.store,
    client: deps.client,
    bus: deps.bus,
    clock: deps.clock,
    timing: deps.timing,
    version: deps.version,
  };
}

/**
 * The target a train uses, by the one rule of both front ends: the one named (`--target`, a
 * pick), else `[training] target`, else the only one. Its name is undefined when none is chosen
 * (several targets and no `[training] target`), its config when the config has no such target.
 * A runpod target with `gpu_types = "auto"` and no `min_vram_gb` gets the VRAM estimate of the
 * generated Axolotl config's base model and adapter as its `min_vram_gb`.
 */
export function chooseTarget(
  config: OverbrainerConfig,
  name: string | null | undefined,
): { name: string | undefined; target: TargetConfig | undefined } {
  const names = Object.keys(config.targets);
  const chosen = name ?? config.training?.target ?? (names.length === 1 ? names[0] : undefined);
  const target = chosen === undefined ? undefined : config.targets[chosen];
  // gpu_types = "auto" without min_vram_gb: the VRAM the base model and adapter need (train/vram.ts).
  return {
    name: chosen,
    target: target === undefined ? undefined : withVramEstimate(target, config.training?.trainer),
  };
}

/**
 * The target a train runs on: the one {@link chooseTarget} chooses for `options.target`, checked
 * against the train's options and `[training]`; a FlowError naming the next action when not.
 */
export function pickTarget(
  config: OverbrainerConfig,
  options: { target?: string; keepPod?: boolean },
): TargetConfig {
  const names = Object.keys(config.targets);
  const { name: chosen, target } = chooseTarget(config, options.target);
  if (chosen === undefined) {
    throw new FlowError(
      'no_target',
      names.length === 0
        ? 'overbrainer.toml defines no target'
        : `several targets (${names.join(', ')}) and no [training] target`,
      names.length === 0
        ? 'Add a [targets.NAME] section (Overbrainer: Create overbrainer.toml writes a commented one).'
        : 'Set target = "NAME" under [training], or pick one with --target.',
    );
  }
  if (!target) {
    throw new FlowError(
      'no_target',
      `no target "${chosen}" in overbrainer.toml`,
      `Use one of: ${names.join(', ') || '(none)'}.`,
    );
  }
  const problem = config.training ? nodesProblem(config.training, target) : null;
  if (problem !== null) throw new FlowError('bad_config', problem.message, problem.hint);
  if (options.keepPod && target.kind !== 'runpod') {
    throw new FlowError(
      'bad_option',
      '--keep-pod only applies to a runpod target',
      'Drop --keep-pod, or pick a runpod target.',
    );
  }
  if (!config.training) {
    throw new FlowError(
      'bad_config',
      'overbrainer.toml has no [training] section',
      'Add one (see the commented template).',
    );
  }
  return target;
}

export function lockRun(deps: FlowDeps, runId: string): RunLock {
  const lock = deps.store.lock(runId, deps.owner);
  if (lock === null) {
    const holder = deps.store.lockHolder(runId);
    throw new FlowError(
      'followed_elsewhere',
      `run ${runId} is followed by another client${holder ? ` (${holder.owner}, pid ${holder.pid})` : ''}`,
      'Watch it there, or close that client and attach here.',
    );
  }
  return lock;
}

/** Most one retrieval of `run` brings home (GB): its target's `max_retrieve_gb`, else 200. */
export function maxRetrieveGbOf(config: OverbrainerConfig | null, run: RunRecord): number {
  const target = config?.targets[run.target];
  return target?.kind === 'runpod' ? target.maxRetrieveGb : DEFAULT_MAX_RETRIEVE_GB;
}

/** The artifacts to bring back: `[training] artifacts`, else the defaults. */
export function artifactsOf(config: OverbrainerConfig | null): readonly string[] {
  return config?.training?.artifacts ?? DEFAULT_ARTIFACTS;
}
