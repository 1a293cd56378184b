/**
 * Runpod API v2 shapes as this project uses them: the create body it sends and
 * the answers it reads, parsed with zod. Parsing is tolerant — unknown fields
 * are dropped, unknown status strings kept as they are — but strict about the
 * fields the lifecycle acts on. The authority is Runpod's OpenAPI document
 * (test/emulator/openapi-v2.json, "Frontdoor v2.9.0"); the live API's
 * additions it lacks are gathered in the EXTENSIONS section below.
 */
import { z } from 'zod';
import { lineColumn, scanJson } from '../runs/jsonPositions';
import { isPodId } from '../runs/podRecord';

export { ApiError, isApiError, runMessage, RunpodConfigError } from './errors';
export type { ApiErrorKind, ApiErrorOptions } from './errors';

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
}

/** The env key carrying a pod's run marker. */
export const RUN_MARKER_ENV = 'OVERBRAINER_RUN_ID';

/** Whether `id` can be a Runpod pod ID: the rule pod.json keeps, so a pod listed is a pod recorded. */
export { isPodId };

/** A pod that will never run again: EXITED, ERROR or TERMINATED. */
export function isDead(pod: Pick<Pod, 'status'>): boolean {
  return pod.status === 'EXITED' || pod.status === 'ERROR' || pod.status === 'TERMINATED';
}

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
  }));

/**
 * A list page's `pagination`. The stored document's lists carry none; the
 * live API's may (`GET /pods` pages with a cursor there), so
 * it is followed when present.
 */
const PaginationWire = z
  .object({ hasNextPage: z.boolean().nullish(), nextCursor: z.string().nullish() })
  .nullish();
export type Pagination = z.infer<typeof PaginationWire>;

export const ListPodsSchema = z.object({ pods: z.array(PodSchema), pagination: PaginationWire });

/** `POST /pods/{id}/action` actions. */
export const POD_ACTIONS = ['start', 'stop', 'restart', 'terminate'] as const;
export type PodAction = (typeof POD_ACTIONS)[number];

// ---------------------------------------------------------------------------
// The create body
// ---------------------------------------------------------------------------

/** The cloud every pod is placed in. */
export const POD_CLOUD = 'SECURE';
/** Lowest CUDA on the host: the default image is built for CUDA 13 (`major.minor`, as the document requires). */
export const MIN_CUDA_VERSION = '13.0';
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
  mounts: z
    .strictObject({
      network: z
        .array(z.strictObject({ volumeId: z.string().min(1), path: z.string().min(1) }))
        .min(1)
        .max(1),
    })
    .optional(),
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

// ---------------------------------------------------------------------------
// Catalog, volumes, templates
// ---------------------------------------------------------------------------

/** Catalog stock: NONE, LOW, MEDIUM, HIGH, or a newer level kept as sent. */
export type AvailabilityLevel = 'NONE' | 'LOW' | 'MEDIUM' | 'HIGH' | (string & {});

/** Whether a stock level means "can be placed now" (LOW, MEDIUM or HIGH). */
export function inStock(level: AvailabilityLevel | null): boolean {
  return level === 'LOW' || level === 'MEDIUM' || level === 'HIGH';
}

export interface GpuType {
  /** The ID a pod create takes (e.g. `NVIDIA GeForce RTX 4090`). */
  id: string;
  displayName: string;
  manufacturer: string | null;
  memoryInGb: number;
  /** Offered on the Secure cloud at all. */
  secureCloud: boolean;
  communityCloud: boolean;
  /** List price of one GPU of this type per hour on the Secure cloud (multiply by the count). */
  securePricePerHourUsd: number | null;
  communityPricePerHourUsd: number | null;
  /** Most GPUs of this type on one Secure machine (a ceiling, not stock). */
  maxCountSecure: number | null;
  /** Overall stock for the requested count/cloud; null unless availability was asked for. */
  availability: AvailabilityLevel | null;
  /** Stock per data center; empty unless asked for, or when unavailable everywhere. */
  dataCenters: { id: string; name: string; availability: AvailabilityLevel }[];
  cudaVersions: { version: string; available: boolean }[];
}

const GpuTypeWire = z
  .object({
    id: z.string(),
    name: z.string(),
    manufacturer: z.string().nullish(),
    memory: z.number(),
    secure: z.boolean().nullish(),
    community: z.boolean().nullish(),
    price: z.object({ secure: z.number().nullish(), community: z.number().nullish() }).nullish(),
    maxCount: z
      .object({ secure: z.number().int().nullish(), community: z.number().int().nullish() })
      .nullish(),
    availability: z.string().nullish(),
    dataCenters: z
      .array(z.object({ id: z.string(), name: z.string().nullish(), availability: z.string() }))
      .nullish(),
    cudaVersions: z.array(z.object({ version: z.string(), available: z.boolean() })).nullish(),
  })
  .transform((wire): GpuType => ({
    id: wire.id,
    displayName: wire.name,
    manufacturer: wire.manufacturer ?? null,
    memoryInGb: wire.memory,
    secureCloud: wire.secure ?? false,
    communityCloud: wire.community ?? false,
    securePricePerHourUsd: wire.price?.secure ?? null,
    communityPricePerHourUsd: wire.price?.community ?? null,
    maxCountSecure: wire.maxCount?.secure ?? null,
    availability: wire.availability ?? null,
    dataCenters: (wire.dataCenters ?? []).map((dc) => ({
      id: dc.id,
      name: dc.name ?? dc.id,
      availability: dc.availability,
    })),
    cudaVersions: wire.cudaVersions ?? [],
  }));
export const ListGpuTypesSchema = z.object({ gpus: z.array(GpuTypeWire) });

export interface DataCenter {
  id: string;
  name: string;
  region: string | null;
  globalNetwork: boolean;
  networkVolumeTypes: string[];
  /** GPU stock in this data center; empty unless asked for. */
  gpuAvailability: { id: string; name: string; availability: AvailabilityLevel }[];
}

const DataCenterWire = z
  .object({
    id: z.string(),
    name: z.string(),
    region: z.string().nullish(),
    globalNetwork: z.boolean().nullish(),
    networkVolumeTypes: z.array(z.string()).nullish(),
    gpuAvailability: z
      .array(z.object({ id: z.string(), name: z.string().nullish(), availability: z.string() }))
      .nullish(),
  })
  .transform((wire): DataCenter => ({
    id: wire.id,
    name: wire.name,
    region: wire.region ?? null,
    globalNetwork: wire.globalNetwork ?? false,
    networkVolumeTypes: wire.networkVolumeTypes ?? [],
    gpuAvailability: (wire.gpuAvailability ?? []).map((gpu) => ({
      id: gpu.id,
      name: gpu.name ?? gpu.id,
      availability: gpu.availability,
    })),
  }));
export const ListDataCentersSchema = z.object({ dataCenters: z.array(DataCenterWire) });

export interface NetworkVolume {
  id: string;
  name: string;
  sizeGb: number;
  /** The data center the volume lives in: a pod using it must be placed there. */
  dataCenterId: string;
  /** STANDARD or HIGH_PERFORMANCE (or newer). */
  type: string | null;
}

export const NetworkVolumeSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    size: z.number(),
    dataCenter: z.string(),
    type: z.string().nullish(),
  })
  .transform((wire): NetworkVolume => ({
    id: wire.id,
    name: wire.name,
    sizeGb: wire.size,
    dataCenterId: wire.dataCenter,
    type: wire.type ?? null,
  }));
export const ListNetworkVolumesSchema = z.object({
  networkVolumes: z.array(NetworkVolumeSchema),
  pagination: PaginationWire,
});

export interface Template {
  id: string;
  name: string;
  image: string;
  isPublic: boolean;
  category: string | null;
}

const TemplateWire = z.object({
  id: z.string(),
  name: z.string(),
  image: z.string(),
  serverless: z.boolean().nullish(),
  public: z.boolean().nullish(),
  category: z.string().nullish(),
});
export const ListTemplatesSchema = z.object({
  templates: z.array(TemplateWire),
  pagination: PaginationWire,
});

/** Pod templates only (serverless ones dropped), each ID once, in the order first seen. */
export function podTemplates(wire: z.infer<typeof TemplateWire>[]): Template[] {
  const seen = new Set<string>();
  const templates: Template[] = [];
  for (const t of wire) {
    if (t.serverless === true || seen.has(t.id)) continue;
    seen.add(t.id);
    templates.push({
      id: t.id,
      name: t.name,
      image: t.image,
      isPublic: t.public ?? false,
      category: t.category ?? null,
    });
  }
  return templates;
}

// ---------------------------------------------------------------------------
// EXTENSIONS: the live API's account secrets (absent from openapi-v2.json)
// ---------------------------------------------------------------------------
//
// `/v2/account/secrets` is newer than the stored document (Runpod's API
// reference has it). Shapes as Runpod's reference documents them:
//   GET    /account/secrets[?name=N]  → {secrets: [Secret]}
//   POST   /account/secrets {name, value[, description]} → 201 Secret; 409 when the name exists
//   PATCH  /account/secrets/{id} {value[, description]} → 200 Secret
//   DELETE /account/secrets/{id}      → 204; 404 when gone
// Secret = {id, name, description?, createdAt?}; the value is write-only and
// never returned. Names: 1..191 chars, `^[a-zA-Z_][a-zA-Z0-9_.\-/]*$`, not
// starting with RUNPOD (any case). Env values reference a secret as
// `{{ RUNPOD_SECRET_<name> }}`.

export interface Secret {
  id: string;
  name: string;
  description: string | null;
  createdAt: string | null;
}

export const SECRET_NAME = /^[a-zA-Z_][a-zA-Z0-9_.\-/]{0,190}$/;

/** Whether Runpod accepts `name` for a new secret. */
export function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name) && !name.toUpperCase().startsWith('RUNPOD');
}

/** The env value that makes Runpod substitute the secret `name` when the pod boots. */
export function secretReference(name: string): string {
  return `{{ RUNPOD_SECRET_${name} }}`;
}

export const SecretSchema = z
  .object({
    id: z.string().min(1),
    name: z.string(),
    description: z.string().nullish(),
    createdAt: z.string().nullish(),
  })
  .transform((wire): Secret => ({
    id: wire.id,
    name: wire.name,
    description: wire.description ?? null,
    createdAt: wire.createdAt ?? null,
  }));
export const ListSecretsSchema = z.object({
  secrets: z.array(SecretSchema),
  pagination: PaginationWire,
});

// ---------------------------------------------------------------------------
// Billing (`GET /billing/pods`: ListPodBillingResponse)
// ---------------------------------------------------------------------------

export const BILLING_BUCKET_SIZES = ['hour', 'day', 'week', 'month', 'year'] as const;
export type BillingBucketSize = (typeof BILLING_BUCKET_SIZES)[number];

/** One bucket of one pod: USD amounts (PodBillingRecord). */
export interface PodBillingRecord {
  startTime: string;
  endTime: string;
  podId: string;
  totalAmount: number;
  gpuAmount: number;
  cpuAmount: number;
  diskAmount: number;
}

export interface PodBilling {
  records: PodBillingRecord[];
  /** The resolved window (snapped to bucket boundaries). */
  startTime: string;
  endTime: string;
  bucketSize: string;
  /** Totals across the records (PodBillingMetadata.totals), USD. */
  totalAmount: number;
  gpuAmount: number;
  cpuAmount: number;
  diskAmount: number;
}

const PodBillingAmountsWire = z.object({
  totalAmount: z.number(),
  gpuAmount: z.number(),
  cpuAmount: z.number(),
  diskAmount: z.number(),
});

export const ListPodBillingSchema = z
  .object({
    records: z.array(
      PodBillingAmountsWire.extend({
        startTime: z.string(),
        endTime: z.string(),
        podId: z.string(),
      }),
    ),
    metadata: z.object({
      query: z.object({ startTime: z.string(), endTime: z.string(), bucketSize: z.string() }),
      recordCount: z.number().int(),
      uniquePodCount: z.number().int(),
      totals: PodBillingAmountsWire,
    }),
  })
  .transform((wire): PodBilling => ({
    records: wire.records.map((r) => ({
      startTime: r.startTime,
      endTime: r.endTime,
      podId: r.podId,
      totalAmount: r.totalAmount,
      gpuAmount: r.gpuAmount,
      cpuAmount: r.cpuAmount,
      diskAmount: r.diskAmount,
    })),
    startTime: wire.metadata.query.startTime,
    endTime: wire.metadata.query.endTime,
    bucketSize: wire.metadata.query.bucketSize,
    ...wire.metadata.totals,
  }));

// ---------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------

export type Decoded<T> = { ok: true; value: T } | { ok: false; reason: string };

/**
 * Parses `text` as JSON and checks it against `schema`. A failure is described
 * by category and position only — `syntax error at line 3 column 7`,
 * `unexpected end at line 1 column 12`, `data: pods.0.id invalid_format` —
 * never by quoting the content, which may hold secrets.
 */
export function decodeJson<T>(text: string, schema: z.ZodType<T>): Decoded<T> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    const scan = scanJson(text);
    // JSON.parse refused what the scanner accepts: nothing known does that; report the end.
    const offset = scan.ok ? text.length : scan.errorAt;
    const { line, column } = lineColumn(text, offset);
    const category = !scan.ok && scan.eof ? 'unexpected end' : 'syntax error';
    return { ok: false, reason: `${category} at line ${line} column ${column}` };
  }
  const result = schema.safeParse(parsed);
  if (result.success) return { ok: true, value: result.data };
  const issue = result.error.issues[0];
  const path = issue ? issue.path.map((p) => (typeof p === 'symbol' ? '?' : String(p))) : [];
  return {
    ok: false,
    reason: `data: ${path.length > 0 ? path.join('.') : '(root)'} ${issue?.code ?? 'invalid'}`,
  };
}
