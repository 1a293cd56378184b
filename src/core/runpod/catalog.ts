/**
 * Runpod's catalog and the account's storage: GPU types (prices, stock per data center), data
 * centers, network volumes (read and grown) and pod templates — their shapes, parsed with zod as
 * ./api.ts says, and their calls.
 */
import { z } from 'zod';
import { ApiError } from './apiErrors';
import type { ApiTransport } from './transport';
import { PaginationWire, type CallOptions } from './wire';

/** The cloud every pod is placed in. */
export const POD_CLOUD = 'SECURE';
/** Lowest CUDA on the host: the default image is built for CUDA 13 (`major.minor`, as the document requires). */
export const MIN_CUDA_VERSION = '13.0';

export interface ListGpuTypesOptions extends CallOptions {
  /** GPUs per pod for stock and price (default 1). */
  count?: number;
  /** Default SECURE. */
  cloud?: 'SECURE' | 'COMMUNITY';
  /** CUDA floor for stock, `major` or `major.minor` (default {@link MIN_CUDA_VERSION}). */
  minCudaVersion?: string;
  /** Ask for stock (`include=AVAILABILITY&product=POD`); count/cloud/CUDA only apply with it. */
  includeAvailability?: boolean;
}

export interface ListDataCentersOptions extends CallOptions {
  /** Ask for GPU stock per data center (default true). */
  includeGpuAvailability?: boolean;
}

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
// The calls
// ---------------------------------------------------------------------------

/**
 * GPU types with list prices; with `includeAvailability`, stock for
 * `count` GPUs on `cloud` with CUDA ≥ `minCudaVersion`, overall and per data
 * center (`GET /catalog/gpus?include=AVAILABILITY&product=POD&…`).
 */
export async function listGpuTypes(
  http: ApiTransport,
  options: ListGpuTypesOptions = {},
): Promise<GpuType[]> {
  const query: Record<string, string> = {};
  // count, cloud and minCudaVersion are valid only with include=AVAILABILITY
  // (the document: 400 otherwise), and product is required with it.
  if (options.includeAvailability ?? true) {
    query.include = 'AVAILABILITY';
    query.product = 'POD';
    query.cloud = options.cloud ?? POD_CLOUD;
    query.count = String(options.count ?? 1);
    query.minCudaVersion = options.minCudaVersion ?? MIN_CUDA_VERSION;
  }
  const answer = await http.getOk('/catalog/gpus', query, options.signal);
  return http.decode(answer, ListGpuTypesSchema, 'GET /catalog/gpus').gpus;
}

/** Data centers, with GPU stock per data center unless `includeGpuAvailability` is false. */
export async function listDataCenters(
  http: ApiTransport,
  options: ListDataCentersOptions = {},
): Promise<DataCenter[]> {
  const query: Record<string, string> =
    (options.includeGpuAvailability ?? true) ? { include: 'GPU_AVAILABILITY' } : {};
  const answer = await http.getOk('/catalog/datacenters', query, options.signal);
  return http.decode(answer, ListDataCentersSchema, 'GET /catalog/datacenters').dataCenters;
}

export async function listNetworkVolumes(
  http: ApiTransport,
  options: CallOptions = {},
): Promise<NetworkVolume[]> {
  return http.listPaged(
    '/network-volumes',
    {},
    ListNetworkVolumesSchema,
    (page) => page.networkVolumes,
    options.signal,
  );
}

/** The network volume `id`, or null when Runpod answers its own 404. */
export async function getNetworkVolume(
  http: ApiTransport,
  id: string,
  options: CallOptions = {},
): Promise<NetworkVolume | null> {
  const path = `/network-volumes/${encodeURIComponent(id)}`;
  const answer = await http.okOr404('GET', path, options.signal);
  if (answer === null) return null;
  return http.decode(answer, NetworkVolumeSchema, `GET ${path}`);
}

/**
 * Changes the network volume `id` (`PATCH /network-volumes/{id}`, Runpod's
 * `UpdateNetworkVolumeRequest`: only the fields given; `size` in GB, 10 to 4096, may only grow,
 * a smaller size is refused with 400). Returns the volume as Runpod answers it. Never retried
 * (a lost answer may have changed it: look it up with {@link getNetworkVolume}).
 */
export async function updateNetworkVolume(
  http: ApiTransport,
  id: string,
  update: { size?: number; name?: string },
  options: CallOptions = {},
): Promise<NetworkVolume> {
  const body: { size?: number; name?: string } = {};
  if (update.size !== undefined) {
    if (!Number.isInteger(update.size) || update.size < 10 || update.size > 4096) {
      throw new ApiError('rejected', `a network volume is 10 to 4096 GB, not ${update.size}`);
    }
    body.size = update.size;
  }
  if (update.name !== undefined) {
    if (update.name === '') throw new ApiError('rejected', 'a network volume needs a name');
    body.name = update.name;
  }
  if (Object.keys(body).length === 0) {
    throw new ApiError('rejected', 'a network volume update needs a size or a name');
  }
  const path = `/network-volumes/${encodeURIComponent(id)}`;
  const outcome = await http.call({
    method: 'PATCH',
    path,
    body,
    idempotent: false,
    signal: options.signal,
    redactor: http.redactor,
  });
  return http.decode(http.expectOk(outcome, http.redactor), NetworkVolumeSchema, `PATCH ${path}`);
}

/** The account's pod templates: serverless ones dropped, each ID once. */
export async function listTemplates(
  http: ApiTransport,
  options: CallOptions = {},
): Promise<Template[]> {
  const wire = await http.listPaged(
    '/templates',
    {},
    ListTemplatesSchema,
    (page) => page.templates,
    options.signal,
  );
  return podTemplates(wire);
}
