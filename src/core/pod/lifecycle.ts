/**
 * A started Runpod run: its job is followed while the lease
 * holds the pod's deadline off, the client's own guard deletes the pod when
 * the watchdog did not; the pod is ended once the results are retrieved (./podEnd.ts). Reaching
 * the pod again is ./reconnect.ts; what a limit makes of the run, ./limitEnd.ts.
 */
import { isAbortError, rfc3339 } from '../clock';
import type { Executor } from '../exec/executor';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import { endRun, type RunEndCause } from '../runs/runEnd';
import { FollowError, MetricsFollower, type FollowResult } from '../train/follow';
import { Pace } from '../train/pace';
import { requestSnapshot } from '../train/snapshot';
import { isDead, NETWORK_VOLUME_PATH, type Pod } from '../runpod/api';
import { log, warn, type PodCtx } from './context';
import { followLostWords, whileNobodyFollows } from './watchdogWords';
import { watchCheckpoints } from './checkpointStream';
import { watchDisk } from './diskWatch';
import { watchGpus } from './gpuWatch';
import {
  costCapAtUnixS,
  guardFires,
  overrun,
  pastCostCap,
  renewalDue,
  snapshotAtUnixS,
} from './lease';
import { PodError } from './podError';
import { PodPushes } from './podPushes';
import { syncKeep } from './podEnd';
import { LEASE_FILE } from './podScripts';
import { forgetKeys, isUnreachable, remove, warnUnreachable } from './remove';
import { describeError } from '../errors';
import { stillThere } from './reconnect';
import { limitEnd, limitFailure } from './limitEnd';

/** How the watch ended. */
export type Watched =
  | { kind: 'ended'; result: FollowResult }
  /**
   * `offset`: the metrics file's byte offset after the last line published, to follow on from.
   * `signal`: the watch's own, so that settling the failure stops looking when the user stops.
   */
  | {
      kind: 'failed';
      error: unknown;
      offset: number;
      signal?: AbortSignal | undefined;
      /**
       * When a look made as the watch began to fail found the pod gone (404 or TERMINATED);
       * once the pod is confirmed gone, its spend estimate ends there.
       */
      goneSeenMs?: number | null;
    }
  /** The client's deadline passed with no lease held; nothing was deleted yet. */
  | { kind: 'deadline_passed' }
  /** `max_cost_usd` is spent (whatever the lease); nothing was deleted yet. */
  | { kind: 'cost_cap_passed' };

/**
 * Follows the started run until its job ends, renewing the pod's lease while
 * the job makes progress (a metric within `stallMs`), so `max_hours` deletes
 * nothing while a client follows. Once the job stalls or the lease cannot be
 * renewed, the lease runs out and the guard fires at the deadline plus the
 * margin. Warns once when the job would end past the deadline. Never calls the
 * Runpod API, so aborting it (closing VS Code) deletes nothing.
 */
export async function watchLeased(
  ctx: PodCtx,
  executor: Executor,
  run: RunRecord,
  pod: PodRecord,
  signal?: AbortSignal,
  fromOffset = 0,
  results: { maxRetrieveGb?: number | undefined } = {},
): Promise<Watched> {
  const stop = new AbortController();
  const onAbort = (): void => stop.abort(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  // An abort before the watch began (Ctrl-C during the shielded job start) fires no event.
  if (signal?.aborted) onAbort();
  const pushes = new PodPushes(ctx.clock); // checkpoints and disk samples, pushed by the pod
  // At the first failure to reach the job, one look at the pod: a pod deleted behind the client's
  // back is seen gone then, not only once the follow gives up (its spend ends at that look).
  let goneSeenMs: number | null = null;
  let looked = false;
  const lookOnce = (): void => {
    if (looked || pod.podId === null) return;
    looked = true;
    void ctx.client.getPod(pod.podId, { signal: stop.signal }).then(
      (remote) => {
        if (remote === null || remote.status === 'TERMINATED') goneSeenMs = ctx.clock.nowMs();
      },
      () => undefined,
    );
  };
  const follower = new MetricsFollower({
    executor,
    runId: run.id,
    runDir: run.remoteDir,
    bus: ctx.bus,
    clock: ctx.clock,
    timing: ctx.timing,
    fromOffset,
    pushes: pushes.sink({
      lookMs: ctx.timing.checkpointLookMs,
      diskMs: ctx.timing.diskPollMs,
      volumeDir: pod.networkVolumeId === null ? null : NETWORK_VOLUME_PATH,
      gpuMs: ctx.timing.gpuSampleMs,
    }),
  });
  const pace = new Pace();
  let lastMetricMs = ctx.clock.nowMs();
  let warned = false;
  const subscription = ctx.bus.on((event) => {
    if (event.type !== 'metric' || event.runId !== run.id) return;
    pace.add(event.metric);
    lastMetricMs = ctx.clock.nowMs();
    if (warned) return;
    const note = overrun({ etaMs: () => pace.eta() }, pod, lastMetricMs, true);
    if (note !== null) {
      warned = true;
      warn(ctx, run.id, 'overrun', note);
    }
  });
  const lease = `${run.remoteDir}/${LEASE_FILE}`;
  let renewedMs: number | null = null;
  let costSnapshotAsked = false;
  const holdLease = async (): Promise<'deadline_passed' | 'cost_cap_passed' | 'stopped'> => {
    while (!stop.signal.aborted) {
      syncKeep(ctx, pod);
      if (pastCostCap(pod, ctx.clock.nowMs())) return 'cost_cap_passed';
      if (!costSnapshotAsked && snapshotDue(ctx, pod)) {
        costSnapshotAsked = await askCostSnapshot(ctx, executor, run, pod);
      }
      const nowMs = ctx.clock.nowMs();
      // Renewed while kept too (the watchdog ignores it then): a release finds the lease held.
      if (renewalDue(ctx.timing, renewedMs, lastMetricMs, nowMs)) {
        try {
          await executor.writeFileAtomic(lease, '');
          renewedMs = nowMs;
        } catch (error) {
          log(ctx, 'debug', `cannot renew the lease of run ${run.id}: ${describeError(error)}`);
        }
      }
      if (guardFires(ctx.timing, pod, renewedMs, ctx.clock.nowMs())) return 'deadline_passed';
      try {
        await ctx.clock.sleep(ctx.timing.leaseTickMs, stop.signal);
      } catch (error) {
        if (isAbortError(error) || stop.signal.aborted) return 'stopped';
        throw error;
      }
    }
    return 'stopped';
  };
  // The disk policy and the checkpoint stream run alongside the lease holder until the watch
  // ends (`stop`), on what the pod pushes. They never reject, and nothing waits for a sample in
  // flight on a connection that may be gone.
  void watchDisk(ctx, executor, run, pod, stop.signal, pushes);
  void watchCheckpoints(ctx, executor, run, stop.signal, pushes, results.maxRetrieveGb);
  void watchGpus(ctx, run, pod, stop.signal, pushes);
  try {
    void follower.firstFailure.then(lookOnce);
    const failed = (error: unknown, offset: number): Watched => ({
      kind: 'failed',
      error,
      offset,
      signal,
      goneSeenMs,
    });
    const watched = follower.outcome(stop.signal).then(
      (outcome): Watched =>
        outcome.kind === 'ended'
          ? { kind: 'ended', result: outcome.result }
          : failed(outcome.error, outcome.offset),
      (error: unknown): Watched => failed(error, follower.offset),
    );
    const guarded = holdLease().then((why): Watched | null =>
      why === 'stopped' ? null : { kind: why },
    );
    const first = await Promise.race([watched, guarded.then((w) => w ?? watched)]);
    stop.abort();
    if (first.kind === 'deadline_passed' || first.kind === 'cost_cap_passed') {
      await watched; // let the follower wind down; it never touches the job
    }
    return first;
  } finally {
    stop.abort();
    subscription.dispose();
    signal?.removeEventListener('abort', onAbort);
  }
}

function snapshotDue(ctx: PodCtx, pod: PodRecord): boolean {
  const atUnixS = snapshotAtUnixS(pod, ctx.timing.snapshotLeadS);
  return atUnixS !== null && Math.floor(ctx.clock.nowMs() / 1000) >= atUnixS;
}

/**
 * At the cost cap's snapshot moment (the watchdog asks too, should this client not): asks the
 * job for a snapshot with reason `cost` and says so. True once asked (or the job had ended).
 */
async function askCostSnapshot(
  ctx: PodCtx,
  executor: Executor,
  run: RunRecord,
  pod: PodRecord,
): Promise<boolean> {
  try {
    const asked = await requestSnapshot(executor, run.remoteDir, 'cost');
    if (asked.kind !== 'ended') {
      const capAtUnixS = costCapAtUnixS(pod) ?? 0;
      warn(
        ctx,
        run.id,
        'cost_snapshot',
        `max_cost_usd $${pod.costCapUsd ?? 0} is nearly spent: the job of run ${run.id} was asked to save a snapshot and stop; the pod is deleted at ${rfc3339(capAtUnixS * 1000)} whatever happens`,
      );
    }
    return true;
  } catch (error) {
    log(ctx, 'debug', `cannot ask run ${run.id} for its cost snapshot: ${describeError(error)}`);
    return false;
  }
}

/**
 * Runs `work` (the retrieval of an ended job's results) while renewing the pod's lease every
 * `leaseRenewMs`, so a long download past `max_hours` is not cut by the watchdog's deadline rule
 * while this client is there to finish it; once the client is gone the renewals stop and the
 * bounds of a vanished client apply from its last renewal. A kept pod has no lease.
 */
export async function holdLeaseDuring<T>(
  ctx: PodCtx,
  executor: Executor,
  run: RunRecord,
  pod: PodRecord,
  work: () => Promise<T>,
): Promise<T> {
  // Held while kept too: a release during the download finds the lease fresh.
  if (pod.deadlineUnixS === null) return work();
  const stop = new AbortController();
  const lease = `${run.remoteDir}/${LEASE_FILE}`;
  const renewing = (async () => {
    while (!stop.signal.aborted) {
      try {
        await executor.writeFileAtomic(lease, '');
      } catch (error) {
        log(ctx, 'debug', `cannot renew the lease of run ${run.id}: ${describeError(error)}`);
      }
      try {
        await ctx.clock.sleep(ctx.timing.leaseRenewMs, stop.signal);
      } catch {
        return;
      }
    }
  })();
  try {
    return await work();
  } finally {
    stop.abort();
    await renewing;
  }
}

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
  // `pod rm --force` from another process deleted it and already failed the run: keep its words.
  const removedBy = freshRunMessage(ctx, run);
  if (pod.deletedBy === 'pod_rm' && removedBy !== null) {
    endRun(run, 'failed', 'pod_removed', removedBy);
    ctx.bus.publish({
      type: 'runState',
      runId: run.id,
      state: 'failed',
      message: removedBy,
      cause: 'pod_removed',
    });
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

/** Saves the run `failed` for `cause` with `message`, best effort, and tells the listeners. */
export function failRun(ctx: PodCtx, run: RunRecord, cause: RunEndCause, message: string): void {
  endRun(run, 'failed', cause, message);
  try {
    ctx.store.saveRun(run);
  } catch (error) {
    log(ctx, 'warn', `cannot record run ${run.id} as failed: ${describeError(error)}`);
  }
  ctx.bus.publish({ type: 'runState', runId: run.id, state: 'failed', message, cause });
}

export { endPod, setKeep, type Ending } from './podEnd';
export { followMoved, reconnect, stillThere } from './reconnect';
export { limitFailure, MAX_COST_REACHED, MAX_HOURS_REACHED } from './limitEnd';
export { FollowError, followLostWords, whileNobodyFollows };
