/**
 * Runpod's Instant Clusters (`/v2/clusters`): N identical member pods in one data center on a
 * private network, created, looked up, listed and deleted as one. Their shapes, parsed with zod as
 * ./api.ts says (tolerant of what is added, strict about what the lifecycle acts on), and their
 * calls on the same transport as the pods'. A member pod is a {@link Pod} whose `cluster` is set;
 * the pod calls refuse to delete it (409: `cluster_member`), its cluster's delete ends it.
 *
 * The authority is Runpod's OpenAPI document ("Frontdoor v2.9.0"): `CreateClusterRequest` is the
 * document's `BaseContainerConfig` (image, args, disk, env, ports) plus `name`, `type`, `compute
 * {gpuTypeId, gpuCountPerPod, podCount}`, `dataCenterIds`, `mounts`, `startSsh`, closed with
 * `unevaluatedProperties: false`. It has no `cmd` (the pods' live-API extension): the members'
 * command goes in the documented `args`, one shell command line.
 */
import { z } from 'zod';
import type { BillingBucketSize } from './account';
import { ListPodsSchema, MountsSchema, type Pod } from './api';
import { ApiError, CLUSTER_CREATE_MESSAGES } from './apiErrors';
import { createError, TransportFailure } from './answers';
import type { ApiTransport } from './transport';
import { decodeJson, PaginationWire, type CallOptions } from './wire';

/** The cluster type of a distributed training run (`ClusterType`). */
export const CLUSTER_TYPE = 'TRAINING';
/** The document's bounds on `compute.podCount`. */
export const MIN_CLUSTER_PODS = 2;
export const MAX_CLUSTER_PODS = 250;
/** What self-serve accounts get (Runpod's Instant Clusters pages); more goes through sales. */
export const SELF_SERVE_MAX_CLUSTER_PODS = 8;

/** The cluster's primary (rank 0) once placed: `sshEndpoint` (`host:port`) once it is RUNNING. */
export interface ClusterPrimary {
  podId: string;
  status: string;
  sshEndpoint: string | null;
}

/** A cluster as the lifecycle needs it (`Cluster` of the document). */
export interface Cluster {
  id: string;
  name: string;
  type: string;
  gpuTypeId: string;
  gpuCountPerPod: number;
  podCount: number;
  /** Null until a member is placed. */
  dataCenterId: string | null;
  /** Members provisioned now, and their counts by pod status. */
  podsTotal: number;
  podsByStatus: Record<string, number>;
  /** The private network's CIDR; null until it is provisioned. */
  networkCidr: string | null;
  primary: ClusterPrimary | null;
  /** RFC 3339 as Runpod wrote it. */
  createdAt: string;
}

/** Whether `id` can be a Runpod cluster ID in a URL path: the pods' rule (non-empty, no dot segment, no control characters). */
export function isClusterId(id: string): boolean {
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  return id !== '' && id !== '.' && id !== '..' && !/[\u0000-\u001f\u007f]/.test(id);
}

export const ClusterSchema = z
  .object({
    id: z.string().refine(isClusterId, 'not a cluster ID'),
    name: z.string(),
    type: z.string(),
    compute: z.object({
      gpuTypeId: z.string(),
      gpuCountPerPod: z.number().int().positive(),
      podCount: z.number().int().positive(),
    }),
    dataCenterId: z.string().nullish(),
    pods: z.object({
      total: z.number().int().nonnegative(),
      byStatus: z.record(z.string(), z.number().int().nonnegative()),
    }),
    network: z.object({ cidr: z.string() }).nullish(),
    primary: z
      .object({ podId: z.string(), status: z.string(), sshEndpoint: z.string().nullish() })
      .nullish(),
    createdAt: z.string(),
  })
  .transform((wire): Cluster => ({
    id: wire.id,
    name: wire.name,
    type: wire.type,
    gpuTypeId: wire.compute.gpuTypeId,
    gpuCountPerPod: wire.compute.gpuCountPerPod,
    podCount: wire.compute.podCount,
    dataCenterId: wire.dataCenterId ?? null,
    podsTotal: wire.pods.total,
    podsByStatus: { ...wire.pods.byStatus },
    networkCidr: wire.network?.cidr ?? null,
    primary: wire.primary
      ? {
          podId: wire.primary.podId,
          status: wire.primary.status,
          sshEndpoint: wire.primary.sshEndpoint ?? null,
        }
      : null,
    createdAt: wire.createdAt,
  }));

export const ListClustersSchema = z.object({
  clusters: z.array(ClusterSchema),
  pagination: PaginationWire,
});

// ---------------------------------------------------------------------------
// The create body
// ---------------------------------------------------------------------------

/**
 * The body of `POST /clusters`, checked strictly before it is sent (the API answers unknown
 * fields with 422): only fields of the document's `CreateClusterRequest`.
 */
export const CreateClusterBodySchema = z.strictObject({
  name: z.string().min(1),
  type: z.literal(CLUSTER_TYPE),
  compute: z.strictObject({
    gpuTypeId: z.string().min(1),
    gpuCountPerPod: z.number().int().min(1),
    podCount: z.number().int().min(MIN_CLUSTER_PODS).max(MAX_CLUSTER_PODS),
  }),
  image: z.string().min(1),
  disk: z.number().int().min(1),
  ports: z.array(z.string()),
  env: z.record(z.string(), z.string()),
  startSsh: z.boolean(),
  args: z.string().min(1),
  dataCenterIds: z.array(z.string().min(1)).optional(),
  mounts: MountsSchema,
});
export type CreateClusterBody = z.infer<typeof CreateClusterBodySchema>;

export interface CreateClusterParams {
  /** The attempt's unique name, found again by reconciliation in the cluster list. */
  name: string;
  image: string;
  gpuTypeId: string;
  /** GPUs on each member. */
  gpuCountPerPod: number;
  podCount: number;
  containerDiskGb: number;
  /** The same env on every member (the run marker among it). */
  env: Record<string, string>;
  /** Every member's command as an argv (the pods' `cmd`), sent as one command line in `args`. */
  cmd: string[];
  ports: readonly string[];
  dataCenterIds?: readonly string[];
  networkVolumeId?: string | null;
  /** Where a network volume is mounted on each member. */
  networkVolumePath?: string;
}

/** `value` as one word of a POSIX shell command line. */
export function shellWord(value: string): string {
  return /^[A-Za-z0-9_./=:@%+-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

/** The create body with the fixed parts of every overbrainer cluster filled in. */
export function createClusterBody(params: CreateClusterParams): CreateClusterBody {
  const body: CreateClusterBody = {
    name: params.name,
    type: CLUSTER_TYPE,
    compute: {
      gpuTypeId: params.gpuTypeId,
      gpuCountPerPod: params.gpuCountPerPod,
      podCount: params.podCount,
    },
    image: params.image,
    disk: params.containerDiskGb,
    ports: [...params.ports],
    env: { ...params.env },
    startSsh: false,
    args: params.cmd.map(shellWord).join(' '),
  };
  if (params.dataCenterIds && params.dataCenterIds.length > 0) {
    body.dataCenterIds = [...params.dataCenterIds];
  }
  if (params.networkVolumeId) {
    body.mounts = {
      network: [
        { volumeId: params.networkVolumeId, path: params.networkVolumePath ?? '/workspace/data' },
      ],
    };
  }
  return body;
}

// ---------------------------------------------------------------------------
// Billing (`GET /billing/clusters`: ListClusterBillingResponse)
// ---------------------------------------------------------------------------

export interface ClusterBillingRecord {
  startTime: string;
  endTime: string;
  clusterId: string;
  totalAmount: number;
  gpuAmount: number;
  diskAmount: number;
  networkingAmount: number;
}

export interface ClusterBilling {
  records: ClusterBillingRecord[];
  startTime: string;
  endTime: string;
  bucketSize: string;
  totalAmount: number;
  gpuAmount: number;
  diskAmount: number;
  networkingAmount: number;
}

const ClusterAmountsWire = z.object({
  totalAmount: z.number(),
  gpuAmount: z.number(),
  diskAmount: z.number(),
  networkingAmount: z.number(),
});

export const ListClusterBillingSchema = z
  .object({
    records: z.array(
      ClusterAmountsWire.extend({
        startTime: z.string(),
        endTime: z.string(),
        clusterId: z.string(),
      }),
    ),
    metadata: z.object({
      query: z.object({ startTime: z.string(), endTime: z.string(), bucketSize: z.string() }),
      recordCount: z.number().int(),
      uniqueClusterCount: z.number().int(),
      totals: ClusterAmountsWire,
    }),
  })
  .transform((wire): ClusterBilling => ({
    records: wire.records.map((r) => ({
      startTime: r.startTime,
      endTime: r.endTime,
      clusterId: r.clusterId,
      totalAmount: r.totalAmount,
      gpuAmount: r.gpuAmount,
      diskAmount: r.diskAmount,
      networkingAmount: r.networkingAmount,
    })),
    startTime: wire.metadata.query.startTime,
    endTime: wire.metadata.query.endTime,
    bucketSize: wire.metadata.query.bucketSize,
    ...wire.metadata.totals,
  }));

// ---------------------------------------------------------------------------
// The calls
// ---------------------------------------------------------------------------

function checkClusterId(id: string): void {
  if (!isClusterId(id)) {
    throw new ApiError(
      'rejected',
      'not a Runpod cluster ID (empty, a dot segment, or control characters)',
    );
  }
}

/**
 * Creates a cluster (`POST /clusters` → 201 Cluster), all of its members at once. Sent once, never
 * retried, as a pod's create: anything that leaves it open whether the cluster exists (a transport
 * error, a timeout, a 408, a 5xx, an unreadable 2xx, an abort in flight) is an `ambiguous`
 * ApiError: look for the attempt's name in {@link listClusters} before anything else. A 400 in
 * Runpod's problem form is `capacity` (no room for this many pods of the type in one data center);
 * the other failures carry the fixed messages of {@link CLUSTER_CREATE_MESSAGES}.
 */
/** A cluster create's options. */
export interface CreateClusterOptions extends CallOptions {
  /**
   * Told (the client's clock, ms) as the create's bytes are about to leave: Runpod cannot have
   * made the cluster before (a member's whole-second createdAt may read earlier).
   */
  onSending?: (atMs: number) => void;
}

export async function createCluster(
  http: ApiTransport,
  body: CreateClusterBody,
  options: CreateClusterOptions = {},
): Promise<Cluster> {
  const checked = CreateClusterBodySchema.safeParse(body);
  if (!checked.success) {
    const path = checked.error.issues[0]?.path.map(String).join('.') ?? '';
    throw new ApiError(
      'rejected',
      `invalid cluster create body (${path || 'root'}): please report`,
    );
  }
  const outcome = await http.call({
    method: 'POST',
    path: '/clusters',
    body: checked.data,
    idempotent: false,
    create: true,
    createMessages: CLUSTER_CREATE_MESSAGES,
    signal: options.signal,
    redactor: http.redactor,
    ...(options.onSending ? { onSending: options.onSending } : {}),
  });
  if (outcome instanceof TransportFailure) {
    throw new ApiError('ambiguous', `${CLUSTER_CREATE_MESSAGES.transport} (${outcome.reason})`);
  }
  if (outcome.status >= 200 && outcome.status < 300) {
    const cluster = outcome.unreadable ? null : decodeJson(outcome.body, ClusterSchema);
    if (!cluster?.ok) throw new ApiError('ambiguous', CLUSTER_CREATE_MESSAGES.unreadable);
    return cluster.value;
  }
  throw createError(outcome, http.answerRetryAfterMs(outcome), CLUSTER_CREATE_MESSAGES);
}

/** The cluster `id`, or null when Runpod answers its own 404 (any other 404 is `not_found`). */
export async function getCluster(
  http: ApiTransport,
  id: string,
  options: CallOptions = {},
): Promise<Cluster | null> {
  checkClusterId(id);
  const path = `/clusters/${encodeURIComponent(id)}`;
  const answer = await http.okOr404('GET', path, options.signal);
  return answer === null ? null : http.decode(answer, ClusterSchema, `GET ${path}`);
}

/** The account's clusters, every page followed; with `name`, only those of exactly that name. */
export async function listClusters(
  http: ApiTransport,
  options: CallOptions & { name?: string } = {},
): Promise<Cluster[]> {
  const clusters = await http.listPaged(
    '/clusters',
    {},
    ListClustersSchema,
    (page) => page.clusters,
    options.signal,
  );
  return options.name === undefined ? clusters : clusters.filter((c) => c.name === options.name);
}

/**
 * The member pods of cluster `id` as full pods (`GET /clusters/{id}/pods`), ordered by rank (a
 * member without a rank yet last), or null when Runpod answers its own 404 (the cluster is gone).
 */
export async function listClusterPods(
  http: ApiTransport,
  id: string,
  options: CallOptions = {},
): Promise<Pod[] | null> {
  checkClusterId(id);
  const path = `/clusters/${encodeURIComponent(id)}/pods`;
  const answer = await http.okOr404('GET', path, options.signal);
  if (answer === null) return null;
  const pods = http.decode(answer, ListPodsSchema, `GET ${path}`).pods;
  const rank = (pod: Pod): number => pod.cluster?.rank ?? Number.MAX_SAFE_INTEGER;
  return [...pods].sort((a, b) => rank(a) - rank(b));
}

/**
 * Deletes cluster `id` and with it every member (`DELETE /clusters/{id}` → 204): true when Runpod
 * accepted it, false when Runpod answers its own 404 (already gone). Retried like every DELETE.
 */
export async function deleteCluster(
  http: ApiTransport,
  id: string,
  options: CallOptions = {},
): Promise<boolean> {
  checkClusterId(id);
  const path = `/clusters/${encodeURIComponent(id)}`;
  return (await http.okOr404('DELETE', path, options.signal)) !== null;
}

/**
 * What Runpod billed cluster `clusterId` (`GET /billing/clusters?clusterId=…`), bucketed by
 * `bucketSize` (default `day`) over [startTime, endTime). Read-only, retried like any GET.
 */
export async function clusterBilling(
  http: ApiTransport,
  clusterId: string,
  window: { startTime?: Date; endTime?: Date; bucketSize?: BillingBucketSize } = {},
  options: CallOptions = {},
): Promise<ClusterBilling> {
  const query: Record<string, string> = { clusterId, bucketSize: window.bucketSize ?? 'day' };
  if (window.startTime) query.startTime = window.startTime.toISOString();
  if (window.endTime) query.endTime = window.endTime.toISOString();
  const answer = await http.getOk('/billing/clusters', query, options.signal);
  return http.decode(answer, ListClusterBillingSchema, 'GET /billing/clusters');
}
