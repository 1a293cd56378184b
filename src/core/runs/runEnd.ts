/**
 * How a run ended, as a typed value: `end: {cause, message}` in run.json, beside the state and
 * the message (kept for the records older versions read). Front ends decide on the cause; the
 * message is what they show.
 */
import { RUN_END_CAUSES, type RunEndCause, type RunState } from '../events';

export type { RunEndCause };

/** The message of a run stopped before its job started (`interrupted`). */
export const INTERRUPTED_BEFORE_JOB = 'interrupted before the job started';

/** How the run ended: why, and the words shown for it (the run's message). */
export interface RunEnd {
  cause: RunEndCause;
  message: string | null;
}

/** What {@link endRun} and {@link reopenRun} change of a run record. */
interface Ending {
  state: RunState;
  message: string | null;
  end?: RunEnd;
}

/** Ends `run`: its state, why and its message, together (the caller saves it). */
export function endRun(
  run: Ending,
  state: Exclude<RunState, 'preparing' | 'running'>,
  cause: RunEndCause,
  message: string | null,
): void {
  run.state = state;
  run.message = message;
  run.end = { cause, message };
}

/** `run` goes on (on a new pod, or its results still to come home): no end, `message` said. */
export function reopenRun(run: Ending, message: string | null): void {
  run.state = 'running';
  run.message = message;
  delete run.end;
}

/** Whether `state` is an end (a run in it has an `end`). */
export function isEnded(state: RunState): boolean {
  return state !== 'preparing' && state !== 'running';
}

/** A cause read from run.json: one this version does not know is `unknown`. */
export function causeRead(cause: string): RunEndCause {
  return (RUN_END_CAUSES as readonly string[]).includes(cause) ? (cause as RunEndCause) : 'unknown';
}

/**
 * The cause of an ended run recorded before `end` existed, from its state and the words older
 * versions wrote (fixed: they are on disk); `unknown` when they say none.
 */
export function olderCause(state: RunState, message: string | null): RunEndCause | null {
  if (!isEnded(state)) return null;
  const words = message ?? '';
  if (words.includes('artifacts not retrieved')) return 'not_retrieved';
  if (state === 'succeeded') return 'completed';
  if (state === 'cancelled') return 'cancelled';
  if (state === 'stopped' && words.startsWith('stopped at step ')) return 'snapshotted';
  if (words.startsWith('max_cost_usd reached')) return 'cost_cap';
  if (words.startsWith('max_hours reached')) return 'deadline';
  if (/^pod \S* ?no longer exists/.test(words)) return 'pod_gone';
  if (words.startsWith('pod deleted by `pod rm`')) return 'pod_removed';
  if (words === 'interrupted before the job started') return 'interrupted';
  if (words.includes('; not recovered: ') || words.includes('could not start on the new pod')) {
    return 'recovery_failed';
  }
  if (words.startsWith('the job could not start')) return 'start_failed';
  const jobFailed = [
    'exited with code ',
    'plugin not loaded',
    'stopped without an exit code',
    'the job succeeded but wrote nothing',
    'the job stopped for a snapshot, but',
  ];
  if (jobFailed.some((start) => words.startsWith(start))) return 'job_failed';
  return 'unknown';
}
