/**
 * The watch of a run's job on its pod: the job followed while the lease holds the pod's deadline
 * off, the cost cap's snapshot asked for in time, the disk policy and the checkpoint stream fed by
 * what the pod pushes, and the client's own guard at the deadline or the cost cap. Never calls the
 * Runpod API but for one look when the job stops answering, so stopping it deletes nothing; what
 * the watch found is acted on by ./settle.ts.
 */
import { isAbortError, rfc3339 } from '../clock';
import { describeError } from '../errors';
import { watchCheckpoints } from '../pod/checkpointStream';
import { log, warn, type PodCtx } from '../pod/context';
import { watchDisk } from '../pod/diskWatch';
import { watchGpus } from '../pod/gpuWatch';
import {
  costCapAtUnixS,
  type CostCapView,
  guardFires,
  overrun,
  pastCostCap,
  renewalDue,
  snapshotAtUnixS,
} from '../pod/lease';
import type { PodHandle } from '../pod/podHandle';
import { PodPushes } from '../pod/podPushes';
import { LEASE_FILE } from '../pod/podScripts';
import { NETWORK_VOLUME_PATH } from '../runpod/api';
import type { RunRecord } from '../runs/runRecord';
import { MetricsFollower, type FollowResult } from '../train/follow';
import { Pace } from '../train/pace';
import { requestSnapshot } from '../train/snapshot';

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
  run: RunRecord,
  pod: PodHandle,
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
    void ctx.client.lookPod(pod.podId, { signal: stop.signal }).then(
      ({ pod: remote, seenByMs }) => {
        if (remote === null || remote.status === 'TERMINATED') goneSeenMs = seenByMs;
      },
      () => undefined,
    );
  };
  const follower = new MetricsFollower({
    executor: pod.executor,
    runId: run.id,
    runDir: run.remoteDir,
    bus: ctx.bus,
    clock: ctx.clock,
    timing: ctx.timing,
    fromOffset,
    pushes: pushes.sink({
      lookMs: ctx.timing.checkpointLookMs,
      diskMs: ctx.timing.diskPollMs,
      volumeDir: pod.volume === null ? null : NETWORK_VOLUME_PATH,
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
    const note = overrun({ etaMs: () => pace.eta() }, pod.limits, lastMetricMs, true);
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
      pod.refresh();
      if (pastCostCap(pod.limits, ctx.clock.nowMs())) return 'cost_cap_passed';
      if (!costSnapshotAsked && snapshotDue(ctx, pod.limits)) {
        costSnapshotAsked = await askCostSnapshot(ctx, run, pod);
      }
      const nowMs = ctx.clock.nowMs();
      // Renewed while kept too (the watchdog ignores it then): a release finds the lease held.
      if (renewalDue(ctx.timing, renewedMs, lastMetricMs, nowMs)) {
        try {
          await pod.executor.writeFileAtomic(lease, '');
          renewedMs = nowMs;
        } catch (error) {
          log(ctx, 'debug', `cannot renew the lease of run ${run.id}: ${describeError(error)}`);
        }
      }
      if (guardFires(ctx.timing, pod.limits, renewedMs, ctx.clock.nowMs()))
        return 'deadline_passed';
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
  void watchDisk(ctx, run, pod, stop.signal, pushes);
  void watchCheckpoints(ctx, pod.executor, run, stop.signal, pushes, results.maxRetrieveGb);
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

function snapshotDue(ctx: PodCtx, limits: CostCapView): boolean {
  const atUnixS = snapshotAtUnixS(limits, ctx.timing.snapshotLeadS);
  return atUnixS !== null && Math.floor(ctx.clock.nowMs() / 1000) >= atUnixS;
}

/**
 * At the cost cap's snapshot moment (the watchdog asks too, should this client not): asks the
 * job for a snapshot with reason `cost` and says so. True once asked (or the job had ended).
 */
async function askCostSnapshot(ctx: PodCtx, run: RunRecord, pod: PodHandle): Promise<boolean> {
  try {
    const asked = await requestSnapshot(pod.executor, run.remoteDir, 'cost');
    if (asked.kind !== 'ended') {
      const capAtUnixS = costCapAtUnixS(pod.limits) ?? 0;
      warn(
        ctx,
        run.id,
        'cost_snapshot',
        `max_cost_usd $${pod.limits.costCapUsd ?? 0} is nearly spent: the job of run ${run.id} was asked to save a snapshot and stop; the pod is deleted at ${rfc3339(capAtUnixS * 1000)} whatever happens`,
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
  run: RunRecord,
  pod: PodHandle,
  work: () => Promise<T>,
): Promise<T> {
  // Held while kept too: a release during the download finds the lease fresh.
  if (pod.limits.deadlineUnixS === null) return work();
  const stop = new AbortController();
  const lease = `${run.remoteDir}/${LEASE_FILE}`;
  const renewing = (async () => {
    while (!stop.signal.aborted) {
      try {
        await pod.executor.writeFileAtomic(lease, '');
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
