/**
 * What Runpod billed a run's clusters (`GET /billing/clusters?clusterId=…`: Runpod bills a
 * cluster, not its members one by one), each read once it is deleted and saved in run.json where
 * it is recorded (`cluster`, or `earlier_clusters` for one a node's death replaced), beside the
 * estimate. Read again until read a day after the delete (./billing.ts's rule for a
 * pod: the billing records may trail the usage).
 */
import { rfc3339 } from '../clock';
import { describeError } from '../errors';
import type { RunCluster } from '../runs/clusterRecord';
import { runClusters } from '../runs/clusterSpend';
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

/** Whether a cluster's bill is still to be read: deleted, its bill not final. */
export function clusterBillDue(cluster: RunCluster): boolean {
  return cluster.deletedAt !== null && !clusterBillSettled(cluster);
}

/**
 * Reads what Runpod billed each deleted cluster of run `runId` over its life (the clusters a
 * node's death replaced as well as its current one: every attempt bills), saves each in
 * run.json and publishes a `billed` event for each. A cluster still live, or whose bill is
 * final, is skipped. Best effort: a failure is logged and leaves that cluster's record as it
 * was. Returns how many bills were read.
 */
export async function recordClusterBilled(
  ctx: Pick<PodCtx, 'client' | 'store' | 'clock' | 'bus'>,
  runId: string,
  signal?: AbortSignal,
): Promise<number> {
  let read = 0;
  for (const cluster of runClusters(ctx.store.loadRun(runId)).filter(clusterBillDue)) {
    if ((await readOneClusterBill(ctx, runId, cluster, signal)) !== null) read += 1;
  }
  return read;
}

/**
 * One deleted cluster's bill (day buckets from the day before its creation to now, summed),
 * saved in the run's record where that cluster is (current or replaced); null when not read.
 */
async function readOneClusterBill(
  ctx: Pick<PodCtx, 'client' | 'store' | 'clock' | 'bus'>,
  runId: string,
  cluster: RunCluster,
  signal?: AbortSignal,
): Promise<number | null> {
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
    const totalUsd = bill.records
      .filter((r) => r.clusterId === cluster.id)
      .reduce((sum, r) => sum + r.totalAmount, 0);
    // Up to the $0.0001 the records show, never down: a run of many clusters (every attempt
    // bills) summed never comes out under what Runpod billed.
    const billedUsd = Math.ceil(Math.round(totalUsd * 1e8) / 1e4) / 1e4;
    // Saved on a fresh read: a follower or pod rm may have written the run since.
    const fresh = ctx.store.loadRun(runId);
    const saved = runClusters(fresh).find((c) => c.id === cluster.id);
    if (saved === undefined) return null;
    saved.billedUsd = billedUsd;
    saved.billedCheckedAt = rfc3339(ctx.clock.nowMs());
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
