/**
 * Runpod API v2 shapes as this project uses them: the create body it sends and
 * the answers it reads, parsed with zod. Parsing is tolerant — unknown fields
 * are dropped, unknown status strings kept as they are — but strict about the
 * fields the lifecycle acts on. The authority is Runpod's OpenAPI document
 * (test/emulator/openapi-v2.json, "Frontdoor v2.9.0"); the live API's
 * additions it lacks are marked EXTENSION. Here: the pods and the create body; the catalog and
 * volumes in ./catalog.ts, the account's secrets and billing in ./account.ts.
 */
import { z } from 'zod';
import { isPodId } from '../runs/podRecord';
import { MIN_CUDA_VERSION, POD_CLOUD } from './catalog';
import { PaginationWire } from './wire';

export { ApiError, isApiError, runMessage, RunpodConfigError } from './apiErrors';
export type { ApiErrorKind, ApiErrorOptions } from './apiErrors';
export { decodeJson, type Decoded, type Pagination } from './wire';
export {
  inStock,
  MIN_CUDA_VERSION,
  POD_CLOUD,
  ListDataCentersSchema,
  ListGpuTypesSchema,
  ListNetworkVolumesSchema,
  ListTemplatesSchema,
  NetworkVolumeSchema,
  podTemplates,
  type AvailabilityLevel,
  type DataCenter,
  type GpuType,
  type NetworkVolume,
  type Template,
} from './catalog';
export {
  BILLING_BUCKET_SIZES,
  isSecretName,
  ListPodBillingSchema,
  ListSecretsSchema,
  SECRET_NAME,
  SecretSchema,
  secretReference,
  type BillingBucketSize,
  type PodBilling,
  type PodBillingRecord,
  type Secret,
} from './account';

// ---------------------------------------------------------------------------
// Pods
// ---------------------------------------------------------------------------

/** The statuses the document lists. Others are kept as received. */
export const POD_STATUSES = [
  'PROVISIONING',
  'STARTING',
  'RUNNING',
  'EXITED',
  'ERROR',
  'TERMINATED',
] as const;
export type KnownPodStatus = (typeof POD_STATUSES)[number];
/** A pod's status: one of {@link POD_STATUSES}, or a newer one kept as Runpod sent it. */
export type PodStatus = KnownPodStatus | (string & {});

/** A pod's direct SSH endpoint (`ssh.direct`): null until port 22 is published; changes on restart. */
export interface SshDirect {
  host: string;
  port: number;
  username: string;
}

/**
 * A pod as the lifecycle needs it. Of the pod's env only the run marker is
 * read; the rest (which may hold a host key) is never kept in memory.
 */
export interface Pod {
  /** As Runpod gave it: any string but the empty one, a dot segment or control characters (`isPodId`); in URL paths it goes encoded. */
  id: string;
  name: string;
  status: PodStatus;
  /** What Runpod bills now (USD per hour; 0 when not running, or when absent from the answer). */
  costPerHourUsd: number;
  dataCenterId: string | null;
  gpu: { id: string; count: number } | null;
  sshDirect: SshDirect | null;
  /** `env.OVERBRAINER_RUN_ID`: the run this pod belongs to, or null for a foreign pod. */
  runMarker: string | null;
  /** RFC 3339 as Runpod wrote it. */
  createdAt: string | null;
  /** Its membership of an Instant Cluster (`cluster`); null for a pod of its own. */
  cluster: PodClusterMembership | null;
}

/** The env key carrying a pod's run marker. */
export const RUN_MARKER_ENV = 'OVERBRAINER_RUN_ID';

/** Whether `id` can be a Runpod pod ID: the rule pod.json keeps, so a pod listed is a pod recorded. */
export { isPodId };

/** A pod that will never run again: EXITED, ERROR or TERMINATED. */
export function isDead(pod: Pick<Pod, 'status'>): boolean {
  return pod.status === 'EXITED' || pod.status === 'ERROR' || pod.status === 'TERMINATED';
}

/** A pod's membership (`Pod.cluster`): rank and address are null until assigned. */
export interface PodClusterMembership {
  clusterId: string;
  rank: number | null;
  /** The member's address on the cluster's private network. */
  ip: string | null;
}

/** The `cluster` block of a pod, read tolerantly: a malformed one reads as none. */
export const PodClusterWire = z
  .object({
    id: z.string(),
    rank: z.number().int().nonnegative().nullish(),
    ip: z.string().nullish(),
  })
  .transform((wire): PodClusterMembership => ({
    clusterId: wire.id,
    rank: wire.rank ?? null,
    ip: wire.ip ?? null,
  }));

const SshDirectWire = z.object({
  host: z.string(),
  port: z.number().int(),
  username: z.string(),
});

export const PodSchema = z
  .object({
    id: z.string().refine(isPodId, 'not a pod ID: empty, a dot segment, or control characters'),
    name: z.string(),
    status: z.string(),
    cost: z.number().nullish(),
    dataCenterId: z.string().nullish(),
    gpu: z.object({ id: z.string(), count: z.number().int().positive().optional() }).nullish(),
    ssh: z.object({ direct: SshDirectWire.nullish() }).nullish(),
    // Only the marker is declared, so zod drops every other env entry. A
    // marker of the wrong type reads as none: the pod is then foreign.
    env: z
      .object({ [RUN_MARKER_ENV]: z.string().optional().catch(undefined) })
      .nullish()
      .catch(null),
    createdAt: z.string().nullish(),
    cluster: PodClusterWire.nullish().catch(null),
  })
  .transform((wire): Pod => ({
    id: wire.id,
    name: wire.name,
    status: wire.status,
    costPerHourUsd: wire.cost ?? 0,
    dataCenterId: wire.dataCenterId ?? null,
    gpu: wire.gpu ? { id: wire.gpu.id, count: wire.gpu.count ?? 1 } : null,
    sshDirect: wire.ssh?.direct
      ? {
          host: wire.ssh.direct.host,
          port: wire.ssh.direct.port,
          username: wire.ssh.direct.username,
        }
      : null,
    runMarker: wire.env?.[RUN_MARKER_ENV] ?? null,
    createdAt: wire.createdAt ?? null,
    cluster: wire.cluster ?? null,
  }));

export const ListPodsSchema = z.object({ pods: z.array(PodSchema), pagination: PaginationWire });

/** `POST /pods/{id}/action` actions. */
export const POD_ACTIONS = ['start', 'stop', 'restart', 'terminate'] as const;
export type PodAction = (typeof POD_ACTIONS)[number];

// ---------------------------------------------------------------------------
// The create body
// ---------------------------------------------------------------------------

/** The only published port: sshd, reached directly (never Runpod's proxy). */
export const POD_PORTS: readonly string[] = ['22/tcp'];
/** Where a network volume is mounted on the pod. */
export const NETWORK_VOLUME_PATH = '/workspace/data';

/**
 * The body of `POST /pods`, checked strictly before it is sent (the API
 * answers unknown fields with 422). The field names follow the document's
 * `CreatePodRequest`, and nothing else is sent (`cmd` below is the one extension):
 * `gpu.minCudaVersion` is the document's `CreateGpuConfig` field (pattern
 * `major.minor`), `disk` its container disk in GB, `mounts.network[]` its
 * `NetworkMount {volumeId, path}` (at most one), `cloud`/`startSsh`/`ports`/
 * `env`/`dataCenterIds` top-level as it defines them.
 */
/** A create's network volume mount (one at most), for a pod and a cluster alike. */
export const MountsSchema = z
  .strictObject({
    network: z
      .array(z.strictObject({ volumeId: z.string().min(1), path: z.string().min(1) }))
      .min(1)
      .max(1),
  })
  .optional();

export const CreatePodBodySchema = z.strictObject({
  name: z.string().min(1),
  image: z.string().min(1),
  cloud: z.literal(POD_CLOUD),
  gpu: z.strictObject({
    id: z.string().min(1),
    count: z.number().int().min(1),
    minCudaVersion: z.string().regex(/^\d+\.\d+$/),
  }),
  disk: z.number().int().min(1),
  ports: z.array(z.string()),
  startSsh: z.boolean(),
  env: z.record(z.string(), z.string()),
  // EXTENSION (the one deviation from openapi-v2.json): `cmd`, the pod's
  // command run after the image's entrypoint, as an array of strings. The
  // stored document (v2.9.0) has only the older `args` string and closes
  // `CreatePodRequest` with `unevaluatedProperties: false`; the live API
  // accepts `cmd` since late 2026 (Runpod's API notes), and so does the
  // emulator. If Runpod ever refuses it, the create fails with a 422
  // (`rejected`) before any pod exists — never silently without the bootstrap.
  cmd: z.array(z.string()).min(1),
  dataCenterIds: z.array(z.string().min(1)).optional(),
  mounts: MountsSchema,
});
export type CreatePodBody = z.infer<typeof CreatePodBodySchema>;

export interface CreatePodParams {
  /** The attempt's unique name (`overbrainer-<run-id>-<n>`), found again by reconciliation. */
  name: string;
  image: string;
  gpuTypeId: string;
  gpuCount: number;
  containerDiskGb: number;
  /** Must hold the run marker ({@link RUN_MARKER_ENV}). */
  env: Record<string, string>;
  cmd: string[];
  /** Empty or absent: any data center. */
  dataCenterIds?: readonly string[];
  networkVolumeId?: string | null;
}

/** The create body with the fixed parts of every overbrainer pod filled in. */
export function createPodBody(params: CreatePodParams): CreatePodBody {
  const body: CreatePodBody = {
    name: params.name,
    image: params.image,
    cloud: POD_CLOUD,
    gpu: { id: params.gpuTypeId, count: params.gpuCount, minCudaVersion: MIN_CUDA_VERSION },
    disk: params.containerDiskGb,
    ports: [...POD_PORTS],
    startSsh: false,
    env: { ...params.env },
    cmd: [...params.cmd],
  };
  if (params.dataCenterIds && params.dataCenterIds.length > 0) {
    body.dataCenterIds = [...params.dataCenterIds];
  }
  if (params.networkVolumeId) {
    body.mounts = { network: [{ volumeId: params.networkVolumeId, path: NETWORK_VOLUME_PATH }] };
  }
  return body;
}
