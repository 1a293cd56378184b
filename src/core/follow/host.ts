/**
 * A run on the user's own machine (`kind = "ssh"`) followed to its end: the job followed over
 * SSH, then its results brought home verified. There is no pod: no lease, no watchdog, nothing
 * deleted on the machine.
 */
import { describeError } from '../errors';
import type { Executor } from '../exec/executor';
import { log } from '../pod/context';
import type { RunRecord } from '../runs/runRecord';
import { MetricsFollower } from '../train/follow';
import { SNAPSHOT_JSON } from '../train/job';
import { jobOutcome, withSnapshot, type JobOutcome } from '../train/outcome';
import { describeMismatches, RetrieveSpaceError } from '../train/retrieval';
import { retrieveReported } from '../train/retrievalTransfer';
import { readSnapshot } from '../train/snapshot';
import {
  alreadyRetrieved,
  ARTIFACT_EXCLUDES,
  finishRecord,
  recordedOutcome,
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
  const follower = new MetricsFollower({
    executor,
    runId: run.id,
    runDir: run.remoteDir,
    bus: ctx.bus,
    clock: ctx.clock,
    timing: ctx.timing,
  });
  const result = await follower.follow(signal);
  const outcome =
    run.state === 'running' || run.state === 'preparing'
      ? jobOutcome(result.status, result.metrics, run.id)!
      : recordedOutcome(run);
  return collectOnHost(ctx, executor, run, outcome, results);
}

/** Retrieves the results of an ended job from the machine, verified, and saves the run's end. */
export async function collectOnHost(
  ctx: RunCtx,
  executor: Executor,
  run: RunRecord,
  outcome: JobOutcome,
  results: HostResults,
): Promise<Followed> {
  let verified = false;
  let problem: string | null = null;
  try {
    // A job stopped for a snapshot: its checkpoint comes home with the results.
    outcome = withSnapshot(outcome, await readSnapshot(executor, run.remoteDir));
    const kept = outcome.snapshot?.checkpoint;
    const got = await retrieveReported(ctx, run.id, 'retrieve', {
      executor,
      remoteRunDir: run.remoteDir,
      localRunDir: ctx.store.runDir(run.id),
      entries:
        kept === undefined ? [...results.artifacts] : [...results.artifacts, SNAPSHOT_JSON, kept],
      excludes: kept === undefined ? ARTIFACT_EXCLUDES : [...ARTIFACT_EXCLUDES, `!${kept}`],
      clock: ctx.clock,
      ...(results.maxRetrieveGb === undefined ? {} : { maxRetrieveGb: results.maxRetrieveGb }),
    });
    verified = got.verified;
    log(ctx, 'info', `run ${run.id}: ${got.transferredBytes} bytes fetched after the job ended`);
    if (!got.verified) problem = describeMismatches(got.mismatches);
  } catch (error) {
    problem = describeError(error);
    if (error instanceof RetrieveSpaceError) {
      problem += `. Free space here (or raise max_retrieve_gb), then retrieve with \`overbrainer train attach ${run.id}\`: the results stay on the machine`;
    }
  }
  finishRecord(ctx, run, outcome, verified, problem);
  return { run, pod: null, ending: null, summary: summaryLine(ctx, run, null) };
}
