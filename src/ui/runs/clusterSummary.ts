/**
 * A run on a cluster has no pod.json: its cluster (run.json `cluster`) stands for its pod in the
 * Runs tree and on the run page, as one "pod" billing N × the member rate from the cluster's
 * create, with the earliest deadline of its nodes: the spend so far and at the ETA are N × the
 * price. Once deleted, its spend is each member's from its own creation to its own end, as
 * Runpod bills it and `spend` says. Free of `vscode`.
 */
import { clusterCostUsd, type RunCluster } from '../../core/flow/records';
import type { PodSummary } from './runsModel';

/** Milliseconds since the epoch of an RFC 3339 time, or null. */
function msOf(time: string | null): number | null {
  if (time === null) return null;
  const ms = Date.parse(time);
  return Number.isFinite(ms) ? ms : null;
}

/** Rounded up to $0.0001: an estimate never under the bill. */
const upTo4 = (usd: number): number => Math.ceil(Math.round(usd * 1e8) / 1e4) / 1e4;

/** The cluster as the run's pod: its ID, N × its rate, its create and delete. */
export function clusterPodSummary(cluster: RunCluster): PodSummary {
  const nodes = cluster.nodes.length;
  const createdMs = msOf(cluster.createdAt);
  const deletedMs = msOf(cluster.deletedAt);
  const rate = cluster.costPerHourUsd === null ? null : cluster.costPerHourUsd * nodes;
  const deadlines = cluster.nodes
    .map((n) => n.deadlineUnixS)
    .filter((s): s is number => s !== null);
  return {
    podId: cluster.id,
    state: deletedMs === null ? 'running' : 'deleted',
    gpuType: `${nodes} nodes × ${cluster.gpuCountPerPod > 1 ? `${cluster.gpuCountPerPod} × ` : ''}${cluster.gpuTypeId}`,
    costPerHourUsd: rate,
    deadlineUnixS: deadlines.length === 0 ? null : Math.min(...deadlines),
    // Once deleted, what spend says: each member from its own creation to its own end.
    estimatedSpendUsd:
      rate === null || createdMs === null || deletedMs === null
        ? null
        : upTo4(clusterCostUsd(cluster, deletedMs)),
    keep: false,
    strayPodIds: [],
    createdUnixS: createdMs === null ? null : Math.floor(createdMs / 1000),
    billedFromMs: createdMs,
    deletedBy: null,
  };
}

/** The run page's billing times of the cluster: its create and its delete (Unix seconds). */
export function clusterTimes(cluster: RunCluster): {
  createdUnixS: number | null;
  deletedUnixS: number | null;
} {
  const createdMs = msOf(cluster.createdAt);
  const deletedMs = msOf(cluster.deletedAt);
  return {
    createdUnixS: createdMs === null ? null : Math.floor(createdMs / 1000),
    deletedUnixS: deletedMs === null ? null : Math.ceil(deletedMs / 1000),
  };
}
