/**
 * What the watch of a run's pod found, acted on: past a limit the pod is deleted and the run
 * fails; after a failed watch the pod is looked up, and a pod gone or stopped ends the run with
 * that reason (a death recovery may take up: ./recover.ts), a pod still there leaves the follow
 * lost, not failed.
 */
import { isAbortError } from '../clock';
import { describeError } from '../errors';
import { failRun, log, type PodCtx } from '../pod/context';
import { limitEnd, limitFailure } from '../pod/limitEnd';
import { PodError } from '../pod/podError';
import { FAILED_BY_POD_RM } from '../pod/podList';
import { HOST_MISSES_ALLOWED } from '../pod/cluster';
import { hostSilent, stillThere } from '../pod/reconnect';
import { forgetKeys, isUnreachable, remove, warnUnreachable } from '../pod/remove';
import { whileNobodyFollows } from '../pod/watchdogWords';
import { isDead, type Pod } from '../runpod/api';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import type { FollowResult } from '../train/follow';
import { FollowError } from '../train/followOutcome';
import { ExecError } from '../exec/executor';
import type { Watched } from './watch';

/**
 * Acts on what the watch found: past the deadline, deletes the pod and fails
 * the run; after a failed watch, fails the run when its pod is gone. Callers
 * must not abort it midway: it may be deleting the pod.
 */
export async function settleWatch(
  ctx: PodCtx,
  pod: PodRecord,
  run: RunRecord,
  watched: Watched,
): Promise<FollowResult> {
  switch (watched.kind) {
    case 'ended':
      return watched.result;
    case 'deadline_passed':
    case 'cost_cap_passed': {
      const limit = watched.kind === 'deadline_passed' ? 'deadline' : 'cost_cap';
      await remove(ctx, pod, limit, 'client');
      // No pod is left: the host-key secret (a private key in the account) goes with the client key.
      if (!pod.mayHaveOtherPods()) await forgetKeys(ctx, run.id);
      const end = limitEnd(limit);
      failRun(ctx, run, end.cause, end.message);
      throw end.error;
    }
    case 'failed':
      throw await unreachable(
        ctx,
        pod,
        run,
        watched.error,
        watched.signal,
        watched.goneSeenMs ?? null,
      );
  }
}

/**
 * The watch failed with `error`: when the pod is gone, the run fails with that reason instead.
 * While the API cannot be reached to tell, it is looked up again every `retryMaxMs` for
 * `reconcileListLimitMs`, each wait announced by the `api_unreachable` countdown, which says
 * what the pod's watchdog does meanwhile; past that (or on a stop) the follow is lost, not failed.
 */
async function unreachable(
  ctx: PodCtx,
  pod: PodRecord,
  run: RunRecord,
  error: unknown,
  signal?: AbortSignal,
  goneSeenMs: number | null = null,
): Promise<unknown> {
  if (isAbortError(error)) return error;
  const startMs = ctx.clock.nowMs();
  const untilMs = startMs + ctx.timing.reconcileListLimitMs;
  // The lease was renewed last before the follow failed: it runs out by then at the latest.
  const leaseEndMs = startMs + ctx.timing.leaseTtlMs;
  let remote: Pod | null;
  for (;;) {
    try {
      remote = await stillThere(ctx, pod, signal, goneSeenMs);
      break;
    } catch (checkError) {
      const nowMs = ctx.clock.nowMs();
      if (signal?.aborted || !isUnreachable(checkError) || nowMs >= untilMs) {
        log(ctx, 'warn', `cannot look the pod up: ${describeError(checkError)}`);
        return error;
      }
      const waitMs = Math.min(ctx.timing.retryMaxMs, untilMs - nowMs);
      warnUnreachable(
        ctx,
        run.id,
        checkError,
        `the connection to pod ${pod.podId ?? '(none)'} of run ${run.id} is lost and the pod cannot be looked up`,
        waitMs,
        untilMs,
        whileNobodyFollows(pod, run, leaseEndMs),
      );
      try {
        await ctx.clock.sleep(waitMs, signal);
      } catch {
        return error;
      }
    }
  }
  if (remote !== null && !isDead(remote) && !pod.keep && answersNoMore(error)) {
    // Listed RUNNING, its host silent: a hung host bills for nothing, and the watchdog that would
    // end it runs on that host. Asked again first, so a link that was down (a laptop waking up)
    // is no verdict.
    if (await hostSilent(ctx, pod, run, HOST_MISSES_ALLOWED, signal)) {
      const message = `the host of pod ${remote.id} of run ${run.id} stopped answering while Runpod listed it ${remote.status}, so the client deleted it (its watchdog, on that host, could not act)`;
      log(ctx, 'warn', message);
      // Not on the signal: a stop never halts a delete under way.
      await remove(ctx, pod, 'died', 'client');
      if (!pod.mayHaveOtherPods()) await forgetKeys(ctx, run.id);
      failRun(ctx, run, 'host_lost', message);
      return new PodError('host_lost', message, null, { cause: error });
    }
    // It answered, or changed while asked (stopped, deleted): what it is now decides below.
    remote = await stillThere(ctx, pod, signal, null).catch(() => remote);
  }
  if (remote !== null && isDead(remote)) {
    // Stopped under the job (a host failure, a stop from the console): the processes are gone,
    // the disk and what the job wrote stay, and the stopped pod's disk still bills.
    return new PodError(
      'pod_stopped',
      `pod ${remote.id} of run ${run.id} is ${remote.status}: it stopped while its job ran, so the job no longer runs; ` +
        'its disk (with what the job wrote) is kept and still bills',
      `Start it again in the Runpod console and attach with "overbrainer train attach ${run.id}" to retrieve what is there, ` +
        `or remove it with "overbrainer pod rm ${run.id} --force".`,
      { cause: error, podStatus: remote.status },
    );
  }
  if (remote !== null) return error;
  // `pod rm --force` from another process deleted it: its words when it already failed the run
  // (it does once its delete is confirmed), else the same.
  if (pod.deletedBy === 'pod_rm') {
    const removedBy = freshRunMessage(ctx, run) ?? FAILED_BY_POD_RM;
    // Saved here too: the remover records the run failed only once its delete is confirmed.
    failRun(ctx, run, 'pod_removed', removedBy);
    return new PodError(
      'pod_gone',
      `pod ${pod.podId ?? '(none)'} was deleted by \`overbrainer pod rm\`: ${removedBy}`,
      'The results on the pod are lost; train again (the runs/ folder keeps what was already copied).',
    );
  }
  const limit = limitFailure(pod, ctx.clock.nowMs());
  if (limit !== null) {
    failRun(ctx, run, limit.cause, limit.message);
    return limit.error;
  }
  const message = `pod ${pod.podId ?? '(none)'} no longer exists`;
  failRun(ctx, run, 'pod_gone', message);
  return new PodError(
    'pod_gone',
    message,
    'The results on the pod are lost; train again (the runs/ folder keeps what was already copied).',
  );
}

/** The message of the run as saved on disk when it is already failed there, else null. */
function freshRunMessage(ctx: PodCtx, run: RunRecord): string | null {
  try {
    const fresh = ctx.store.loadRun(run.id);
    return fresh.state === 'failed' ? fresh.message : null;
  } catch {
    return null;
  }
}

/** Whether following failed because the pod's SSH gave no answer at all (not refused, not denied). */
function answersNoMore(error: unknown): boolean {
  return (
    error instanceof FollowError &&
    error.kind === 'unreachable' &&
    error.cause instanceof ExecError &&
    error.cause.kind === 'timeout'
  );
}
