/**
 * Following a running job to its end and collecting it: the verified retrieval (a snapshot's
 * checkpoint included), the run's record, the pod's end.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Executor } from '../exec/executor';
import { log, type PodCtx } from '../pod/context';
import { endPod } from '../pod/podEnd';
import { followMoved } from '../follow/moved';
import { settleWatch } from '../follow/settle';
import { holdLeaseDuring, watchLeased } from '../follow/watch';
import { seedFromStream } from '../pod/checkpointStream';
import { watchdogWhileNobodyFollows } from '../pod/watchdogWords';
import { MetricsFollower, type FollowResult } from '../train/follow';
import { SNAPSHOT_JSON } from '../train/job';
import { jobOutcome, outcomeCause, withSnapshot, type JobOutcome } from '../train/outcome';
import { endRun, isEnded, reopenRun } from '../runs/runEnd';
import { readSnapshot } from '../train/snapshot';
import { describeMismatches, RetrieveSpaceError } from '../train/retrieval';
import { retrieveReported } from '../train/retrievalTransfer';
import type { PodRecord } from '../runs/podRecord';
import type { AttemptEnd, RunRecord } from '../runs/runRecord';
import { type FlowDeps, FlowError, type FlowResult, publishState, summaryLine } from './deps';
import {
  closeAttempt,
  deathOf,
  type FollowNew,
  recoverAfterDeath,
  type RecoveryPlan,
  StepTimes,
} from './recover';
import { describeError } from '../errors';

/** Trainer artifacts never brought back (checkpoints at any depth). */
const ARTIFACT_EXCLUDES = ['checkpoint-*'];

export async function followLocal(
  deps: FlowDeps,
  executor: Executor,
  run: RunRecord,
  signal?: AbortSignal,
): Promise<FlowResult> {
  const follower = new MetricsFollower({
    executor,
    runId: run.id,
    runDir: run.remoteDir,
    bus: deps.bus,
    clock: deps.clock,
    timing: deps.timing,
  });
  const result = await follower.follow(signal);
  const outcome = withSnapshot(
    jobOutcome(result.status, result.metrics, run.id)!,
    await readSnapshot(executor, run.remoteDir),
  );
  finishRecord(deps, run, outcome, true, null);
  return { run, pod: null, ending: null, summary: summaryLine(deps, run, null) };
}

/** Saves the run's end: verified results, or why they are not there. */
function finishRecord(
  deps: FlowDeps,
  run: RunRecord,
  outcome: JobOutcome,
  retrieved: boolean,
  retrievalProblem: string | null,
): void {
  if (outcome.snapshot !== undefined) run.snapshot = outcome.snapshot;
  if (retrieved) {
    const output = path.join(deps.store.runDir(run.id), 'output');
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
  deps.store.saveRun(run);
  publishState(deps, run);
}

/** How a pod job is followed beyond its pod: recovery on a new pod when it dies. */
export interface FollowOptions {
  /** Go on on a new pod when the pod dies mid-job (null: the run fails as before). */
  plan?: RecoveryPlan | null;
  /** Where in metrics.jsonl to start (a recovered run's file starts with the earlier curve). */
  fromOffset?: number;
  /** The steps' arrival times, shared by the attempts of one follow. */
  steps?: StepTimes;
  /** Most one retrieval brings home (GB): the target's `max_retrieve_gb`; default 200. */
  maxRetrieveGb?: number;
}

/**
 * Follows a running pod job to its end, then retrieves and ends the pod; with a recovery plan,
 * a pod that dies mid-job is followed by a new one (flow/recover.ts).
 */
export async function followOnPod(
  ctx: PodCtx,
  deps: FlowDeps,
  executor: Executor,
  run: RunRecord,
  pod: PodRecord,
  artifacts: readonly string[],
  signal?: AbortSignal,
  options: FollowOptions = {},
): Promise<FlowResult> {
  const plan = options.plan ?? null;
  const ownSteps =
    plan !== null && options.steps === undefined
      ? new StepTimes(ctx.bus, run.id, () => ctx.clock.nowMs())
      : null;
  const steps = options.steps ?? ownSteps;
  const moved: Executor[] = [];
  try {
    let current = executor;
    const { maxRetrieveGb } = options;
    let watched = await watchLeased(ctx, current, run, pod, signal, options.fromOffset ?? 0, {
      maxRetrieveGb,
    });
    // The pod restarted on a new port (Runpod publishes a restarted container anew): follow it
    // there from where the metrics stopped, a bounded number of times.
    for (let moves = 0; watched.kind === 'failed' && moves < MAX_ENDPOINT_MOVES; moves++) {
      if (signal?.aborted) break;
      const next = await followMoved(ctx, pod, run, signal).catch((error: unknown) => {
        log(
          ctx,
          'debug',
          `run ${run.id}: cannot follow its pod to a new endpoint: ${describeError(error)}`,
        );
        return null;
      });
      if (next === null) break;
      moved.push(next);
      current = next;
      watched = await watchLeased(ctx, current, run, pod, signal, watched.offset, {
        maxRetrieveGb,
      });
    }
    if (
      signal?.aborted &&
      watched.kind !== 'deadline_passed' &&
      watched.kind !== 'cost_cap_passed'
    ) {
      throw new FlowError('stopped_following', stopFollowingMessage(ctx, run, pod), null);
    }
    let result: FollowResult;
    try {
      result = await settleWatch(ctx, pod, run, watched);
    } catch (error) {
      const death = plan === null || steps === null ? null : deathOf(error, pod);
      if (death === null || plan === null || steps === null) throw error;
      const died = { death, cause: error, plan, artifacts, signal, steps, maxRetrieveGb };
      return await recoverOnNewPod(ctx, deps, run, pod, died);
    }
    const collected = await collect(
      ctx,
      deps,
      current,
      run,
      pod,
      jobOutcome(result.status, result.metrics, run.id)!,
      artifacts,
      maxRetrieveGb,
    );
    if (run.attempts !== undefined) {
      closeAttempt(run, pod, ctx.clock.nowMs(), null);
      deps.store.saveRun(run);
    }
    return collected;
  } finally {
    for (const next of moved) next.dispose();
    ownSteps?.dispose();
  }
}

/** How a pod died under its job, and how the run's new pod is followed ({@link recoverOnNewPod}). */
export interface PodDeath {
  death: AttemptEnd;
  /** The error that said so. */
  cause: unknown;
  plan: RecoveryPlan;
  artifacts: readonly string[];
  signal?: AbortSignal | undefined;
  /** The target's `max_retrieve_gb` (default 200). */
  maxRetrieveGb?: number | undefined;
  /** The follow's step times; without them, its own for this recovery. */
  steps?: StepTimes | undefined;
}

/** The pod of `run` died under its job: the run goes on on a new pod (flow/recover.ts), followed. */
export async function recoverOnNewPod(
  ctx: PodCtx,
  deps: FlowDeps,
  run: RunRecord,
  pod: PodRecord,
  { death, cause, plan, artifacts, signal, steps: given, maxRetrieveGb }: PodDeath,
): Promise<FlowResult> {
  const ownSteps =
    given === undefined ? new StepTimes(ctx.bus, run.id, () => ctx.clock.nowMs()) : null;
  const steps = given ?? ownSteps!;
  const follow: FollowNew = (next, nextPod, fromOffset) =>
    followOnPod(ctx, deps, next, run, nextPod, artifacts, signal, {
      plan,
      fromOffset,
      steps,
      maxRetrieveGb,
    });
  try {
    return await recoverAfterDeath(ctx, deps, run, pod, death, cause, plan, steps, follow, signal);
  } finally {
    ownSteps?.dispose();
  }
}

/** How many times one follow goes after its pod to a new SSH endpoint before it gives up. */
const MAX_ENDPOINT_MOVES = 3;

/** What stopping the follow leaves running (Ctrl-C once the job runs stops only the follow). */
export function stopFollowingMessage(ctx: PodCtx, run: RunRecord, pod: PodRecord): string {
  const watchdog = watchdogWhileNobodyFollows(pod, ctx.clock.nowMs() + ctx.timing.leaseTtlMs);
  if (pod.keep) {
    return `stopped following run ${run.id}: the job keeps running; attach again with \`overbrainer train attach ${run.id}\`; ${watchdog}`;
  }
  return (
    `stopped following run ${run.id}: the job and pod ${pod.podId ?? ''} keep running; attach again with ` +
    `\`overbrainer train attach ${run.id}\`, or remove the pod with \`overbrainer pod rm ${run.id}\`; ${watchdog}`
  );
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
  deps: FlowDeps,
  executor: Executor,
  run: RunRecord,
  pod: PodRecord,
  outcome: JobOutcome,
  artifacts: readonly string[],
  maxRetrieveGb?: number,
): Promise<FlowResult> {
  let verified = false;
  let problem: string | null = null;
  try {
    // A job that stopped for a snapshot: its checkpoint comes home with the results (the other
    // checkpoints stay excluded). Not knowing whether there is one is not knowing what to fetch.
    outcome = withSnapshot(outcome, await readSnapshot(executor, run.remoteDir));
    const kept = outcome.snapshot?.checkpoint;
    // A snapshot checkpoint streamed home already is reused: only files that differ are fetched.
    const seeded = kept === undefined ? 0 : await seedFromStream(deps.store.runDir(run.id), kept);
    // The lease is renewed while the results download: the deadline never cuts a retrieval.
    const got = await holdLeaseDuring(ctx, executor, run, pod, () =>
      retrieveReported(deps, run.id, 'retrieve', {
        executor,
        remoteRunDir: run.remoteDir,
        localRunDir: deps.store.runDir(run.id),
        entries: kept === undefined ? [...artifacts] : [...artifacts, SNAPSHOT_JSON, kept],
        excludes: kept === undefined ? ARTIFACT_EXCLUDES : [...ARTIFACT_EXCLUDES, `!${kept}`],
        clock: deps.clock,
        ...(maxRetrieveGb === undefined ? {} : { maxRetrieveGb }),
      }),
    );
    verified = got.verified;
    log(
      ctx,
      'info',
      `run ${run.id}: ${got.transferredBytes} bytes fetched after the job ended (${got.reusedBytes} reused${seeded > 0 ? ', the snapshot checkpoint streamed home already' : ''})`,
    );
    if (!got.verified) {
      problem = describeMismatches(got.mismatches);
    }
  } catch (error) {
    problem = describeError(error);
    if (error instanceof RetrieveSpaceError) problem += `. ${overSpaceNextAction(run, error)}`;
  }
  finishRecord(deps, run, outcome, verified, problem);
  const ending = await endPod(ctx, pod, executor, run, verified);
  return { run, pod, ending, summary: summaryLine(deps, run, pod) };
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
