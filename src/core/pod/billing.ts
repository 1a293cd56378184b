/**
 * What Runpod billed a run's pod, read back from `GET /billing/pods` and recorded in pod.json
 * beside our estimate (`billed_usd`, `billed_checked_at`), so a wrong estimate shows.
 */
import { rfc3339 } from '../clock';
import type { OtherPod, PodRecord } from '../runs/podRecord';
import { log, type PodCtx } from './context';
import { describeError } from '../errors';

/** A difference between estimate and bill beyond this share is flagged. */
export const BILLED_TOLERANCE = 0.01;

/**
 * Runpod's billing records may trail the usage: a bill read within this long of the pod's
 * deletion is read again (by `overbrainer spend`) until one is read later than that.
 */
export const BILL_SETTLE_MS = 24 * 3_600_000;

/** Whether the pod's recorded bill is final: read at least BILL_SETTLE_MS after its deletion. */
export function billSettled(
  pod: Pick<PodRecord, 'billedUsd' | 'billedCheckedAt' | 'deletedAt'>,
): boolean {
  if (pod.billedUsd === null || pod.billedCheckedAt === null || pod.deletedAt === null)
    return false;
  return Date.parse(pod.billedCheckedAt) - Date.parse(pod.deletedAt) >= BILL_SETTLE_MS;
}

/** Whether the bill recorded for another pod of a run is final (as {@link billSettled}). */
export function otherBillSettled(other: OtherPod): boolean {
  if (other.billedUsd === null || other.billedCheckedAt === null || other.endedMs === null)
    return false;
  return Date.parse(other.billedCheckedAt) - other.endedMs >= BILL_SETTLE_MS;
}

/** What Runpod billed pod `podId`, created at `createdMs`, from the day before to now (USD). */
async function readBill(
  ctx: Pick<PodCtx, 'client' | 'clock'>,
  podId: string,
  createdMs: number,
  signal?: AbortSignal,
): Promise<number> {
  const bill = await ctx.client.podBilling(
    podId,
    {
      startTime: new Date(createdMs - 86_400_000),
      endTime: new Date(ctx.clock.nowMs() + 1000),
      bucketSize: 'day',
    },
    { signal },
  );
  return Math.round(bill.totalAmount * 10_000) / 10_000;
}

/**
 * Reads what Runpod billed each ended pod of the run other than its current one (earlier
 * attempts, deleted duplicates) whose bill is not final yet, and saves them in pod.json. Best
 * effort, like {@link recordBilled}. Returns how many bills were read.
 */
export async function recordOtherBills(
  ctx: Pick<PodCtx, 'client' | 'store' | 'clock' | 'bus'>,
  pod: PodRecord,
  signal?: AbortSignal,
): Promise<number> {
  const read: OtherPod[] = [];
  for (const other of pod.otherPods) {
    if (other.endedMs === null || other.billedFromMs === null || otherBillSettled(other)) continue;
    try {
      other.billedUsd = await readBill(ctx, other.podId, other.billedFromMs, signal);
      other.billedCheckedAt = rfc3339(ctx.clock.nowMs());
      read.push(other);
    } catch (error) {
      log(
        ctx,
        'debug',
        `cannot read what Runpod billed pod ${other.podId}: ${describeError(error)}`,
      );
    }
  }
  if (read.length === 0) return 0;
  ctx.store.savePod(pod);
  for (const other of read) {
    const billedUsd = other.billedUsd ?? 0;
    ctx.bus.publish({ type: 'billed', runId: pod.runId, podId: other.podId, billedUsd });
  }
  return read.length;
}

/**
 * Reads what Runpod billed the deleted pod of `pod` over its lifetime (from the day it was created
 * to now, day buckets summed), saves it in pod.json and publishes a `billed` event. Best effort: a failure is logged and
 * leaves the record as it was. Returns the billed amount, or null when none could be read.
 */
export async function recordBilled(
  ctx: Pick<PodCtx, 'client' | 'store' | 'clock' | 'bus'>,
  pod: PodRecord,
  signal?: AbortSignal,
): Promise<number | null> {
  const id = pod.podId;
  if (id === null || pod.state !== 'deleted' || pod.createdUnixS === null) return null;
  try {
    pod.billedUsd = await readBill(ctx, id, pod.createdUnixS * 1000, signal);
    pod.billedCheckedAt = rfc3339(ctx.clock.nowMs());
    ctx.store.savePod(pod);
    // Listeners that show spend read it again: nothing else says a bill came in.
    ctx.bus.publish({ type: 'billed', runId: pod.runId, podId: id, billedUsd: pod.billedUsd });
    return pod.billedUsd;
  } catch (error) {
    log(ctx, 'debug', `cannot read what Runpod billed pod ${id}: ${describeError(error)}`);
    return null;
  }
}

/**
 * Whether the estimate and the bill disagree: by more than 1 % of the bill, and by more than the
 * estimate's own resolution, `resolutionUsd` ({@link estimateResolutionUsd} of each pod the
 * amounts sum: a recovered run's two pods may each be over by theirs).
 */
export function billedMismatch(
  estimatedUsd: number | null,
  billedUsd: number | null,
  resolutionUsd: number,
): boolean {
  if (estimatedUsd === null || billedUsd === null) return false;
  return Math.abs(estimatedUsd - billedUsd) > Math.max(billedUsd * BILLED_TOLERANCE, resolutionUsd);
}
