/**
 * What Runpod billed a run's cluster (`GET /billing/clusters?clusterId=…`: Runpod bills a
 * cluster, not its members one by one), read once it is deleted and saved in run.json's cluster,
 * beside the estimate. Read again until read a day after the delete (./billing.ts's rule for a
 * pod: the billing records may trail the usage).
 */
import { rfc3339 } from '../clock';
import { describeError } from '../errors';
import type { RunCluster } from '../runs/clusterRecord';
import { BILL_SETTLE_MS } from './billing';
import { log, type PodCtx } from './context';

/** Whether the cluster's recorded bill is final: read at least a day after its deletion. */
export function clusterBillSettled(
  cluster: Pick<RunCluster, 'billedUsd' | 'billedCheckedAt' | 'deletedAt'>,
): boolean {
  if (cluster.billedUsd === null || cluster.billedCheckedAt === null || cluster.deletedAt === null)
    return false;
  return Date.parse(cluster.billedCheckedAt) - Date.parse(cluster.deletedAt) >= BILL_SETTLE_MS;
}

/**
 * Reads what Runpod billed the deleted cluster of run `runId` over its life (day buckets from the
 * day before its creation to now, summed), saves it in run.json and publishes a `billed` event.
 * Nothing when the run has no deleted cluster or its bill is final. Best effort: a failure is
 * logged and leaves the record as it was. Returns the bill read, or null.
 */
export async function recordClusterBilled(
  ctx: Pick<PodCtx, 'client' | 'store' | 'clock' | 'bus'>,
  runId: string,
  signal?: AbortSignal,
): Promise<number | null> {
  const cluster = ctx.store.loadRun(runId).cluster ?? null;
  if (cluster === null || cluster.deletedAt === null || clusterBillSettled(cluster)) return null;
  const createdMs = Date.parse(cluster.createdAt);
  if (!Number.isFinite(createdMs)) return null;
  try {
    const bill = await ctx.client.clusterBilling(
      cluster.id,
      {
        startTime: new Date(createdMs - 86_400_000),
        endTime: new Date(ctx.clock.nowMs() + 1000),
        bucketSize: 'day',
      },
      { signal },
    );
    const billedUsd =
      Math.round(
        bill.records
          .filter((r) => r.clusterId === cluster.id)
          .reduce((sum, r) => sum + r.totalAmount, 0) * 10_000,
      ) / 10_000;
    // Saved on a fresh read: a follower or pod rm may have written the run since.
    const fresh = ctx.store.loadRun(runId);
    if (fresh.cluster?.id !== cluster.id) return null;
    fresh.cluster.billedUsd = billedUsd;
    fresh.cluster.billedCheckedAt = rfc3339(ctx.clock.nowMs());
    ctx.store.saveRun(fresh);
    ctx.bus.publish({ type: 'billed', runId, podId: cluster.id, billedUsd });
    return billedUsd;
  } catch (error) {
    log(
      ctx,
      'debug',
      `cannot read what Runpod billed cluster ${cluster.id}: ${describeError(error)}`,
    );
    return null;
  }
}
