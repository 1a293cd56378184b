/**
 * What the emulated Runpod offers: GPU types (price, VRAM, CUDA versions, stock per data center),
 * data centers, network volumes and templates. The defaults give a few GPU types, one of them out
 * of stock everywhere, so a client's fallback over GPU types is exercised without any setup.
 *
 * Stock is counted in GPUs per data center: a pod of `count` GPUs takes `count` from the data
 * center it is placed in and gives them back when it is stopped or deleted.
 */

export type AvailabilityLevel = 'NONE' | 'LOW' | 'MEDIUM' | 'HIGH';
export type CloudType = 'SECURE' | 'COMMUNITY';
export type Region =
  | 'NORTH_AMERICA'
  | 'SOUTH_AMERICA'
  | 'EUROPE'
  | 'ASIA'
  | 'MIDDLE_EAST'
  | 'AFRICA'
  | 'OCEANIA'
  | 'ANTARCTICA'
  | 'UNKNOWN';
export type VolumeType = 'STANDARD' | 'HIGH_PERFORMANCE';

export interface GpuTypeSpec {
  /** Runpod's GPU type id, used in `gpu.id` on create, e.g. `NVIDIA GeForce RTX 4090`. */
  id: string;
  /** Display name, e.g. `RTX 4090`. */
  name: string;
  manufacturer: 'NVIDIA' | 'AMD' | 'UNKNOWN';
  memoryGb: number;
  /** Serverless pool id, or null. */
  pool: string | null;
  /** Offered on the secure / community cloud. */
  secure: boolean;
  community: boolean;
  priceSecureUsdPerHour: number;
  priceCommunityUsdPerHour: number;
  maxCount: { secure: number; community: number };
  /** CUDA versions of the machines with this GPU, `major.minor`. */
  cudaVersions: string[];
  /** Free GPUs of this type per data center id (a data center absent here does not offer it). */
  stock: Record<string, number>;
}

export interface DataCenterSpec {
  id: string;
  name: string;
  region: Region;
  /** ISO 3166-1 alpha-2, for the `countryCodes` filter. */
  countryCode: string;
  globalNetwork: boolean;
  networkVolumeTypes: VolumeType[];
  compliance: string[];
}

export interface NetworkVolumeSpec {
  id: string;
  name: string;
  sizeGb: number;
  dataCenterId: string;
  type: VolumeType;
}

/** A template exactly as `GET /v2/templates` returns it (the document's `Template`). */
export interface TemplateSpec {
  id: string;
  name: string;
  image: string;
  args: string;
  disk: number;
  mounts: { persistent?: { size: number; path: string } };
  ports: string[];
  env: Record<string, string>;
  registry: string | null;
  serverless: boolean;
  public: boolean;
  category: 'CPU' | 'NVIDIA' | 'AMD';
  startSsh: boolean;
  startJupyter: boolean;
  allowedCudaVersions: string[];
}

/**
 * A pod template as Runpod lists it: `fields` over the plain one (20 GB of container disk, no
 * ports, no env, private, NVIDIA, not serverless).
 */
export function templateSpec(
  fields: Pick<TemplateSpec, 'id' | 'name' | 'image'> & Partial<TemplateSpec>,
): TemplateSpec {
  return {
    args: '',
    disk: 20,
    mounts: {},
    ports: [],
    env: {},
    registry: null,
    serverless: false,
    public: false,
    category: 'NVIDIA',
    startSsh: false,
    startJupyter: false,
    allowedCudaVersions: [],
    ...fields,
  };
}

export interface CatalogSpec {
  gpuTypes: GpuTypeSpec[];
  dataCenters: DataCenterSpec[];
  networkVolumes: NetworkVolumeSpec[];
  templates: TemplateSpec[];
  /** What a stopped pod's disks cost (Runpod: $0.20 per GB and month), for the ledger. */
  stoppedDiskUsdPerGbMonth: number;
}

/** A fresh copy of the default catalog (safe to mutate). */
export function defaultCatalog(): CatalogSpec {
  return {
    gpuTypes: [
      {
        id: 'NVIDIA GeForce RTX 4090',
        name: 'RTX 4090',
        manufacturer: 'NVIDIA',
        memoryGb: 24,
        pool: 'ADA_24',
        secure: true,
        community: true,
        priceSecureUsdPerHour: 0.69,
        priceCommunityUsdPerHour: 0.34,
        maxCount: { secure: 8, community: 4 },
        cudaVersions: ['12.4', '12.8', '13.0'],
        stock: { 'EU-RO-1': 8, 'US-TX-3': 4 },
      },
      {
        id: 'NVIDIA RTX A5000',
        name: 'RTX A5000',
        manufacturer: 'NVIDIA',
        memoryGb: 24,
        pool: 'AMPERE_24',
        secure: true,
        community: true,
        priceSecureUsdPerHour: 0.27,
        priceCommunityUsdPerHour: 0.16,
        maxCount: { secure: 8, community: 8 },
        cudaVersions: ['12.4', '12.8'],
        stock: { 'US-TX-3': 6, 'US-KS-2': 2 },
      },
      {
        id: 'NVIDIA A100 80GB PCIe',
        name: 'A100 PCIe',
        manufacturer: 'NVIDIA',
        memoryGb: 80,
        pool: 'AMPERE_80',
        secure: true,
        community: false,
        priceSecureUsdPerHour: 1.64,
        priceCommunityUsdPerHour: 1.19,
        maxCount: { secure: 8, community: 0 },
        cudaVersions: ['12.8', '13.0'],
        stock: { 'US-KS-2': 2 },
      },
      {
        // Out of stock everywhere: a create answers "no longer any instances available".
        id: 'NVIDIA H100 80GB HBM3',
        name: 'H100 SXM',
        manufacturer: 'NVIDIA',
        memoryGb: 80,
        pool: 'HOPPER_80',
        secure: true,
        community: false,
        priceSecureUsdPerHour: 2.99,
        priceCommunityUsdPerHour: 2.69,
        maxCount: { secure: 8, community: 0 },
        cudaVersions: ['12.8', '13.0'],
        stock: { 'EU-RO-1': 0, 'US-KS-2': 0 },
      },
    ],
    dataCenters: [
      {
        id: 'EU-RO-1',
        name: 'EU Romania 1',
        region: 'EUROPE',
        countryCode: 'RO',
        globalNetwork: true,
        networkVolumeTypes: ['STANDARD'],
        compliance: ['GDPR', 'ISO_IEC_27001', 'SOC_2_TYPE_2'],
      },
      {
        id: 'US-TX-3',
        name: 'US Texas 3',
        region: 'NORTH_AMERICA',
        countryCode: 'US',
        globalNetwork: false,
        networkVolumeTypes: ['STANDARD', 'HIGH_PERFORMANCE'],
        compliance: ['SOC_2_TYPE_2'],
      },
      {
        id: 'US-KS-2',
        name: 'US Kansas 2',
        region: 'NORTH_AMERICA',
        countryCode: 'US',
        globalNetwork: false,
        networkVolumeTypes: ['STANDARD'],
        compliance: [],
      },
    ],
    networkVolumes: [
      {
        id: 'agv6w2qcg7',
        name: 'overbrainer-data',
        sizeGb: 50,
        dataCenterId: 'EU-RO-1',
        type: 'STANDARD',
      },
    ],
    templates: [
      templateSpec({
        id: '9x4m2p7v',
        name: 'PyTorch 2.8 (CUDA 12.8)',
        image: 'runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404',
        disk: 50,
        ports: ['22/tcp'],
      }),
      templateSpec({
        id: 'q0w2n8sl3x',
        name: 'Inference worker',
        image: 'runpod/worker-vllm:stable-cuda12.8',
        serverless: true,
      }),
    ],
    stoppedDiskUsdPerGbMonth: 0.2,
  };
}

/** How many pods of `count` GPUs `freeGpus` allows, as Runpod's coarse levels. */
export function availabilityLevel(freeGpus: number, count: number): AvailabilityLevel {
  const pods = Math.floor(Math.max(0, freeGpus) / Math.max(1, count));
  if (pods <= 0) return 'NONE';
  if (pods <= 2) return 'LOW';
  if (pods <= 6) return 'MEDIUM';
  return 'HIGH';
}

const LEVEL_RANK: Record<AvailabilityLevel, number> = { NONE: 0, LOW: 1, MEDIUM: 2, HIGH: 3 };

export function bestLevel(levels: AvailabilityLevel[]): AvailabilityLevel {
  return levels.reduce<AvailabilityLevel>(
    (best, level) => (LEVEL_RANK[level] > LEVEL_RANK[best] ? level : best),
    'NONE',
  );
}

/** `12.11` > `12.2`: CUDA versions compare numerically per part, not as decimals. */
export function compareCuda(a: string, b: string): number {
  const [aMajor = 0, aMinor = 0] = a.split('.').map(Number);
  const [bMajor = 0, bMinor = 0] = b.split('.').map(Number);
  return aMajor !== bMajor ? aMajor - bMajor : aMinor - bMinor;
}

/** Whether `version` satisfies a floor written `12` (any 12.x and above) or `12.1`. */
export function cudaAtLeast(version: string, floor: string): boolean {
  if (!floor.includes('.')) return Number(version.split('.')[0]) >= Number(floor);
  return compareCuda(version, floor) >= 0;
}

/** The per-hour price of one GPU of `type` in `cloud`. */
export function gpuPriceUsdPerHour(type: GpuTypeSpec, cloud: CloudType): number {
  return cloud === 'SECURE' ? type.priceSecureUsdPerHour : type.priceCommunityUsdPerHour;
}
