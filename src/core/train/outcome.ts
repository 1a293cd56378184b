/**
 * What a finished job means for its run: `Exited(0)` with at least
 * one metric line succeeded; `Exited(0)` without any failed because the
 * metrics plugin was not loaded; any other exit code failed; `Cancelled` is
 * cancelled; `Lost` (no exit code, group gone) failed.
 */
import type { JobStatus, RunEndCause, RunState } from '../events';
import type { RunSnapshot } from '../runs/runRecord';

export interface JobOutcome {
  state: Extract<RunState, 'succeeded' | 'failed' | 'cancelled' | 'stopped'>;
  /** The failure reason saved in run.json (or where a stopped run's snapshot is); null on success or cancel. */
  message: string | null;
  /** The snapshot the job saved (snapshot.json), whatever its end: a resume starts from it. */
  snapshot?: RunSnapshot;
}

/** Why a run whose job ended `state` (and whose results came home) ended. */
export function outcomeCause(state: JobOutcome['state']): RunEndCause {
  switch (state) {
    case 'succeeded':
      return 'completed';
    case 'stopped':
      return 'snapshotted';
    case 'cancelled':
      return 'cancelled';
    case 'failed':
      return 'job_failed';
  }
}

/** What a stopped run's message says: where it stopped and why, and where its checkpoint is. */
export function stoppedMessage(snapshot: RunSnapshot): string {
  return `stopped at step ${snapshot.step} (${snapshot.reason}); snapshot ${snapshot.checkpoint}`;
}

/** Fixed words at the start of the message, so tests and users recognise the cause. */
export const PLUGIN_NOT_LOADED = 'plugin not loaded';
export const STOPPED_WITHOUT_EXIT_CODE = 'stopped without an exit code';

/**
 * Why a job that exited 0 without metrics failed, and what to do about it:
 * every trainer writes the protocol's lines to $OVERBRAINER_METRICS, so none
 * at all means the plugin or callback never ran.
 */
export function pluginNotLoadedMessage(runId: string): string {
  return (
    `${PLUGIN_NOT_LOADED}: the job exited 0 without writing a single metric line to $OVERBRAINER_METRICS. ` +
    'For Axolotl, list `overbrainer_metrics.OverbrainerMetricsPlugin` under `plugins:` in its config; ' +
    'for a Hugging Face Trainer, pass `callbacks=[OverbrainerMetricsCallback()]`; ' +
    `for your own loop, append the protocol's JSON lines (see runs/${runId}/job.log)`
  );
}

/**
 * An ended job's outcome once its `snapshot.json` was read: a job that exited 0 after saving a
 * snapshot is `stopped`; any other end keeps its state and the snapshot (a resume can start from
 * it). A snapshot read as an Error (a malformed snapshot.json) fails a job that exited 0.
 */
export function withSnapshot(
  outcome: JobOutcome,
  snapshot: RunSnapshot | Error | null,
): JobOutcome {
  if (snapshot === null) return outcome;
  if (snapshot instanceof Error) {
    return outcome.state === 'succeeded'
      ? { state: 'failed', message: `the job stopped for a snapshot, but ${snapshot.message}` }
      : outcome;
  }
  if (outcome.state === 'succeeded') {
    return { state: 'stopped', message: stoppedMessage(snapshot), snapshot };
  }
  return { ...outcome, snapshot };
}

/** The outcome of a job in `status` that wrote `metricCount` metric lines; null while it runs. */
export function jobOutcome(
  status: JobStatus,
  metricCount: number,
  runId: string,
): JobOutcome | null {
  switch (status.kind) {
    case 'running':
      return null;
    case 'exited':
      if (status.code !== 0) {
        return {
          state: 'failed',
          message: `exited with code ${status.code} (see runs/${runId}/job.log)`,
        };
      }
      return metricCount > 0
        ? { state: 'succeeded', message: null }
        : { state: 'failed', message: pluginNotLoadedMessage(runId) };
    case 'cancelled':
      return { state: 'cancelled', message: null };
    case 'lost':
      return { state: 'failed', message: STOPPED_WITHOUT_EXIT_CODE };
  }
}
