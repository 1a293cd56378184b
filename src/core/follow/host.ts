/**
 * A run on the user's own machine (`kind = "ssh"`) followed to its end: the job followed over
 * SSH, then its results brought home verified. There is no pod: no lease, no watchdog, nothing
 * deleted on the machine.
 */
import type { Executor } from '../exec/executor';
import type { RunRecord } from '../runs/runRecord';
import { jobOutcome, type JobOutcome } from '../train/outcome';
import {
  alreadyRetrieved,
  finishRecord,
  followJob,
  recordedOutcome,
  retrieveEnded,
  summaryLine,
  type Followed,
  type RunCtx,
} from './collect';

/** What a run on the user's machine brings home. */
export interface HostResults {
  artifacts: readonly string[];
  maxRetrieveGb?: number | undefined;
}

/**
 * Follows the job of `run` on the machine to its end (or reads how it ended while nobody
 * followed), then retrieves its results verified. A run whose results are home already is left
 * as it is.
 */
export async function followOnHost(
  ctx: RunCtx,
  executor: Executor,
  run: RunRecord,
  results: HostResults,
  signal?: AbortSignal,
): Promise<Followed> {
  if (alreadyRetrieved(run)) {
    return { run, pod: null, ending: null, summary: summaryLine(ctx, run, null) };
  }
  const result = await followJob(ctx, executor, run, signal);
  const outcome =
    run.state === 'running' || run.state === 'preparing'
      ? jobOutcome(result.status, result.metrics, run.id)!
      : recordedOutcome(run);
  return collectOnHost(ctx, executor, run, outcome, results);
}

/**
 * Retrieves the results of an ended job from the machine, verified (a snapshot's checkpoint with
 * them), reads what its Hub push did, and saves the run's end. Nothing is deleted there.
 */
export async function collectOnHost(
  ctx: RunCtx,
  executor: Executor,
  run: RunRecord,
  outcome: JobOutcome,
  results: HostResults,
): Promise<Followed> {
  const got = await retrieveEnded(ctx, executor, run, outcome, {
    ...results,
    overSpace: () =>
      `Free space here (or raise max_retrieve_gb), then retrieve with \`overbrainer train attach ${run.id}\`: the results stay on the machine`,
  });
  finishRecord(ctx, run, got.outcome, got.verified, got.problem, got.hubPush);
  return { run, pod: null, ending: null, summary: summaryLine(ctx, run, null) };
}
