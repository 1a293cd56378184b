/**
 * A run's Instant Cluster as run.json records it (`cluster`): the cluster's ID and name, what each
 * node is (GPU type, GPUs, rate) and each member by rank, with its pod, its private address and
 * the limits its own watchdog holds (the run's deadline, its share of the cost cap). Written when
 * the cluster is created, each member added once it answers SSH, its state as the run goes; read
 * by `runs show` and the Runs tree. The JSON keeps snake_case names as the rest of run.json.
 */
import { z } from 'zod';

/** How far a member got: listed, answering SSH, its watchdog's ready verdict with the cap armed, its job started, ended. */
export type ClusterNodeState = 'starting' | 'ready' | 'running' | 'ended' | 'failed';
export const CLUSTER_NODE_STATES: readonly ClusterNodeState[] = [
  'starting',
  'ready',
  'running',
  'ended',
  'failed',
];

export interface ClusterNode {
  rank: number;
  podId: string;
  /** Its address on the cluster's private network; null when Runpod gave none. */
  ip: string | null;
  state: ClusterNodeState;
  /** When its watchdog deletes it (the run's max_hours), Unix seconds; null when not armed. */
  deadlineUnixS: number | null;
  /** When its watchdog deletes it for the cost cap (its share: max_cost_usd / nodes), Unix seconds; null without a cap. */
  costCapAtUnixS: number | null;
  /** Why it failed (it died, did not come up, its job was killed); null otherwise. */
  message: string | null;
  /**
   * When a look found its pod EXITED, TERMINATED or gone, RFC 3339 UTC: Runpod stopped billing
   * its GPU by then (its disk bills on until the cluster's delete). Absent while it runs.
   */
  gpuStoppedAt?: string;
  /**
   * Its pod's `createdAt` as Runpod gave it (whole seconds), RFC 3339 UTC: Runpod bills each member
   * from its own creation, counted from here but never before the cluster's create was sent;
   * absent in older records, or when Runpod's time was later than the create's answer.
   */
  createdAt?: string;
  /**
   * When a look found its pod gone (404, TERMINATED, its whole cluster gone), RFC 3339 UTC: Runpod
   * bills it nothing after; absent while it may bill (until the cluster's confirmed delete).
   */
  endedAt?: string;
}

export interface RunCluster {
  id: string;
  name: string;
  gpuTypeId: string;
  gpuCountPerPod: number;
  /** One member's rate, USD per hour (the cluster's is this × nodes); null until Runpod gives it. */
  costPerHourUsd: number | null;
  /** When it was created, RFC 3339 UTC. */
  createdAt: string;
  /** When its delete was confirmed (Runpod's 404), RFC 3339 UTC; null while it may exist. */
  deletedAt: string | null;
  /**
   * The members' pinned SSH host public key (`ssh-ed25519 AAAA…`, one for all: Runpod's cluster
   * create has one env), so a client that follows the run again (attach) sends nothing to a
   * host with another; absent in records written before it was kept.
   */
  hostKey?: string | null;
  /** The members by rank (rank 0, the primary, first). */
  nodes: ClusterNode[];
  /** Each member's disk (its container disk), GB: what a stopped member still bills; absent in older records. */
  diskGbPerNode?: number;
  /** What Runpod billed the cluster (`GET /billing/clusters`), USD; null until read. */
  billedUsd: number | null;
  /** When that bill was read, RFC 3339 UTC (final once read a day after the delete). */
  billedCheckedAt: string | null;
  /**
   * What Runpod answered a member's watchdog that tried to delete the cluster with the member's
   * own key and was refused: `node 1: refused http_403`; absent when none was seen refused.
   */
  memberDeleteRefused?: string | null;
}

export const clusterSchema = z.object({
  id: z.string().min(1),
  name: z.string(),
  gpu_type_id: z.string(),
  gpu_count_per_pod: z.number().int().min(1),
  usd_per_hour: z.number().min(0).nullable(),
  created_at: z.string(),
  deleted_at: z.string().nullable(),
  host_key: z.string().min(1).nullable().optional(),
  nodes: z.array(
    z.object({
      rank: z.number().int().min(0),
      pod_id: z.string().min(1),
      ip: z.string().nullable(),
      state: z.enum(CLUSTER_NODE_STATES as [ClusterNodeState, ...ClusterNodeState[]]),
      deadline_unix_s: z.number().int().nullable(),
      cost_cap_at_unix_s: z.number().int().nullable(),
      message: z.string().nullable(),
      gpu_stopped_at: z.string().optional(),
      created_at: z.string().optional(),
      ended_at: z.string().optional(),
    }),
  ),
  disk_gb_per_node: z.number().min(0).optional(),
  billed_usd: z.number().min(0).nullable().optional(),
  billed_checked_at: z.string().nullable().optional(),
  member_delete_refused: z.string().nullable().optional(),
});

export type ClusterWire = z.infer<typeof clusterSchema>;

export function clusterFromWire(wire: ClusterWire): RunCluster {
  return {
    id: wire.id,
    name: wire.name,
    gpuTypeId: wire.gpu_type_id,
    gpuCountPerPod: wire.gpu_count_per_pod,
    costPerHourUsd: wire.usd_per_hour,
    createdAt: wire.created_at,
    deletedAt: wire.deleted_at,
    ...(wire.host_key ? { hostKey: wire.host_key } : {}),
    nodes: wire.nodes
      .map((n) => ({
        rank: n.rank,
        podId: n.pod_id,
        ip: n.ip,
        state: n.state,
        deadlineUnixS: n.deadline_unix_s,
        costCapAtUnixS: n.cost_cap_at_unix_s,
        message: n.message,
        ...(n.gpu_stopped_at === undefined ? {} : { gpuStoppedAt: n.gpu_stopped_at }),
        ...(n.created_at === undefined ? {} : { createdAt: n.created_at }),
        ...(n.ended_at === undefined ? {} : { endedAt: n.ended_at }),
      }))
      .sort((a, b) => a.rank - b.rank),
    ...(wire.disk_gb_per_node === undefined ? {} : { diskGbPerNode: wire.disk_gb_per_node }),
    billedUsd: wire.billed_usd ?? null,
    billedCheckedAt: wire.billed_checked_at ?? null,
    ...(wire.member_delete_refused === undefined || wire.member_delete_refused === null
      ? {}
      : { memberDeleteRefused: wire.member_delete_refused }),
  };
}

export function clusterToWire(cluster: RunCluster): ClusterWire {
  return {
    id: cluster.id,
    name: cluster.name,
    gpu_type_id: cluster.gpuTypeId,
    gpu_count_per_pod: cluster.gpuCountPerPod,
    usd_per_hour: cluster.costPerHourUsd,
    created_at: cluster.createdAt,
    deleted_at: cluster.deletedAt,
    ...(cluster.hostKey ? { host_key: cluster.hostKey } : {}),
    nodes: cluster.nodes.map((n) => ({
      rank: n.rank,
      pod_id: n.podId,
      ip: n.ip,
      state: n.state,
      deadline_unix_s: n.deadlineUnixS,
      cost_cap_at_unix_s: n.costCapAtUnixS,
      message: n.message,
      ...(n.gpuStoppedAt === undefined ? {} : { gpu_stopped_at: n.gpuStoppedAt }),
      ...(n.createdAt === undefined ? {} : { created_at: n.createdAt }),
      ...(n.endedAt === undefined ? {} : { ended_at: n.endedAt }),
    })),
    ...(cluster.diskGbPerNode === undefined ? {} : { disk_gb_per_node: cluster.diskGbPerNode }),
    billed_usd: cluster.billedUsd,
    billed_checked_at: cluster.billedCheckedAt,
    ...(cluster.memberDeleteRefused === undefined || cluster.memberDeleteRefused === null
      ? {}
      : { member_delete_refused: cluster.memberDeleteRefused }),
  };
}

/** One line per node: `node 0: pod abc (10.65.0.2) running`, with its failure when it failed. */
export function clusterNodeLines(cluster: RunCluster): string[] {
  return cluster.nodes.map(
    (n) =>
      `node ${n.rank}: pod ${n.podId}${n.ip === null ? '' : ` (${n.ip})`} ${n.state}${n.message === null ? '' : `: ${n.message}`}`,
  );
}
