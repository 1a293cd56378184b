/**
 * A followed job's end collected: the verified retrieval (a snapshot's checkpoint included), the
 * run's record saying how it ended, the pod's end, and the run's final line.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describeError } from '../errors';
import type { Executor } from '../exec/executor';
import { seedFromStream } from '../pod/checkpointStream';
import { log, publishState, type PodCtx } from '../pod/context';
import { endPod, type Ending } from '../pod/podEnd';
import { podHandle } from '../pod/podHandle';
import type { PodRecord } from '../runs/podRecord';
import { endRun, isEnded, reopenRun } from '../runs/runEnd';
import type { RunRecord } from '../runs/runRecord';
import { MetricsFollower, type FollowResult } from '../train/follow';
import { SNAPSHOT_JSON } from '../train/job';
import { jobOutcome, outcomeCause, withSnapshot, type JobOutcome } from '../train/outcome';
import { describeMismatches, RetrieveSpaceError } from '../train/retrieval';
import { retrieveReported } from '../train/retrievalTransfer';
import { readSnapshot } from '../train/snapshot';
import { readHubPush, recordHubPush, type HubPush } from '../train/hubPush';
import { holdLeaseDuring } from './watch';

/** A run followed to its end: its record, its pod's, how the pod ended, the final line. */
export interface Followed {
  run: RunRecord;
  pod: PodRecord | null;
  ending: Ending | null;
  /** The final line: `train: run <id> <state>; <summary>[; output in runs/<id>/output]`. */
  summary: string;
}

/** What following a run without a pod works with (a local job has no Runpod client). */
export type RunCtx = Pick<PodCtx, 'store' | 'bus' | 'clock' | 'timing'>;

/** Trainer artifacts never brought back (checkpoints at any depth). */
export const ARTIFACT_EXCLUDES = ['checkpoint-*'];

/** Follows the job of `run` over `executor` to its end: its metrics and log lines on the bus. */
export function followJob(
  ctx: RunCtx,
  executor: Executor,
  run: RunRecord,
  signal?: AbortSignal,
): Promise<FollowResult> {
  const follower = new MetricsFollower({
    executor,
    runId: run.id,
    runDir: run.remoteDir,
    bus: ctx.bus,
    clock: ctx.clock,
    timing: ctx.timing,
  });
  return follower.follow(signal);
}

/** Follows a local job to its end and records how it ended. */
export async function followLocal(
  ctx: RunCtx,
  executor: Executor,
  run: RunRecord,
  signal?: AbortSignal,
): Promise<Followed> {
  const result = await followJob(ctx, executor, run, signal);
  const outcome = withSnapshot(
    jobOutcome(result.status, result.metrics, run.id)!,
    await readSnapshot(executor, run.remoteDir),
  );
  finishRecord(ctx, run, outcome, true, null, await readHubPush(executor, run.remoteDir, null));
  return { run, pod: null, ending: null, summary: summaryLine(ctx, run, null) };
}

/** Saves the run's end: verified results, or why they are not there. */
export function finishRecord(
  ctx: RunCtx,
  run: RunRecord,
  outcome: JobOutcome,
  retrieved: boolean,
  retrievalProblem: string | null,
  hubPush: HubPush | null = null,
): void {
  if (outcome.snapshot !== undefined) run.snapshot = outcome.snapshot;
  if (retrieved) {
    const output = path.join(ctx.store.runDir(run.id), 'output');
    const empty = !fs.existsSync(output) || fs.readdirSync(output).length === 0;
    if (outcome.state === 'succeeded' && empty) {
      endRun(run, 'failed', 'job_failed', 'the job succeeded but wrote nothing under output/');
    } else {
      endRun(run, outcome.state, outcomeCause(outcome.state), outcome.message);
    }
  } else if (outcome.state === 'succeeded') {
    // Stays running: attach retrieves again.
    reopenRun(run, `${NOT_RETRIEVED}: ${retrievalProblem ?? 'unknown'}`);
  } else {
    const message = `${outcome.message ?? outcome.state}; ${NOT_RETRIEVED}: ${retrievalProblem ?? 'unknown'}`;
    endRun(run, outcome.state, 'not_retrieved', message);
  }
  recordHubPush(run, hubPush);
  ctx.store.saveRun(run);
  publishState(ctx, run);
}

/** In the message of a run whose job ended but whose results did not come home. */
export const NOT_RETRIEVED = 'artifacts not retrieved';

/**
 * Whether the run's results were already retrieved and verified: it ended (succeeded, failed,
 * cancelled, stopped) for another cause than `not_retrieved`, which is how {@link finishRecord}
 * saves an ended run whose results did not come home (a successful one stays `running`).
 */
export function alreadyRetrieved(run: RunRecord): boolean {
  return isEnded(run.state) && run.end?.cause !== 'not_retrieved';
}

/**
 * The outcome an ended run was recorded with before its results came home: its message without
 * the `artifacts not retrieved: …` that {@link finishRecord} added (a retrieval that now
 * succeeds must not keep saying so).
 */
export function recordedOutcome(run: RunRecord): JobOutcome {
  const before = (run.message ?? '').split(`; ${NOT_RETRIEVED}: `)[0]!;
  const message = before === '' || before === run.state ? null : before;
  return { state: run.state as JobOutcome['state'], message };
}

/** Retrieves the results of an ended job, saves the run, ends the pod. */
export async function collect(
  ctx: PodCtx,
  executor: Executor,
  run: RunRecord,
  pod: PodRecord,
  outcome: JobOutcome,
  artifacts: readonly string[],
  maxRetrieveGb?: number,
): Promise<Followed> {
  const got = await retrieveEnded(ctx, executor, run, outcome, {
    artifacts,
    maxRetrieveGb,
    // The lease is renewed while the results download: the deadline never cuts a retrieval.
    during: (download) => holdLeaseDuring(ctx, run, podHandle(ctx, pod, executor), download),
    overSpace: (error) => overSpaceNextAction(run, error),
  });
  finishRecord(ctx, run, got.outcome, got.verified, got.problem, got.hubPush);
  const ending = await endPod(ctx, pod, executor, run, got.verified);
  return { run, pod, ending, summary: summaryLine(ctx, run, pod) };
}

/** What an ended job's retrieval found: its outcome with its snapshot, and why it is not home. */
export interface Retrieval {
  outcome: JobOutcome;
  verified: boolean;
  /** Why the results are not home verified; null when they are. */
  problem: string | null;
  /** What the job's Hub push did (`hub_model_id`); null when it made none or it is unreadable. */
  hubPush: HubPush | null;
}

/**
 * Brings the results of an ended job home verified, on a pod or on the user's machine: a job
 * stopped for a snapshot brings its checkpoint with them (the other checkpoints stay excluded),
 * reused where it streamed home already; and reads what the job's Hub push did (not being able to
 * read it costs no retrieval). `during` wraps the download (a pod renews its lease meanwhile);
 * `overSpace` says what to do about results over `max_retrieve_gb` or the free space.
 */
export async function retrieveEnded(
  ctx: RunCtx,
  executor: Executor,
  run: RunRecord,
  outcome: JobOutcome,
  options: {
    artifacts: readonly string[];
    maxRetrieveGb?: number | undefined;
    during?: <T>(download: () => Promise<T>) => Promise<T>;
    overSpace: (error: RetrieveSpaceError) => string;
  },
): Promise<Retrieval> {
  let verified = false;
  let problem: string | null = null;
  const hubPush = await readHubPush(executor, run.remoteDir, null).catch(() => null);
  const { artifacts, maxRetrieveGb } = options;
  const during = options.during ?? (<T>(download: () => Promise<T>): Promise<T> => download());
  try {
    // Not knowing whether there is a snapshot is not knowing what to fetch.
    outcome = withSnapshot(outcome, await readSnapshot(executor, run.remoteDir));
    const kept = outcome.snapshot?.checkpoint;
    // A snapshot checkpoint streamed home already is reused: only files that differ are fetched.
    const seeded = kept === undefined ? 0 : await seedFromStream(ctx.store.runDir(run.id), kept);
    const got = await during(() =>
      retrieveReported(ctx, run.id, 'retrieve', {
        executor,
        remoteRunDir: run.remoteDir,
        localRunDir: ctx.store.runDir(run.id),
        entries: kept === undefined ? [...artifacts] : [...artifacts, SNAPSHOT_JSON, kept],
        excludes: kept === undefined ? ARTIFACT_EXCLUDES : [...ARTIFACT_EXCLUDES, `!${kept}`],
        clock: ctx.clock,
        ...(maxRetrieveGb === undefined ? {} : { maxRetrieveGb }),
      }),
    );
    verified = got.verified;
    log(
      ctx,
      'info',
      `run ${run.id}: ${got.transferredBytes} bytes fetched after the job ended (${got.reusedBytes} reused${seeded > 0 ? ', the snapshot checkpoint streamed home already' : ''})`,
    );
    if (!got.verified) problem = describeMismatches(got.mismatches);
  } catch (error) {
    problem = describeError(error);
    if (error instanceof RetrieveSpaceError) problem += `. ${options.overSpace(error)}`;
  }
  return { outcome, verified, problem, hubPush };
}

/** What to do about results over `max_retrieve_gb` or the free space, for `run`. */
function overSpaceNextAction(run: RunRecord, error: RetrieveSpaceError): string {
  const first =
    error.kind === 'over_limit'
      ? `Raise max_retrieve_gb under [targets.${run.target}] in overbrainer.toml`
      : 'Free space on this disk';
  return (
    `${first}, then retrieve with \`overbrainer train attach ${run.id}\`; see what the job ` +
    `wrote with \`overbrainer runs logs ${run.id}\`; or delete the pod and the results on it ` +
    `with \`overbrainer pod rm ${run.id}\`. The pod keeps them until its retrieve grace ends`
  );
}

/** The final line of a run. */
export function summaryLine(
  ctx: Pick<PodCtx, 'store'>,
  run: RunRecord,
  pod: PodRecord | null,
): string {
  const parts = [`train: run ${run.id} ${run.state}`];
  if (run.message) parts.push(run.message);
  if (pod) parts.push(pod.summary());
  const output = path.join(ctx.store.runDir(run.id), 'output');
  if (fs.existsSync(output) && fs.readdirSync(output).length > 0)
    parts.push(`output in runs/${run.id}/output`);
  return parts.join('; ');
}
