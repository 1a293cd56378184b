/**
 * A run on a pod followed again after any restart (attach): its pod reached again, a running job
 * followed to its end (./run.ts), an ended one's results brought home, a pod that died while
 * nobody followed replaced by a new one when the run may go on, or the run recorded as its pod
 * left it.
 */
import type { Executor } from '../exec/executor';
import { failRun, log, type PodCtx } from '../pod/context';
import { limitFailure } from '../pod/limitEnd';
import { endPod } from '../pod/podEnd';
import { PodError } from '../pod/podError';
import { stillThere } from '../pod/reconnect';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import type { FollowResult } from '../train/follow';
import { jobStatus } from '../train/job';
import { jobOutcome } from '../train/outcome';
import {
  alreadyRetrieved,
  collect,
  followJob,
  NOT_RETRIEVED,
  recordedOutcome,
  summaryLine,
  type Followed,
} from './collect';
import { reconnectRestarting } from './moved';
import { deathOf, type RecoveryPlan } from './recover';
import { followAfterDeath, followOnPod, type FollowEnd, type FollowOptions } from './run';

/**
 * Follows the started run `run` on its pod `pod` again to its end. `options.plan` is the run's
 * recovery plan as the config has it: used only for a job still running mid-way on a pod not kept,
 * with max_recoveries above 0.
 */
export async function followAgain(
  ctx: PodCtx,
  run: RunRecord,
  pod: PodRecord,
  options: FollowOptions,
): Promise<FollowEnd> {
  const { signal } = options;
  const plan = recoveryAllowed(run, pod, options.plan ?? null);
  const collected = (result: Followed): FollowEnd => ({ kind: 'collected', result });
  let executor: Executor | null;
  try {
    // A pod restarting (no SSH endpoint yet) is waited for, as a followed pod's restart is.
    executor = await reconnectRestarting(ctx, pod, run, signal);
  } catch (error) {
    // Its pod died (EXITED) while nobody followed: the run goes on on a new pod.
    const death = plan === null ? null : deathOf(error, pod);
    if (plan === null || death === null) throw error;
    return await followAfterDeath(ctx, run, { pod, death, cause: error }, { ...options, plan });
  }
  if (executor === null) {
    // Gone while nobody followed (not by a limit or `pod rm`): the run goes on on a new pod.
    const gone = new PodError('pod_gone', `pod ${pod.podId ?? ''} no longer exists`);
    if (plan !== null && limitFailure(pod, ctx.clock.nowMs()) === null && deathOf(gone, pod)) {
      const died = { pod, death: 'pod_deleted' as const, cause: gone };
      return await followAfterDeath(ctx, run, died, { ...options, plan });
    }
    return collected(podGone(ctx, run, pod));
  }
  try {
    const status = await jobStatus(executor, run.remoteDir);
    if (status.kind === 'running') {
      ctx.bus.publish({ type: 'runWatched', runId: run.id });
      return await followOnPod(ctx, run, { pod, executor, fromOffset: 0 }, { ...options, plan });
    }
    if (alreadyRetrieved(run)) {
      // Its client died after the results were verified here (before or while it ended the
      // pod): nothing to fetch again, only the pod to end.
      log(ctx, 'info', `run ${run.id} was already retrieved: ending its pod`);
      const ending = await endPod(ctx, pod, executor, run, true);
      return collected({ run, pod, ending, summary: summaryLine(ctx, run, pod) });
    }
    // Ended while nobody followed: summarize from the pod's files, then collect.
    let result: FollowResult;
    try {
      result = await followJob(ctx, executor, run, signal);
    } catch (error) {
      // The pod may have been deleted since we connected (its retrieve grace, a limit, or
      // `pod rm` elsewhere): then it is recorded gone, as when attach finds it gone.
      if (signal?.aborted || (await stillThere(ctx, pod)) !== null) throw error;
      return collected(podGone(ctx, run, pod));
    }
    const outcome =
      run.state === 'running' || run.state === 'preparing'
        ? jobOutcome(result.status, result.metrics, run.id)!
        : recordedOutcome(run);
    const { artifacts, maxRetrieveGb } = options;
    return collected(await collect(ctx, executor, run, pod, outcome, artifacts, maxRetrieveGb));
  } finally {
    executor.dispose();
  }
}

/**
 * The plan, when the run may go on on a new pod: its job mid-way (a run whose job ended but whose
 * results are not home is not recovered: its pod's death loses what did not come home, as
 * before), its pod not kept, and recovery on (with max_recoveries = 0 a dead pod ends the run as
 * it always did: failed, recorded gone).
 */
function recoveryAllowed(
  run: RunRecord,
  pod: PodRecord,
  plan: RecoveryPlan | null,
): RecoveryPlan | null {
  const midJob = run.state === 'running' && !(run.message ?? '').includes(NOT_RETRIEVED);
  if (!midJob || pod.keep || plan === null) return null;
  return plan.target.maxRecoveries > 0 ? plan : null;
}

/**
 * The run's pod turned out gone (recorded in pod.json by the look that found it): a run still
 * `running` fails with the limit that ended it, or because its pod no longer exists.
 */
export function podGone(ctx: PodCtx, run: RunRecord, pod: PodRecord): Followed {
  if (run.state === 'running') {
    const limit = limitFailure(pod, ctx.clock.nowMs());
    if (limit !== null) failRun(ctx, run, limit.cause, limit.message);
    else failRun(ctx, run, 'pod_gone', `pod ${pod.podId ?? ''} no longer exists`);
  }
  return { run, pod, ending: 'deleted', summary: summaryLine(ctx, run, pod) };
}
