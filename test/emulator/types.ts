/**
 * The Runpod emulator's public face: its options, the handle a test holds (`Emulator`), the
 * fault helpers and what a test can read of a pod. The server is ./emulator.ts.
 */
import { type Clock } from '../../src/core/clock';
import { type CatalogSpec } from './catalog';
import { type GpuSetting } from './gpus';
import { type Fault, type PendingFault, type RouteName, type SshdFaultMode } from './faults';
import { type LedgerSnapshot } from './ledger';

export type PodStatus = 'PROVISIONING' | 'STARTING' | 'RUNNING' | 'EXITED' | 'ERROR' | 'TERMINATED';

/** Runpod's answer when a GPU type cannot be placed (clients match this phrase). */
export const NO_CAPACITY_DETAIL =
  'There are no longer any instances available with the requested specifications. Please refresh and try again.';

export interface BootDelaysMs {
  /** Create → STARTING (the image pull). */
  provisioning: number;
  /** Container started → RUNNING. */
  starting: number;
  /** The command exited → the container starts again (restart policy). */
  restart: number;
}

export interface EmulatorOptions {
  /** Port on 127.0.0.1 (default 0: a free one). */
  port?: number;
  /** Where pods keep their directories (default: a temp dir, removed by `close()`). */
  stateDir?: string;
  /** The account's API key (default: a random `rpa_…`). */
  apiKey?: string;
  /** Boot delays (default 150 / 150 / 300 ms), through `clock`. */
  bootDelaysMs?: Partial<BootDelaysMs>;
  /** Restart a pod whose command exits, as Runpod does (default true). */
  restartOnExit?: boolean;
  /** What is on offer (default `defaultCatalog()`); the emulator changes its stock. */
  catalog?: CatalogSpec;
  /** Time of the API (timestamps, boot delays, ledger costs). Default: the system clock. */
  clock?: Clock;
  /** Account secrets present from the start, name → value. */
  secrets?: Record<string, string>;
  /** Largest `GET /v2/pods` page (also the page size when no `limit` is sent). Default 1000. */
  maxPodsPageSize?: number;
  /** How often (real ms) a starting pod's sshd is probed for its banner. Default 50. */
  sshProbeIntervalMs?: number;
  /**
   * Files the pod image ships under `/workspace` (path relative to it → content), written at each
   * fresh container disk: e.g. `axolotl/scripts/cuda13_env.sh`, which the bootstrap sources.
   */
  imageFiles?: Record<string, string>;
  /**
   * A small disk: `/workspace/overbrainer` (where runs live) is a tmpfs of this many bytes in each
   * container, so a job can fill it (ENOSPC). Its files are then not visible in `dirs.workspace`.
   */
  workspaceQuotaBytes?: number;
  /**
   * Network volumes with a real quota: each is a tmpfs on the host of 94 % of its size (Runpod's
   * quota refuses writes before the nominal size) at `bytesPerGb` bytes per GB of it, so a job
   * can fill it; `PATCH /v2/network-volumes/{id}` raises it (remount) under the running pods.
   * Unset: a volume is a plain directory.
   */
  volumeQuota?: { bytesPerGb: number };
  /**
   * The network between clients and pods: given a pod's sshd port (each container start), the
   * port to publish in `ssh.direct` instead, e.g. a TCP relay's that a test can cut. Not used for
   * pods under an sshd fault.
   */
  sshRelay?: (podId: string, sshPort: number) => Promise<number>;
  /**
   * Whether a cluster member's own key (its `RUNPOD_API_KEY`) may delete its cluster. Runpod's
   * documents do not say; default false (403), the `memberKey` fault changes it.
   */
  memberKeyDeletesCluster?: boolean;
}

export interface RequestLogEntry {
  seq: number;
  method: string;
  /** Path and query as requested. */
  path: string;
  /** The document's operationId, or null when no operation matched. */
  route: string | null;
  /** HTTP status sent, or what happened instead. */
  status: number | 'dropped' | 'hung';
  atMs: number;
  durationMs: number;
  /** Which key called: `account`, `pod:<id>`, `none` (no key) or `invalid`. */
  key: string;
  /** The fault that shaped the answer, if any. */
  faultId?: string;
}

/** What the tests see of a pod beyond the API. */
export interface PodInternals {
  id: string;
  name: string;
  status: PodStatus;
  /** The pod-scoped key (the pod's `RUNPOD_API_KEY`). */
  apiKey: string;
  /** Port sshd is configured for; published port (may differ under an sshd fault). */
  sshPort: number | null;
  publishedPort: number | null;
  dirs: PodDirs;
  /** `pid:[inode]` of the current container's PID namespace. */
  pidNamespace: string | null;
  /** Host pids of the container's `unshare` (outside the namespace) and of its PID 1. */
  unsharePid: number | null;
  initPid: number | null;
  /** Host pids of the pod's live processes. */
  processes: number[];
  /** How many times its container has started. */
  containerStarts: number;
  /** Its place in an Instant Cluster (rank, private address); null for a pod of its own. */
  member: { clusterId: string; rank: number; ip: string } | null;
}

export interface PodDirs {
  root: string;
  /** Mounted over /workspace, /etc/overbrainer, /etc/ssh, /root/.ssh in the pod. */
  workspace: string;
  etcOverbrainer: string;
  etcSsh: string;
  rootHome: string;
  rootSsh: string;
  /** The persistent volume (`mounts.persistent`), if any. */
  volume: string | null;
  log: string;
}

export interface FaultsApi {
  /** Installs a fault (see ./faults.ts); returns its id. Pod faults are carried out at once. */
  add(fault: Fault): Promise<string>;
  /** Removes every pending fault (stock changes stay). */
  clear(): void;
  pending(): PendingFault[];
  /** The Nth next call of `route` (default the next) answers `status` problem+json. */
  failCall(
    route: RouteName,
    status: number,
    opts?: { nth?: number; times?: number | 'always'; detail?: string },
  ): Promise<string>;
  /** The Nth next call of `route` loses its connection without an answer. */
  dropCall(route: RouteName, opts?: { nth?: number; applied?: boolean }): Promise<string>;
  /** The next create makes the pod, then answers `status` (default 500). */
  createThenFail(status?: number): Promise<string>;
  /** The next create makes the pod, then never answers. */
  createThenHang(): Promise<string>;
  /** 429 with `Retry-After: retryAfterS` on the next `times` calls of `route`. */
  rateLimit(route: RouteName, retryAfterS: number, times?: number): Promise<string>;
  /** The next `looks` GETs of an existing pod answer 404 in Runpod's problem shape. */
  transientNotFound(podId: string, looks: number): Promise<string>;
  /** Free GPUs of a type (in one data center, or in all that offer it). */
  setStock(gpuId: string, stock: number, dataCenterId?: string): Promise<string>;
  slowBoot(
    delays: { provisioningMs?: number; startingMs?: number },
    pods?: number,
  ): Promise<string>;
  sshdNeverStarts(mode: SshdFaultMode, podId?: string): Promise<string>;
  podDies(podId: string): Promise<string>;
  podCrash(podId: string): Promise<string>;
  podVanishes(podId: string): Promise<string>;
  /** The whole Instant Cluster disappears: its members deleted by the provider, 404 from now on. */
  clusterVanishes(clusterId: string): Promise<string>;
  /** The pod's host stops answering (SSH blackholed, listed RUNNING), then EXITED after `exitAfterMs`. */
  hostLost(podId: string, exitAfterMs?: number): Promise<string>;
  /** Whether a cluster member's own key may delete its cluster from now on (default: refused). */
  memberKeyDeletesCluster(allowed: boolean): Promise<string>;
  /** Connections refused or reset for `forMs` (through the clock). */
  unreachable(forMs: number, mode: 'refuse' | 'reset'): Promise<string>;
  /** Ends an `unreachable` fault early. */
  reachable(): Promise<void>;
}

export interface Emulator {
  /** `http://127.0.0.1:<port>/v2` */
  readonly baseUrl: string;
  /** `http://127.0.0.1:<port>` (the admin routes are under `/_emulator`). */
  readonly origin: string;
  readonly apiKey: string;
  readonly port: number;
  readonly stateDir: string;
  readonly catalog: CatalogSpec;
  ledger(): LedgerSnapshot;
  requests(): RequestLogEntry[];
  readonly faults: FaultsApi;
  /** Responses of the emulator that broke the document (should stay empty). */
  contractViolations(): string[];
  /** Every pod not deleted (cluster members included). */
  pods(): PodInternals[];
  /** Every cluster not deleted: its id, name and members' pod ids by rank. */
  clusters(): { id: string; name: string; memberIds: string[] }[];
  pod(id: string): PodInternals | undefined;
  /** The pod's stdout/stderr so far (across container restarts, kept after delete). */
  podLog(id: string): string;
  /** Creates or replaces an account secret (as the API would). */
  setSecret(name: string, value: string): void;
  /**
   * What the pods' `nvidia-smi` stand-in answers from its next call (./gpus.ts): `podId`'s, or
   * every pod's (and the later pods'). Default `busy`.
   */
  setGpus(setting: GpuSetting, podId?: string): void;
  /** Kills every pod (no process survives) and stops serving. Idempotent. */
  close(): Promise<void>;
}
