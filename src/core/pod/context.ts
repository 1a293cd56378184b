/**
 * What every step of a Runpod run works with: the runs store, the API client,
 * the event bus, the clock and the timing object. Built once by the
 * composition root (the extension or the CLI).
 */
import type { Clock } from '../clock';
import { describeError } from '../errors';
import type { CoreEvent, EventBus } from '../events';
import { endRun, type RunEndCause } from '../runs/runEnd';
import type { RunRecord } from '../runs/runRecord';
import type { RunStore } from '../runs/store';
import type { Timing } from '../timing';
import type { RunpodClient } from '../runpod/client';

export interface PodCtx {
  store: RunStore;
  client: RunpodClient;
  bus: EventBus;
  clock: Clock;
  timing: Timing;
  /** The extension's version: the watchdog's User-Agent. */
  version: string;
}

type Level = Extract<CoreEvent, { type: 'log' }>['level'];

/** Publishes a log line on the bus (the UI's output channel, the CLI's stderr). */
export function log(ctx: Pick<PodCtx, 'bus'>, level: Level, message: string): void {
  ctx.bus.publish({ type: 'log', level, message });
}

/** Publishes a warning the UI may turn into a notification (keyed by `code`). */
export function warn(
  ctx: Pick<PodCtx, 'bus'>,
  runId: string | null,
  code: string,
  message: string,
): void {
  ctx.bus.publish({ type: 'warning', runId, code, message });
}

/** Saves the run `failed` for `cause` with `message`, best effort, and tells the listeners. */
export function failRun(
  ctx: Pick<PodCtx, 'store' | 'bus'>,
  run: RunRecord,
  cause: RunEndCause,
  message: string,
): void {
  endRun(run, 'failed', cause, message);
  try {
    ctx.store.saveRun(run);
  } catch (error) {
    log(ctx, 'warn', `cannot record run ${run.id} as failed: ${describeError(error)}`);
  }
  ctx.bus.publish({ type: 'runState', runId: run.id, state: 'failed', message, cause });
}

/** Tells the listeners the run's state, its message and how it ended. */
export function publishState(ctx: Pick<PodCtx, 'bus'>, run: RunRecord): void {
  ctx.bus.publish({
    type: 'runState',
    runId: run.id,
    state: run.state,
    message: run.message,
    cause: run.end?.cause ?? null,
  });
}

/**
 * The account secret holding a run's pod host key (`overbrainer_host_key_<run-id>`): the create
 * call's env names it as `{{ RUNPOD_SECRET_… }}`, so the key itself is never in the pod's env.
 */
export const HOST_KEY_SECRET_PREFIX = 'overbrainer_host_key_';

export function hostKeySecretName(runId: string): string {
  return `${HOST_KEY_SECRET_PREFIX}${runId}`;
}
