/**
 * The spend of a run's cluster: each member estimated as a pod of its own (Runpod bills each from
 * its own creation to its own end), and billed its share of the cluster's bill once read.
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

type Member = Pick<RunCluster['nodes'][number], 'gpuStoppedAt' | 'createdAt' | 'endedAt'>;

/**
 * When Runpod began to bill member `node`, unix ms: its own `createdAt` (whole seconds, so at most
 * a second early), never before the cluster's create was sent (`cluster.createdAt`); that sending
 * where the record has no createdAt of the member (older records). NaN when unknown.
 */
export function memberStartMs(
  cluster: Pick<RunCluster, 'createdAt'>,
  node: Pick<Member, 'createdAt'>,
): number {
  const sentMs = Date.parse(cluster.createdAt);
  const ownMs = node.createdAt === undefined ? NaN : Date.parse(node.createdAt);
  return Number.isFinite(ownMs) ? Math.max(ownMs, sentMs) : sentMs;
}

/**
 * When Runpod stopped billing member `node`, unix ms: the look that found its pod gone, else the
 * cluster's confirmed delete; null while it may bill.
 */
export function memberEndMs(
  cluster: Pick<RunCluster, 'deletedAt'>,
  node: Pick<Member, 'endedAt'>,
): number | null {
  const deletedMs = cluster.deletedAt === null ? NaN : Date.parse(cluster.deletedAt);
  const endedMs = node.endedAt === undefined ? NaN : Date.parse(node.endedAt);
  const ends = [deletedMs, endedMs].filter(Number.isFinite);
  return ends.length === 0 ? null : Math.min(...ends);
}

/**
 * What member `node` of `cluster` cost from its own creation ({@link memberStartMs}) to `untilMs`
 * or its own end, whichever is first (unrounded): its GPU rate until a look found it stopped
 * (EXITED, TERMINATED or gone), then its disk's, as Runpod bills a stopped pod, and nothing
 * once found gone; at the GPU rate throughout where the record has no disk size.
 */
export function memberUsd(
  cluster: Pick<RunCluster, 'createdAt' | 'costPerHourUsd' | 'diskGbPerNode'>,
  node: Member,
  untilMs: number,
): number | null {
  const createdMs = memberStartMs(cluster, node);
  const rate = cluster.costPerHourUsd;
  if (rate === null || !Number.isFinite(createdMs)) return null;
  const endedMs = node.endedAt === undefined ? NaN : Date.parse(node.endedAt);
  if (Number.isFinite(endedMs)) untilMs = Math.min(untilMs, endedMs);
  const stoppedMs = node.gpuStoppedAt === undefined ? NaN : Date.parse(node.gpuStoppedAt);
  if (cluster.diskGbPerNode === undefined || !Number.isFinite(stoppedMs)) {
    return (rate * Math.max(0, untilMs - createdMs)) / 3_600_000;
  }
  const gpuUntilMs = Math.max(createdMs, Math.min(untilMs, stoppedMs));
  const diskUsdPerHour = (cluster.diskGbPerNode * STOPPED_DISK_USD_PER_GB_MONTH) / HOURS_PER_MONTH;
  return (
    (rate * (gpuUntilMs - createdMs) + diskUsdPerHour * Math.max(0, untilMs - gpuUntilMs)) /
    3_600_000
  );
}
/**
 * What `cluster`'s members cost so far: each at the member rate from its own createdAt (never
 * before the create was sent) to its own end (the look that found it gone, else the delete's
 * answer, or now), a member found stopped at its disk's rate after that look ({@link memberUsd}),
 * rounded up to the micro-dollar: never under what Runpod bills, and not over it by a rounding
 * (to $0.0001 it was: 0.5 s of a member's rate at $0.69/h, over 1 % of attempts of a minute).
 */
export function clusterCostUsd(cluster: RunCluster, nowMs: number): number {
  const untilMs = cluster.deletedAt === null ? nowMs : Date.parse(cluster.deletedAt);
  if (!Number.isFinite(untilMs)) return 0;
  const usd = cluster.nodes.reduce((sum, n) => sum + (memberUsd(cluster, n, untilMs) ?? 0), 0);
  return Math.ceil(Math.round(usd * 1e9) / 1e3) / 1e6;
}

/** Up to $0.0001, as the cluster's bill is read (pod/clusterBilling.ts): an estimate never under it. */
const upTo4 = (usd: number): number => Math.ceil(Math.round(usd * 1e8) / 1e4) / 1e4;

/**
 * Every member of a run's cluster as a pod of its own, as Runpod bills it: from its own creation
 * to its own end (found gone, else the cluster's confirmed delete), a member found stopped its
 * disk's rate after that look ({@link memberUsd}): a cluster of N nodes counts N pods. Each is
 * bounded by its own watchdog: its share of the cost cap, else its deadline.
 */
export function clusterSpends(runId: string, cluster: RunCluster, nowMs: number): PodSpend[] {
  const billed = memberBills(cluster);
  const rate = cluster.costPerHourUsd;
  return cluster.nodes.map((node, index) => {
    const createdMs = memberStartMs(cluster, node);
    const known = Number.isFinite(createdMs);
    const endedMs = memberEndMs(cluster, node);
    const boundS = node.costCapAtUnixS ?? node.deadlineUnixS;
    const usd = memberUsd(cluster, node, endedMs ?? nowMs);
    return {
      runId,
      podId: node.podId,
      status: endedMs === null ? 'live' : 'ended',
      usdPerHour: rate,
      createdMs: known ? createdMs : null,
      endedMs,
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
 * members run at one rate, their lives seconds apart at most), rank 0 holding the rounding's rest
 * so the shares sum to the bill; null until it was read.
 */
function memberBills(cluster: RunCluster): number[] | null {
  const n = cluster.nodes.length;
  if (cluster.billedUsd === null || n === 0) return null;
  const share = round4(cluster.billedUsd / n);
  return cluster.nodes.map((_, i) =>
    i === 0 ? round4(cluster.billedUsd! - share * (n - 1)) : share,
  );
}
