/**
 * The spend of a run's cluster: each member estimated as a pod of its own, and billed its share
 * of the cluster's bill once read.
 */
import type { RunCluster } from './clusterRecord';
import type { RunRecord } from './runRecord';
import type { PodSpend } from './spend';

/** Every cluster of a run: those replaced after a node died (oldest first), then its current one. */
export function runClusters(run: Pick<RunRecord, 'cluster' | 'earlierClusters'>): RunCluster[] {
  return [...(run.earlierClusters ?? []), ...(run.cluster ? [run.cluster] : [])];
}

const round4 = (usd: number): number => Math.round(usd * 10_000) / 10_000;

/**
 * What a stopped pod's disk costs, USD per GB and month (Runpod's price for a stopped pod's disk;
 * the API does not give it), over a month of 30 days: more per hour than Runpod's 730-hour
 * month, so a dead member's disk is never counted under its bill.
 */
export const STOPPED_DISK_USD_PER_GB_MONTH = 0.2;
const HOURS_PER_MONTH = 30 * 24;

/**
 * What member `node` of `cluster` cost from the cluster's creation to `untilMs` (unrounded): its
 * GPU rate until a look found it stopped (EXITED, TERMINATED or gone), then its disk's, as Runpod
 * bills a stopped pod; at the GPU rate throughout where the record has no disk size.
 */
export function memberUsd(
  cluster: Pick<RunCluster, 'createdAt' | 'costPerHourUsd' | 'diskGbPerNode'>,
  node: Pick<RunCluster['nodes'][number], 'gpuStoppedAt'>,
  untilMs: number,
): number | null {
  const createdMs = Date.parse(cluster.createdAt);
  const rate = cluster.costPerHourUsd;
  if (rate === null || !Number.isFinite(createdMs)) return null;
  const stoppedMs = node.gpuStoppedAt === undefined ? NaN : Date.parse(node.gpuStoppedAt);
  if (cluster.diskGbPerNode === undefined || !Number.isFinite(stoppedMs)) {
    return (rate * Math.max(0, untilMs - createdMs)) / 3_600_000;
  }
  const gpuUntilMs = Math.min(untilMs, Math.max(createdMs, stoppedMs));
  const diskUsdPerHour = (cluster.diskGbPerNode * STOPPED_DISK_USD_PER_GB_MONTH) / HOURS_PER_MONTH;
  return (
    (rate * (gpuUntilMs - createdMs) + diskUsdPerHour * Math.max(0, untilMs - gpuUntilMs)) /
    3_600_000
  );
}
/** Up to $0.0001, as the cluster's bill is read (pod/clusterBilling.ts): an estimate never under it. */
const upTo4 = (usd: number): number => Math.ceil(Math.round(usd * 1e8) / 1e4) / 1e4;

/**
 * Every member of a run's cluster as a pod of its own (each bills its rate from the cluster's
 * creation until the cluster's confirmed delete, a member found stopped its disk's rate after
 * that look: {@link memberUsd}): a cluster of N nodes counts N pods. Each is
 * bounded by its own watchdog: its share of the cost cap, else its deadline.
 */
export function clusterSpends(runId: string, cluster: RunCluster, nowMs: number): PodSpend[] {
  const billed = memberBills(cluster);
  const createdMs = Date.parse(cluster.createdAt);
  const deletedMs = cluster.deletedAt === null ? null : Date.parse(cluster.deletedAt);
  const rate = cluster.costPerHourUsd;
  const known = Number.isFinite(createdMs);
  const untilMs = deletedMs ?? nowMs;
  return cluster.nodes.map((node, index) => {
    const boundS = node.costCapAtUnixS ?? node.deadlineUnixS;
    const usd = memberUsd(cluster, node, untilMs);
    return {
      runId,
      podId: node.podId,
      status: deletedMs === null ? 'live' : 'ended',
      usdPerHour: rate,
      createdMs: known ? createdMs : null,
      endedMs: deletedMs,
      estimatedUsd: usd === null ? null : upTo4(usd),
      billedUsd: billed?.[index] ?? null,
      boundUsd:
        rate === null || !known || boundS === null
          ? null
          : round4((rate * Math.max(0, boundS * 1000 - createdMs)) / 3_600_000),
    };
  });
}

/**
 * The cluster's bill (Runpod bills a cluster, not its members) in equal shares, one per node (its
 * members run at one rate from one create to one delete), rank 0 holding the rounding's rest so
 * the shares sum to the bill; null until it was read.
 */
function memberBills(cluster: RunCluster): number[] | null {
  const n = cluster.nodes.length;
  if (cluster.billedUsd === null || n === 0) return null;
  const share = round4(cluster.billedUsd / n);
  return cluster.nodes.map((_, i) =>
    i === 0 ? round4(cluster.billedUsd! - share * (n - 1)) : share,
  );
}
