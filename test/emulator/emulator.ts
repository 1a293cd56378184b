/**
 * A local Runpod: the Runpod API v2 calls the client makes, on 127.0.0.1, with the shapes,
 * status codes and problem+json errors of openapi-v2.json (plus ./extensions.ts), bearer keys
 * (the account key and one pod-scoped key per pod), and pods that are real: each runs its `cmd`
 * in its own PID and mount namespaces (./container.ts), gets Runpod's env, an sshd_config as an
 * image ships it, and `ssh.direct` once its sshd really answers. A ledger bills every pod; faults
 * make every documented failure happen on demand (./faults.ts).
 *
 * A fake that checks: every request is validated strictly against the document (unknown or
 * invalid fields: 422 with `errors[]`), and every response the emulator sends is validated too
 * (`contractViolations()` lists any breach of its own; tests assert it stays empty).
 */
import { randomBytes } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { isAbortError, rfc3339, systemClock, type Clock } from '../../src/core/clock';
import {
  availabilityLevel,
  bestLevel,
  cudaAtLeast,
  compareCuda,
  defaultCatalog,
  gpuPriceUsdPerHour,
  type AvailabilityLevel,
  type CatalogSpec,
  type CloudType,
  type GpuTypeSpec,
  type NetworkVolumeSpec,
} from './catalog';
import {
  Container,
  ensureHostMountpoints,
  initScript,
  POD_PATHS,
  probeSshBanner,
  type BindMount,
} from './container';
import { MAX_PODS_PAGE_LIMIT, type JsonObject } from './extensions';
import {
  FaultBook,
  parseFault,
  type Fault,
  type FaultEffect,
  type FaultHit,
  type PendingFault,
  type RouteName,
  type SshdFaultMode,
} from './faults';
import { Ledger, type DeletedBy, type LedgerEntry, type LedgerSnapshot } from './ledger';
import { OpenApiContract } from './openapi';

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
  /** The pod's host stops answering (SSH blackholed, listed RUNNING), then EXITED after `exitAfterMs`. */
  hostLost(podId: string, exitAfterMs?: number): Promise<string>;
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
  /** Every pod not deleted. */
  pods(): PodInternals[];
  pod(id: string): PodInternals | undefined;
  /** The pod's stdout/stderr so far (across container restarts, kept after delete). */
  podLog(id: string): string;
  /** Creates or replaces an account secret (as the API would). */
  setSecret(name: string, value: string): void;
  /** Kills every pod (no process survives) and stops serving. Idempotent. */
  close(): Promise<void>;
}

type Reply = { status: number; body?: unknown; headers?: Record<string, string> };

interface PodLogEvent {
  id: string;
  ts: string;
  source: 'container' | 'system';
  line: string;
}

interface PodState {
  id: string;
  name: string;
  apiKey: string;
  image: string;
  args: string;
  disk: number;
  ports: string[];
  env: Record<string, string>;
  cmd: string[];
  mounts: JsonObject;
  gpuType: GpuTypeSpec;
  gpuCount: number;
  cloud: CloudType;
  dataCenterId: string;
  cudaVersion: string;
  gpuUsdPerHour: number;
  createdAtMs: number;
  startedAtMs: number | null;
  status: PodStatus;
  gen: number;
  abort: AbortController;
  container: Container | undefined;
  containerStarts: number;
  /** When the current container started (clock), and how many ended within seconds in a row. */
  containerStartedAtMs: number;
  quickExits: number;
  sshPort: number | null;
  publishedPort: number | null;
  bannerSeen: boolean;
  published: boolean;
  silentServer: TcpServer | undefined;
  silentSockets: Set<Socket>;
  sshdFault: SshdFaultMode | undefined;
  holdsStock: boolean;
  deleted: boolean;
  dirs: PodDirs;
  runtimeDir: string;
  networkMount: BindMount | undefined;
  persistentMount: BindMount | undefined;
}

interface SecretState {
  id: string;
  name: string;
  value: string;
  description: string | null;
  createdAtMs: number;
  updatedAtMs: number;
}

const SECRET_REF = /\{\{\s*RUNPOD_SECRET_([A-Za-z0-9_.-]+)\s*\}\}/g;
const MAX_BODY_BYTES = 4 * 1024 * 1024;
const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  402: 'Payment Required',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};
const DEFAULT_DETAILS: Record<number, string> = {
  400: 'request could not be processed',
  402: 'Your account balance is too low to create this pod. Add funds and try again.',
  403: 'access denied',
  404: 'pod not found',
  409: 'conflict',
  422: 'Request validation failed.',
  429: 'rate limit exceeded for the minute window',
  500: 'internal server error',
  502: 'bad gateway',
  503: 'service unavailable',
  504: 'gateway timeout',
};
const IMPLEMENTED = new Set<string>([
  'createPod',
  'listPods',
  'getPod',
  'deletePod',
  'podAction',
  'listGpuTypes',
  'listDataCenters',
  'listNetworkVolumes',
  'getNetworkVolume',
  'updateNetworkVolume',
  'listTemplates',
  'listSecrets',
  'createSecret',
  'updateSecret',
  'deleteSecret',
  'listPodBilling',
  'getPodLogs',
]);
const ACTIONS_BY_STATUS: Record<PodStatus, string[]> = {
  PROVISIONING: ['stop', 'terminate'],
  STARTING: ['stop', 'terminate'],
  RUNNING: ['stop', 'restart', 'terminate'],
  EXITED: ['start', 'terminate'],
  ERROR: ['start', 'terminate'],
  TERMINATED: [],
};

/** Every emulator of this process, so none leaves a pod behind when the process exits. */
const live = new Set<EmulatorServer>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const emulator of live) emulator.killAllNow();
  });
}

function randomId(length: number, alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789'): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const b of bytes) out += alphabet[b % alphabet.length];
  return out;
}

function randomApiKey(): string {
  return `rpa_${randomId(40, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')}`;
}

function problem(status: number, detail?: string, errors?: string[]): Reply {
  return {
    status,
    body: {
      title: REASONS[status] ?? 'Error',
      status,
      detail: detail ?? DEFAULT_DETAILS[status] ?? 'error',
      ...(errors ? { errors } : {}),
    },
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function freePort(exclude: Set<number>): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createTcpServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (!address || typeof address === 'string') reject(new Error('no port'));
        else if (exclude.has(address.port)) freePort(exclude).then(resolve, reject);
        else resolve(address.port);
      });
    });
  });
}

function sleepReal(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function sshdConfig(port: number): string {
  return [
    '# As the pod image ships it (written by the Runpod emulator at each container start).',
    `Port ${port}`,
    'ListenAddress 127.0.0.1',
    'PermitRootLogin prohibit-password',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'UsePAM no',
    'PidFile /run/sshd.pid',
    'Subsystem sftp internal-sftp',
    'HostKey /etc/ssh/ssh_host_ed25519_key',
    '',
  ].join('\n');
}

function checkPrerequisites(): void {
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    throw new Error(
      'The Runpod emulator runs each pod in its own Linux mount and PID namespaces and needs root: run it as root (or in a root container).',
    );
  }
  for (const tool of ['unshare', 'setpriv']) {
    const probe = spawnSync(tool, ['--version'], { stdio: 'ignore' });
    if (probe.error || probe.status !== 0) {
      throw new Error(
        `The Runpod emulator needs util-linux '${tool}' on PATH: install util-linux (apt-get install -y util-linux).`,
      );
    }
  }
}

export async function startEmulator(options: EmulatorOptions = {}): Promise<Emulator> {
  checkPrerequisites();
  const emulator = new EmulatorServer(options);
  await emulator.listen(options.port ?? 0);
  return emulator.api();
}

class EmulatorServer {
  private readonly clock: Clock;
  /** A spent quota window (a `quotaSpent` fault): account calls before its reset answer 429. */
  private quota: { window: 'minute' | 'hour' | 'day'; resetAtMs: number } | null = null;
  private readonly contract = OpenApiContract.load();
  private readonly ledgerBook: Ledger;
  private readonly faultBook = new FaultBook();
  private readonly catalog: CatalogSpec;
  private readonly accountKey: string;
  private readonly stateDir: string;
  private readonly ownsStateDir: boolean;
  private readonly boot: BootDelaysMs;
  private readonly restartOnExit: boolean;
  private readonly maxPageSize: number;
  private readonly probeIntervalMs: number;
  private readonly server: Server;
  private readonly podsById = new Map<string, PodState>();
  private readonly podKeys = new Map<string, string>();
  private readonly secrets = new Map<string, SecretState>();
  private readonly log: RequestLogEntry[] = [];
  private readonly violations: string[] = [];
  private readonly reservedPorts = new Set<number>();
  private readonly hanging = new Set<ServerResponse>();
  /** Each pod's log, as the log stream serves it (see syncPodLog). */
  private readonly logBooks = new Map<
    string,
    { offset: number; partial: string; events: PodLogEvent[] }
  >();
  /** Pods a fault keeps out of the next N pod lists (see `unlistedFor`). */
  private readonly unlisted = new Map<string, number>();
  private readonly launches = new Set<Promise<void>>();
  private readonly sockets = new Set<Socket>();
  private readonly closing = new AbortController();
  private port = 0;
  private seq = 0;
  private unreachableMode: 'refuse' | 'reset' | undefined;
  private unreachableEpisode = 0;
  private closed = false;
  private readonly imageFiles: Record<string, string>;
  private readonly workspaceQuotaBytes: number | null;
  private readonly volumeQuota: { bytesPerGb: number } | null;
  /** Host directories of quota volumes mounted (tmpfs), unmounted by `close()`. */
  private readonly mountedVolumes = new Set<string>();
  private readonly sshRelay: ((podId: string, sshPort: number) => Promise<number>) | null;

  constructor(options: EmulatorOptions) {
    this.clock = options.clock ?? systemClock;
    this.ledgerBook = new Ledger(this.clock);
    this.catalog = options.catalog ?? defaultCatalog();
    this.accountKey = options.apiKey ?? randomApiKey();
    this.ownsStateDir = options.stateDir === undefined;
    this.stateDir = options.stateDir ?? mkdtempSync(join(tmpdir(), 'runpod-emulator-'));
    mkdirSync(join(this.stateDir, 'pods'), { recursive: true });
    mkdirSync(join(this.stateDir, 'logs'), { recursive: true });
    mkdirSync(join(this.stateDir, 'volumes'), { recursive: true });
    mkdirSync(join(this.stateDir, 'runtime'), { recursive: true });
    this.boot = {
      provisioning: options.bootDelaysMs?.provisioning ?? 150,
      starting: options.bootDelaysMs?.starting ?? 150,
      restart: options.bootDelaysMs?.restart ?? 300,
    };
    this.restartOnExit = options.restartOnExit ?? true;
    this.imageFiles = options.imageFiles ?? {};
    this.workspaceQuotaBytes = options.workspaceQuotaBytes ?? null;
    this.volumeQuota = options.volumeQuota ?? null;
    this.sshRelay = options.sshRelay ?? null;
    this.maxPageSize = Math.min(
      options.maxPodsPageSize ?? MAX_PODS_PAGE_LIMIT,
      MAX_PODS_PAGE_LIMIT,
    );
    this.probeIntervalMs = options.sshProbeIntervalMs ?? 50;
    for (const [name, value] of Object.entries(options.secrets ?? {})) this.putSecret(name, value);
    ensureHostMountpoints();
    this.server = createServer((req, res) => {
      this.onRequest(req, res).catch((error: unknown) => {
        this.violations.push(`emulator crashed on ${req.method} ${req.url}: ${String(error)}`);
        if (!res.headersSent) this.write(res, problem(500, 'emulator internal error'));
      });
    });
    this.server.on('connection', (socket: Socket) => {
      if (this.unreachableMode === 'reset') {
        socket.resetAndDestroy();
        return;
      }
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    live.add(this);
    installExitHook();
  }

  listen(port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => {
        this.server.off('error', reject);
        const address = this.server.address();
        if (!address || typeof address === 'string') reject(new Error('emulator has no address'));
        else {
          this.port = address.port;
          resolve();
        }
      });
    });
  }

  api(): Emulator {
    const origin = `http://127.0.0.1:${this.port}`;
    const add = (fault: Fault): Promise<string> => this.addFault(fault);
    const faults: FaultsApi = {
      add,
      clear: () => this.faultBook.clear(),
      pending: () => this.faultBook.pending(),
      failCall: (route, status, opts) =>
        add({
          kind: 'request',
          route,
          nth: opts?.nth,
          times: opts?.times,
          effect: { type: 'status', status, detail: opts?.detail },
        }),
      dropCall: (route, opts) =>
        add({
          kind: 'request',
          route,
          nth: opts?.nth,
          applied: opts?.applied,
          effect: { type: 'drop' },
        }),
      createThenFail: (status = 500) =>
        add({
          kind: 'request',
          route: 'createPod',
          applied: true,
          effect: { type: 'status', status },
        }),
      createThenHang: () =>
        add({ kind: 'request', route: 'createPod', applied: true, effect: { type: 'hang' } }),
      rateLimit: (route, retryAfterS, times = 1) =>
        add({
          kind: 'request',
          route,
          times,
          effect: { type: 'status', status: 429, retryAfterS },
        }),
      transientNotFound: (podId, looks) =>
        add({
          kind: 'request',
          route: 'getPod',
          podId,
          times: looks,
          effect: { type: 'status', status: 404 },
        }),
      setStock: (gpuId, stock, dataCenterId) => add({ kind: 'stock', gpuId, stock, dataCenterId }),
      slowBoot: (delays, pods) => add({ kind: 'slowBoot', ...delays, pods }),
      sshdNeverStarts: (mode, podId) => add({ kind: 'sshd', mode, podId }),
      podDies: (podId) => add({ kind: 'podDies', podId }),
      podCrash: (podId) => add({ kind: 'podCrash', podId }),
      podVanishes: (podId) => add({ kind: 'podVanishes', podId }),
      hostLost: (podId, exitAfterMs) => add({ kind: 'hostLost', podId, exitAfterMs }),
      unreachable: (forMs, mode) => add({ kind: 'unreachable', forMs, mode }),
      reachable: () => this.reachable(),
    };
    return {
      baseUrl: `${origin}/v2`,
      origin,
      apiKey: this.accountKey,
      port: this.port,
      stateDir: this.stateDir,
      catalog: this.catalog,
      ledger: () => this.ledgerBook.snapshot(),
      requests: () => this.log.map((e) => ({ ...e })),
      faults,
      contractViolations: () => [...this.violations],
      pods: () =>
        [...this.podsById.values()].filter((p) => !p.deleted).map((p) => this.internals(p)),
      pod: (id) => {
        const pod = this.podsById.get(id);
        return pod ? this.internals(pod) : undefined;
      },
      podLog: (id) => {
        try {
          return readFileSync(join(this.stateDir, 'logs', `${id}.log`), 'utf8');
        } catch {
          return '';
        }
      },
      setSecret: (name, value) => this.putSecret(name, value),
      close: () => this.close(),
    };
  }

  // ---------------------------------------------------------------- faults

  private async addFault(input: Fault): Promise<string> {
    const fault = parseFault(input);
    switch (fault.kind) {
      case 'request':
        return this.faultBook.addRequestFault(fault);
      case 'stock': {
        const type = this.catalog.gpuTypes.find((t) => t.id === fault.gpuId);
        if (!type) throw new Error(`no GPU type '${fault.gpuId}' in the catalog`);
        if (fault.dataCenterId !== undefined) {
          if (!this.catalog.dataCenters.some((dc) => dc.id === fault.dataCenterId)) {
            throw new Error(`no data center '${fault.dataCenterId}' in the catalog`);
          }
          type.stock[fault.dataCenterId] = fault.stock;
        } else {
          for (const dc of Object.keys(type.stock)) type.stock[dc] = fault.stock;
        }
        return this.faultBook.newId();
      }
      case 'slowBoot':
        return this.faultBook.addSlowBoot(
          { provisioningMs: fault.provisioningMs, startingMs: fault.startingMs },
          fault.pods ?? 1,
        );
      case 'sshd':
        if (fault.podId !== undefined) this.livePod(fault.podId);
        return this.faultBook.addSshd(fault.mode, fault.podId, fault.pods ?? 1);
      case 'podDies': {
        const pod = this.livePod(fault.podId);
        await this.stopContainer(pod);
        this.releaseStock(pod);
        this.setStatus(pod, 'EXITED');
        this.podLogLine(pod, 'the pod died (injected fault): EXITED');
        return this.faultBook.newId();
      }
      case 'podCrash': {
        const pod = this.livePod(fault.podId);
        if (!pod.container) throw new Error(`pod '${pod.id}' has no running container to crash`);
        pod.container.killNow();
        this.podLogLine(pod, "the pod's main process was killed (injected fault)");
        return this.faultBook.newId();
      }
      case 'hostLost': {
        const pod = this.livePod(fault.podId);
        if (!pod.container) throw new Error(`pod '${pod.id}' has no running container to freeze`);
        const frozen = pod.container;
        frozen.freeze();
        this.podLogLine(pod, "the pod's host stopped answering (injected fault)");
        if (fault.exitAfterMs !== undefined) {
          this.clock
            .sleep(fault.exitAfterMs, this.closing.signal)
            .then(async () => {
              // Deleted or restarted meanwhile: that pod is no longer the frozen one.
              if (pod.deleted || pod.container !== frozen) return;
              await this.stopContainer(pod);
              this.releaseStock(pod);
              this.setStatus(pod, 'EXITED');
              this.podLogLine(pod, "the lost host's pod is EXITED (injected fault)");
            })
            .catch(() => undefined);
        }
        return this.faultBook.newId();
      }
      case 'podVanishes': {
        const pod = this.livePod(fault.podId);
        await this.deletePod(pod, 'provider');
        return this.faultBook.newId();
      }
      case 'unreachable': {
        await this.setUnreachable(fault.mode);
        const episode = ++this.unreachableEpisode;
        this.clock
          .sleep(fault.forMs, this.closing.signal)
          // A later unreachable fault (or `reachable()`) owns the outage from then on.
          .then(() => (episode === this.unreachableEpisode ? this.reachable() : undefined))
          .catch(() => undefined);
        return this.faultBook.newId();
      }
    }
  }

  private livePod(id: string): PodState {
    const pod = this.podsById.get(id);
    if (!pod || pod.deleted) throw new Error(`no pod '${id}' (deleted or never created)`);
    return pod;
  }

  private async setUnreachable(mode: 'refuse' | 'reset'): Promise<void> {
    this.unreachableMode = mode;
    for (const res of this.hanging) res.destroy();
    if (mode === 'reset') {
      for (const socket of this.sockets) socket.resetAndDestroy();
      return;
    }
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const socket of this.sockets) socket.destroy();
    });
  }

  private async reachable(): Promise<void> {
    this.unreachableEpisode++;
    const mode = this.unreachableMode;
    this.unreachableMode = undefined;
    if (mode !== 'refuse' || this.closed) return;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.listen(this.port);
        return;
      } catch (error) {
        if (attempt >= 40) {
          this.violations.push(`could not listen on port ${this.port} again: ${String(error)}`);
          return;
        }
        await sleepReal(50);
      }
    }
  }

  // ---------------------------------------------------------------- HTTP

  private write(res: ServerResponse, reply: Reply): void {
    const headers: Record<string, string> = { ...reply.headers };
    let payload: string | undefined;
    if (reply.body !== undefined) {
      payload = JSON.stringify(reply.body);
      headers['content-type'] ??=
        reply.status >= 400 ? 'application/problem+json' : 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    res.writeHead(reply.status, headers);
    res.end(payload);
  }

  private async readBody(req: IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      const buffer = chunk as Buffer;
      size += buffer.length;
      if (size > MAX_BODY_BYTES) throw new Error('too large');
      chunks.push(buffer);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname === '/_emulator' || url.pathname.startsWith('/_emulator/')) {
      await this.admin(req, res, url);
      return;
    }
    const startedMs = this.clock.nowMs();
    const entry: RequestLogEntry = {
      seq: ++this.seq,
      method: req.method ?? 'GET',
      path: url.pathname + url.search,
      route: null,
      status: 0,
      atMs: startedMs,
      durationMs: 0,
      key: 'none',
    };
    this.log.push(entry);
    const finish = (reply: Reply, operationId: string | null): void => {
      entry.status = reply.status;
      entry.durationMs = this.clock.nowMs() - startedMs;
      if (operationId) this.selfCheck(entry, operationId, reply);
      this.write(res, reply);
    };

    let text: string;
    try {
      text = await this.readBody(req);
    } catch {
      finish(problem(413, `request body larger than ${MAX_BODY_BYTES} bytes`), null);
      return;
    }
    const match = this.contract.match(entry.method, url.pathname);
    if (match.kind === 'no-path') {
      finish(problem(404, `no route for ${entry.method} ${url.pathname}`), null);
      return;
    }
    if (match.kind === 'method-not-allowed') {
      finish(
        {
          ...problem(405, 'The requested method is not allowed for this path.'),
          headers: { allow: match.allow.join(', ') },
        },
        null,
      );
      return;
    }
    const operationId = match.operationId;
    entry.route = operationId;

    // Authentication: the account key, or a live pod's own key.
    const header = req.headers.authorization;
    const token = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '')?.[1];
    let caller: { kind: 'account' } | { kind: 'pod'; podId: string };
    if (header === undefined || header === '') {
      finish(problem(401, 'missing bearer token'), operationId);
      return;
    } else if (token === this.accountKey) {
      caller = { kind: 'account' };
      entry.key = 'account';
    } else if (token !== undefined && this.podKeys.has(token)) {
      const podId = this.podKeys.get(token) ?? '';
      caller = { kind: 'pod', podId };
      entry.key = `pod:${podId}`;
    } else {
      entry.key = 'invalid';
      finish(
        problem(401, token ? 'invalid bearer token' : 'malformed Authorization header'),
        operationId,
      );
      return;
    }
    if (caller.kind === 'account' && this.quota !== null) {
      const leftMs = this.quota.resetAtMs - this.clock.nowMs();
      if (leftMs > 0) {
        const reply = problem(429, `rate limit exceeded for the ${this.quota.window} window`);
        reply.headers = {
          'retry-after': String(Math.ceil(leftMs / 1000)),
          ...this.quotaHeaders(),
        };
        finish(reply, operationId);
        return;
      }
      this.quota = null;
    }

    // The body, parsed (validated further down).
    const declared = this.contract.hasRequestBody(operationId);
    let body: unknown;
    if (declared.declared && text.trim() !== '') {
      const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
      if (type !== 'application/json') {
        finish(
          problem(415, `send the body as application/json (got '${type ?? ''}')`),
          operationId,
        );
        return;
      }
      try {
        body = JSON.parse(text);
      } catch {
        finish(problem(400, 'request body is not valid JSON'), operationId);
        return;
      }
    }
    const podId = match.pathParams.id;
    const action = isObject(body) && typeof body.action === 'string' ? body.action : undefined;

    // A pod-scoped key reads, stops and terminates its own pod, and nothing else.
    if (caller.kind === 'pod') {
      const own = podId === caller.podId;
      const allowed =
        own &&
        (operationId === 'getPod' ||
          operationId === 'deletePod' ||
          (operationId === 'podAction' &&
            (action === undefined || action === 'stop' || action === 'terminate')));
      if (!allowed) {
        finish(
          problem(
            403,
            `access denied: a pod-scoped key may only read, stop and terminate its own pod (${caller.podId})`,
          ),
          operationId,
        );
        return;
      }
    }
    if (!IMPLEMENTED.has(operationId)) {
      finish(problem(501, `the Runpod emulator does not implement ${operationId}`), operationId);
      return;
    }

    const gpuId =
      isObject(body) && isObject(body.gpu) && typeof body.gpu.id === 'string'
        ? body.gpu.id
        : undefined;
    const hit = this.faultBook.onCall({
      route: operationId,
      key: caller.kind,
      podId,
      gpuId,
      action,
    });
    if (hit) entry.faultId = hit.faultId;
    if (
      hit &&
      !hit.applied &&
      hit.effect.type !== 'quotaSpent' &&
      hit.effect.type !== 'dropStream'
    ) {
      this.applyEffect(hit, req, res, entry, finish, operationId);
      return;
    }

    const query = this.contract.validateQuery(operationId, url.searchParams);
    if (query.errors.length > 0) {
      finish(problem(422, 'Request validation failed.', query.errors), operationId);
      return;
    }
    if (declared.declared || body !== undefined) {
      const errors = this.contract.validateRequestBodyOf(operationId, body);
      if (errors.length > 0) {
        finish(problem(422, 'Request validation failed.', errors), operationId);
        return;
      }
    }

    if (operationId === 'getPodLogs') {
      const dropAfter = hit?.effect.type === 'dropStream' ? hit.effect.afterEvents : undefined;
      const lastEventId = req.headers['last-event-id'];
      const reply = this.streamPodLogs(
        podId ?? '',
        query.values,
        typeof lastEventId === 'string' ? lastEventId : undefined,
        res,
        dropAfter,
      );
      if (reply) finish(reply, operationId);
      else entry.status = 200;
      return;
    }
    const reply = await this.handle(operationId, match.pathParams, query.values, body, caller);
    if (hit && hit.effect.type === 'quotaSpent' && reply.status < 300) {
      this.quota = {
        window: hit.effect.window ?? 'minute',
        resetAtMs: this.clock.nowMs() + hit.effect.resetS * 1000,
      };
      reply.headers = { ...reply.headers, ...this.quotaHeaders() };
      finish(reply, operationId);
      return;
    }
    if (hit && hit.applied && reply.status < 300) {
      const made = isObject(reply.body) ? reply.body.id : undefined;
      if (hit.unlistedFor !== undefined && typeof made === 'string')
        this.unlisted.set(made, hit.unlistedFor);
      this.applyEffect(hit, req, res, entry, finish, operationId);
      return;
    }
    finish(reply, operationId);
  }

  /** `RateLimit` and `RateLimit-Policy` as Runpod's document shows them, for the spent quota. */
  private quotaHeaders(): Record<string, string> {
    if (this.quota === null) return {};
    const t = Math.max(0, Math.ceil((this.quota.resetAtMs - this.clock.nowMs()) / 1000));
    const windows = { minute: [60, 60], hour: [3000, 3600], day: [50000, 86400] } as const;
    const members = (Object.keys(windows) as (keyof typeof windows)[]).map((w) =>
      w === this.quota?.window
        ? `"${w}";r=0;t=${t}`
        : `"${w}";r=${windows[w][0] - 1};t=${windows[w][1]}`,
    );
    const policy = (Object.keys(windows) as (keyof typeof windows)[]).map(
      (w) => `"${w}";q=${windows[w][0]};w=${windows[w][1]}`,
    );
    return { ratelimit: members.join(', '), 'ratelimit-policy': policy.join(', ') };
  }

  private applyEffect(
    hit: FaultHit,
    req: IncomingMessage,
    res: ServerResponse,
    entry: RequestLogEntry,
    finish: (reply: Reply, operationId: string | null) => void,
    operationId: string,
  ): void {
    const effect: FaultEffect = hit.effect;
    if (effect.type === 'status') {
      const reply = problem(effect.status, effect.detail);
      if (effect.status === 422 && isObject(reply.body)) {
        reply.body.errors = ['$: rejected by an injected fault'];
      }
      if (effect.status === 429) {
        reply.headers = { 'retry-after': String(effect.retryAfterS ?? 1) };
      }
      finish(reply, operationId);
    } else if (effect.type === 'drop') {
      entry.status = 'dropped';
      req.socket.destroy();
    } else {
      entry.status = 'hung';
      this.hanging.add(res);
      res.once('close', () => this.hanging.delete(res));
    }
  }

  private selfCheck(entry: RequestLogEntry, operationId: string, reply: Reply): void {
    const body = reply.body === undefined ? undefined : JSON.parse(JSON.stringify(reply.body));
    const contentType =
      reply.headers?.['content-type'] ??
      (reply.body === undefined
        ? undefined
        : reply.status >= 400
          ? 'application/problem+json'
          : 'application/json');
    const errors = this.contract.validateResponseOf(operationId, {
      status: reply.status,
      contentType,
      retryAfter: reply.headers?.['retry-after'],
      body,
    });
    for (const error of errors) {
      this.violations.push(`${entry.method} ${entry.path} → ${reply.status}: ${error}`);
    }
  }

  private async admin(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const route = `${req.method} ${url.pathname.replace(/\/$/, '')}`;
    let text: string;
    try {
      text = await this.readBody(req);
    } catch {
      this.write(res, problem(413, 'body too large'));
      return;
    }
    try {
      switch (route) {
        case 'GET /_emulator/ledger':
          this.write(res, { status: 200, body: this.ledgerBook.snapshot() });
          return;
        case 'GET /_emulator/requests':
          this.write(res, { status: 200, body: { requests: this.log } });
          return;
        case 'GET /_emulator/violations':
          this.write(res, { status: 200, body: { violations: this.violations } });
          return;
        case 'GET /_emulator/pods':
          this.write(res, {
            status: 200,
            // Without the pod keys: those stay in code (`emulator.pod(id).apiKey`).
            body: {
              pods: [...this.podsById.values()].map((p) => ({
                ...this.internals(p),
                apiKey: undefined,
              })),
            },
          });
          return;
        case 'GET /_emulator/faults':
          this.write(res, { status: 200, body: { faults: this.faultBook.pending() } });
          return;
        case 'DELETE /_emulator/faults':
          this.faultBook.clear();
          this.write(res, { status: 204 });
          return;
        case 'POST /_emulator/faults': {
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            this.write(res, problem(400, 'send a fault (or an array of faults) as JSON'));
            return;
          }
          const list = Array.isArray(parsed) ? parsed : [parsed];
          const ids: string[] = [];
          for (const fault of list) ids.push(await this.addFault(fault as Fault));
          this.write(res, { status: 200, body: { ids } });
          return;
        }
        default:
          this.write(
            res,
            problem(
              404,
              `no admin route ${route}; try GET /_emulator/ledger, /requests, /pods, /violations, GET|POST|DELETE /_emulator/faults`,
            ),
          );
      }
    } catch (error) {
      this.write(res, problem(400, error instanceof Error ? error.message : String(error)));
    }
  }

  // ---------------------------------------------------------------- handlers

  private async handle(
    operationId: string,
    params: Record<string, string>,
    query: Record<string, unknown>,
    body: unknown,
    caller: { kind: 'account' } | { kind: 'pod'; podId: string },
  ): Promise<Reply> {
    const deletedBy: DeletedBy = caller.kind;
    switch (operationId) {
      case 'createPod':
        return this.createPod(body as CreatePodBody);
      case 'listPods':
        return this.listPods(query);
      case 'getPod': {
        const pod = this.podsById.get(params.id ?? '');
        return pod ? { status: 200, body: this.podJson(pod) } : problem(404, 'pod not found');
      }
      case 'deletePod': {
        const pod = this.podsById.get(params.id ?? '');
        if (!pod) return problem(404, 'pod not found');
        await this.deletePod(pod, deletedBy);
        return { status: 204 };
      }
      case 'podAction': {
        const pod = this.podsById.get(params.id ?? '');
        if (!pod) return problem(404, 'pod not found');
        return this.podAction(pod, String((body as { action: string }).action), deletedBy);
      }
      case 'listGpuTypes':
        return this.listGpuTypes(query);
      case 'listDataCenters':
        return this.listDataCenters(query);
      case 'listNetworkVolumes':
        return {
          status: 200,
          body: { networkVolumes: this.catalog.networkVolumes.map((v) => volumeJson(v)) },
        };
      case 'getNetworkVolume': {
        const volume = this.catalog.networkVolumes.find((v) => v.id === params.id);
        return volume
          ? { status: 200, body: volumeJson(volume) }
          : problem(404, 'network volume not found');
      }
      case 'updateNetworkVolume':
        return this.updateNetworkVolume(params.id ?? '', body as { size?: number; name?: string });
      case 'listTemplates':
        return { status: 200, body: { templates: this.catalog.templates } };
      case 'listSecrets': {
        const name = query.name;
        const list = [...this.secrets.values()].filter(
          (s) => name === undefined || s.name === name,
        );
        return { status: 200, body: { secrets: list.map((s) => this.secretJson(s)) } };
      }
      case 'createSecret': {
        const b = body as { name: string; value: string; description?: string };
        if ([...this.secrets.values()].some((s) => s.name === b.name)) {
          return problem(
            409,
            `a secret named '${b.name}' exists: update it with PATCH /v2/account/secrets/{id}`,
          );
        }
        const secret = this.putSecret(b.name, b.value, b.description);
        return { status: 201, body: this.secretJson(secret) };
      }
      case 'updateSecret': {
        const secret = this.secrets.get(params.id ?? '');
        if (!secret) return problem(404, 'secret not found');
        const b = body as { value?: string; description?: string };
        if (b.value !== undefined) secret.value = b.value;
        if (b.description !== undefined) secret.description = b.description;
        secret.updatedAtMs = this.clock.nowMs();
        return { status: 200, body: this.secretJson(secret) };
      }
      case 'deleteSecret': {
        if (!this.secrets.delete(params.id ?? '')) return problem(404, 'secret not found');
        return { status: 204 };
      }
      case 'listPodBilling':
        return this.listPodBilling(query);
      default:
        return problem(501, `the Runpod emulator does not implement ${operationId}`);
    }
  }

  private putSecret(name: string, value: string, description?: string): SecretState {
    const existing = [...this.secrets.values()].find((s) => s.name === name);
    const nowMs = this.clock.nowMs();
    if (existing) {
      existing.value = value;
      existing.updatedAtMs = nowMs;
      return existing;
    }
    const secret: SecretState = {
      id: randomId(12),
      name,
      value,
      description: description ?? null,
      createdAtMs: nowMs,
      updatedAtMs: nowMs,
    };
    this.secrets.set(secret.id, secret);
    return secret;
  }

  private secretJson(s: SecretState): JsonObject {
    return {
      id: s.id,
      name: s.name,
      description: s.description,
      createdAt: rfc3339(s.createdAtMs),
      updatedAt: rfc3339(s.updatedAtMs),
    };
  }

  private listPods(query: Record<string, unknown>): Reply {
    const firstPage = typeof query.cursor !== 'string';
    const all = [...this.podsById.values()]
      .filter((p) => !p.deleted)
      .filter((p) => {
        const hidden = this.unlisted.get(p.id);
        if (hidden === undefined) return true;
        if (firstPage) {
          if (hidden <= 1) this.unlisted.delete(p.id);
          else this.unlisted.set(p.id, hidden - 1);
        }
        return false;
      })
      .sort((a, b) => a.createdAtMs - b.createdAtMs || a.id.localeCompare(b.id));
    const limit = Math.min(
      typeof query.limit === 'number' ? query.limit : this.maxPageSize,
      this.maxPageSize,
    );
    let start = 0;
    if (typeof query.cursor === 'string') {
      const decoded = Buffer.from(query.cursor, 'base64url').toString('utf8');
      const m = /^(\d+):([a-z0-9]+)$/.exec(decoded);
      if (!m)
        return problem(400, 'invalid cursor: pass pagination.nextCursor of the previous page');
      const afterMs = Number(m[1]);
      const afterId = m[2] ?? '';
      start = all.findIndex(
        (p) => p.createdAtMs > afterMs || (p.createdAtMs === afterMs && p.id > afterId),
      );
      if (start < 0) start = all.length;
    }
    const page = all.slice(start, start + limit);
    const last = page[page.length - 1];
    const hasNextPage = start + limit < all.length;
    return {
      status: 200,
      body: {
        pods: page.map((p) => this.podJson(p)),
        pagination: {
          hasNextPage,
          nextCursor:
            hasNextPage && last
              ? Buffer.from(`${last.createdAtMs}:${last.id}`).toString('base64url')
              : null,
        },
      },
    };
  }

  private dcName(id: string): string {
    return this.catalog.dataCenters.find((dc) => dc.id === id)?.name ?? id;
  }

  /**
   * `GET /v2/billing/pods` from the ledger: one record per pod per bucket it existed in, the
   * amounts it was charged in that bucket (GPU rate while running, disks while stopped). The
   * window is snapped to bucket boundaries (start down, end up) as the document says; `lastN`
   * is the last N buckets ending with the current one and excludes startTime/endTime.
   */
  private listPodBilling(query: Record<string, unknown>): Reply {
    const bucketSize = (query.bucketSize as BucketSize | undefined) ?? 'day';
    const lastN = query.lastN as number | undefined;
    const nowMs = this.clock.nowMs();
    if (lastN !== undefined && (query.startTime !== undefined || query.endTime !== undefined)) {
      return problem(
        400,
        'lastN is mutually exclusive with startTime/endTime: give one or the other',
      );
    }
    let startMs: number;
    let endMs: number;
    if (lastN !== undefined) {
      endMs = bucketStart(nowMs, bucketSize, 1);
      startMs = bucketStart(nowMs, bucketSize, 1 - lastN);
    } else {
      const rawStart = query.startTime as string | undefined;
      const rawEnd = query.endTime as string | undefined;
      const from = rawStart === undefined ? nowMs - 30 * 86_400_000 : Date.parse(rawStart);
      const to = rawEnd === undefined ? nowMs : Date.parse(rawEnd);
      if (Number.isNaN(from) || Number.isNaN(to))
        return problem(400, 'startTime/endTime must be RFC 3339');
      startMs = bucketStart(from, bucketSize, 0);
      const endBucket = bucketStart(to, bucketSize, 0);
      endMs = endBucket === to ? to : bucketStart(to, bucketSize, 1);
      if (endMs <= startMs) return problem(400, 'endTime must be after startTime');
    }
    const podId = query.podId as string | undefined;
    const ids = this.ledgerBook.ids().filter((id) => podId === undefined || id === podId);
    const records: JsonObject[] = [];
    const totals = { totalAmount: 0, gpuAmount: 0, cpuAmount: 0, diskAmount: 0 };
    const pods = new Set<string>();
    for (let b = startMs; b < endMs; b = bucketStart(b, bucketSize, 1)) {
      const bEnd = bucketStart(b, bucketSize, 1);
      for (const id of ids) {
        const charged = this.ledgerBook.chargedBetween(id, b, bEnd);
        if (charged === null) continue;
        const gpu = roundUsd(charged.gpuUsd);
        const disk = roundUsd(charged.diskUsd);
        const total = roundUsd(charged.gpuUsd + charged.diskUsd);
        records.push({
          startTime: new Date(b).toISOString(),
          endTime: new Date(bEnd).toISOString(),
          podId: id,
          totalAmount: total,
          gpuAmount: gpu,
          cpuAmount: 0,
          diskAmount: disk,
        });
        totals.totalAmount += charged.gpuUsd + charged.diskUsd;
        totals.gpuAmount += charged.gpuUsd;
        totals.diskAmount += charged.diskUsd;
        pods.add(id);
      }
    }
    return {
      status: 200,
      body: {
        records,
        metadata: {
          query: {
            startTime: new Date(startMs).toISOString(),
            endTime: new Date(endMs).toISOString(),
            bucketSize,
            podId: podId ?? null,
          },
          recordCount: records.length,
          uniquePodCount: pods.size,
          totals: {
            totalAmount: roundUsd(totals.totalAmount),
            gpuAmount: roundUsd(totals.gpuAmount),
            cpuAmount: 0,
            diskAmount: roundUsd(totals.diskAmount),
          },
        },
      },
    };
  }

  private listGpuTypes(query: Record<string, unknown>): Reply {
    const include = query.include as string[] | undefined;
    const withAvailability = include?.includes('AVAILABILITY') ?? false;
    const product = query.product as string[] | undefined;
    if (withAvailability && !product) {
      return problem(
        400,
        'product is required with include=AVAILABILITY (for example product=POD)',
      );
    }
    for (const name of [
      'product',
      'count',
      'cloud',
      'countryCodes',
      'cudaVersions',
      'minCudaVersion',
    ]) {
      if (query[name] !== undefined && !withAvailability) {
        return problem(400, `${name} is valid only with include=AVAILABILITY`);
      }
    }
    if (query.cudaVersions !== undefined && query.minCudaVersion !== undefined) {
      return problem(400, 'cudaVersions and minCudaVersion are mutually exclusive');
    }
    const count = typeof query.count === 'number' ? query.count : 1;
    const cloud = (query.cloud as CloudType | undefined) ?? 'SECURE';
    const countries = query.countryCodes as string[] | undefined;
    const exact = query.cudaVersions as string[] | undefined;
    const floor = query.minCudaVersion as string | undefined;
    const gpus: JsonObject[] = [];
    for (const type of this.catalog.gpuTypes) {
      const gpu: JsonObject = {
        id: type.id,
        name: type.name,
        pool: type.pool,
        manufacturer: type.manufacturer,
        memory: type.memoryGb,
        secure: type.secure,
        community: type.community,
        price: {
          secure: type.priceSecureUsdPerHour,
          community: type.priceCommunityUsdPerHour,
        },
        maxCount: { secure: type.maxCount.secure, community: type.maxCount.community },
      };
      if (withAvailability) {
        const dcs = Object.entries(type.stock).filter(([dc]) => {
          const code = this.catalog.dataCenters.find((d) => d.id === dc)?.countryCode;
          return !countries || (code !== undefined && countries.includes(code));
        });
        if (countries && dcs.length === 0) continue;
        const offered =
          (cloud === 'SECURE' ? type.secure : type.community) &&
          count <= (cloud === 'SECURE' ? type.maxCount.secure : type.maxCount.community);
        const versions = type.cudaVersions
          .filter((v) => (exact ? exact.includes(v) : floor ? cudaAtLeast(v, floor) : true))
          .sort(compareCuda);
        const levels = dcs.map(([dc, free]) => ({
          id: dc,
          name: this.dcName(dc),
          availability: (offered && versions.length > 0
            ? availabilityLevel(free, count)
            : 'NONE') as AvailabilityLevel,
        }));
        const overall = bestLevel(levels.map((l) => l.availability));
        gpu.availability = overall;
        if (overall !== 'NONE') gpu.dataCenters = levels;
        if (versions.length > 0) {
          const anyFree = offered && dcs.some(([, free]) => free >= count);
          gpu.cudaVersions = versions.map((version) => ({ version, available: anyFree }));
        }
      }
      gpus.push(gpu);
    }
    return { status: 200, body: { gpus } };
  }

  private listDataCenters(query: Record<string, unknown>): Reply {
    const include = (query.include as string[] | undefined) ?? [];
    const regions = query.regions as string[] | undefined;
    const volumeTypes = query.networkVolumeTypes as string[] | undefined;
    const compliance = query.compliance as string[] | undefined;
    const globalNetwork = query.globalNetwork as boolean | undefined;
    const dataCenters: JsonObject[] = [];
    for (const dc of this.catalog.dataCenters) {
      if (regions && !regions.includes(dc.region)) continue;
      if (volumeTypes && !volumeTypes.every((t) => dc.networkVolumeTypes.includes(t as never)))
        continue;
      if (compliance && !compliance.every((c) => dc.compliance.includes(c))) continue;
      if (globalNetwork !== undefined && dc.globalNetwork !== globalNetwork) continue;
      const out: JsonObject = {
        id: dc.id,
        name: dc.name,
        region: dc.region,
        globalNetwork: dc.globalNetwork,
        networkVolumeTypes: [...dc.networkVolumeTypes],
        compliance: [...dc.compliance],
      };
      if (include.includes('GPU_AVAILABILITY')) {
        const offered = this.catalog.gpuTypes.filter((t) => dc.id in t.stock);
        if (offered.length > 0) {
          out.gpuAvailability = offered.map((t) => ({
            id: t.id,
            name: t.name,
            availability: availabilityLevel(t.stock[dc.id] ?? 0, 1),
          }));
        }
      }
      // CPU_AVAILABILITY: this emulator offers no CPU flavors, so the array is omitted.
      dataCenters.push(out);
    }
    return { status: 200, body: { dataCenters } };
  }

  // ---------------------------------------------------------------- pods

  private async createPod(body: CreatePodBody): Promise<Reply> {
    // Rules of the document that JSON Schema cannot state answer 400, as Runpod's handler does.
    if (body.gpu && body.cpu) return problem(400, 'set exactly one of gpu or cpu, not both');
    if (body.cpu) return problem(400, 'the Runpod emulator offers GPU pods only: set gpu, not cpu');
    if (!body.gpu) return problem(400, 'set exactly one of gpu or cpu');
    let template: CatalogSpec['templates'][number] | undefined;
    if (body.templateId !== undefined) {
      template = this.catalog.templates.find((t) => t.id === body.templateId);
      if (!template) return problem(404, `template '${body.templateId}' not found`);
      if (template.serverless) {
        return problem(422, 'Request validation failed.', [
          `$.templateId: template '${template.id}' is a serverless template`,
        ]);
      }
    }
    const image = body.image ?? template?.image ?? '';
    const args = body.args ?? template?.args ?? '';
    const disk = body.disk ?? template?.disk ?? 50;
    const ports = body.ports ?? template?.ports ?? [];
    const env: Record<string, string> = { ...(template?.env ?? {}), ...(body.env ?? {}) };
    const mounts: CreatePodBody['mounts'] =
      body.mounts ??
      (template?.mounts.persistent ? { persistent: template.mounts.persistent } : {});
    const gpu = body.gpu;
    const cudaSent = gpu.allowedCudaVersions !== undefined || gpu.minCudaVersion !== undefined;
    const allowedCuda = cudaSent
      ? (gpu.allowedCudaVersions ?? [])
      : (template?.allowedCudaVersions ?? []);
    if (allowedCuda.length > 0 && gpu.minCudaVersion !== undefined) {
      return problem(400, 'gpu.allowedCudaVersions and gpu.minCudaVersion are mutually exclusive');
    }
    if (mounts?.persistent && mounts.network && mounts.network.length > 0) {
      return problem(400, 'mounts.persistent and mounts.network are mutually exclusive');
    }
    const seenPorts = new Set<string>();
    for (const port of ports) {
      const m = /^(\d{1,5})\/(tcp|http)$/.exec(port);
      if (!m || Number(m[1]) < 1 || Number(m[1]) > 65535) {
        return problem(400, `invalid port '${port}': use <port>/tcp or <port>/http`);
      }
      if (seenPorts.has(m[1] ?? '')) return problem(400, `port ${m[1]} is listed twice`);
      seenPorts.add(m[1] ?? '');
    }
    if (body.globalNetworking === true) {
      return problem(400, 'global networking is not offered by the Runpod emulator');
    }
    if (typeof body.registry === 'string') {
      return problem(400, `container registry credential '${body.registry}' not found`);
    }
    for (const [name, value] of Object.entries(env)) {
      for (const ref of value.matchAll(SECRET_REF)) {
        if (![...this.secrets.values()].some((s) => s.name === ref[1])) {
          return problem(
            400,
            `env ${name} references secret '${ref[1]}', which does not exist: create it with POST /v2/account/secrets`,
          );
        }
      }
    }
    if (body.startJupyter === true && env.JUPYTER_PASSWORD === undefined) {
      env.JUPYTER_PASSWORD = randomId(16);
    }
    const type = this.catalog.gpuTypes.find((t) => t.id === gpu.id);
    if (!type) return problem(400, `GPU type '${gpu.id}' does not exist: see GET /v2/catalog/gpus`);
    const count = gpu.count ?? 1;
    const cloud: CloudType = body.cloud ?? 'SECURE';
    const maxCount = cloud === 'SECURE' ? type.maxCount.secure : type.maxCount.community;
    if (maxCount > 0 && count > maxCount) {
      return problem(
        400,
        `at most ${maxCount} GPUs of type '${type.id}' fit one pod in the ${cloud} cloud`,
      );
    }
    const requested = body.dataCenterIds ?? [];
    for (const dc of requested) {
      if (!this.catalog.dataCenters.some((d) => d.id === dc)) {
        return problem(400, `unknown data center '${dc}': see GET /v2/catalog/datacenters`);
      }
    }
    let candidates =
      requested.length > 0
        ? [...requested]
        : Object.keys(type.stock).sort((a, b) => (type.stock[b] ?? 0) - (type.stock[a] ?? 0));
    let networkMountTarget: { volumeId: string; path: string } | undefined;
    const network = mounts?.network?.[0];
    if (network) {
      const volume = this.catalog.networkVolumes.find((v) => v.id === network.volumeId);
      if (!volume) return problem(400, `network volume '${network.volumeId}' not found`);
      if (requested.length > 0 && !requested.includes(volume.dataCenterId)) {
        return problem(
          400,
          `network volume '${volume.id}' is in ${volume.dataCenterId}, which dataCenterIds does not allow`,
        );
      }
      candidates = [volume.dataCenterId];
      networkMountTarget = network;
      const source = join(this.stateDir, 'volumes', volume.id);
      mkdirSync(source, { recursive: true, mode: 0o755 });
      const quota = this.mountVolumeQuota(volume.id, source);
      if (quota !== null) return problem(500, quota);
    }
    const versions = type.cudaVersions
      .filter((v) => (allowedCuda.length > 0 ? allowedCuda.includes(v) : true))
      .filter((v) => (gpu.minCudaVersion ? cudaAtLeast(v, gpu.minCudaVersion) : true))
      .sort(compareCuda);
    const cloudOffered = cloud === 'SECURE' ? type.secure : type.community;
    const dataCenterId = candidates.find((dc) => (type.stock[dc] ?? 0) >= count);
    const cudaVersion = versions[versions.length - 1];
    if (!cloudOffered || maxCount === 0 || !cudaVersion || dataCenterId === undefined) {
      return problem(400, NO_CAPACITY_DETAIL);
    }

    // Placed: the pod exists and bills from now on.
    type.stock[dataCenterId] = (type.stock[dataCenterId] ?? 0) - count;
    const id = this.newPodId();
    const root = join(this.stateDir, 'pods', id);
    const dirs: PodDirs = {
      root,
      workspace: join(root, 'container', 'workspace'),
      etcOverbrainer: join(root, 'container', 'etc-overbrainer'),
      etcSsh: join(root, 'container', 'etc-ssh'),
      rootHome: join(root, 'container', 'root-home'),
      rootSsh: join(root, 'container', 'root-ssh'),
      volume: mounts?.persistent ? join(root, 'volume') : null,
      log: join(this.stateDir, 'logs', `${id}.log`),
    };
    if (dirs.volume) mkdirSync(dirs.volume, { recursive: true, mode: 0o755 });
    const runtimeDir = join(this.stateDir, 'runtime', id);
    mkdirSync(runtimeDir, { recursive: true, mode: 0o700 });
    let networkMount: BindMount | undefined;
    if (networkMountTarget) {
      const source = join(this.stateDir, 'volumes', networkMountTarget.volumeId);
      mkdirSync(source, { recursive: true, mode: 0o755 });
      networkMount = { source, target: networkMountTarget.path };
    }
    const apiKey = randomApiKey();
    const gpuUsdPerHour = round6(gpuPriceUsdPerHour(type, cloud) * count);
    const pod: PodState = {
      id,
      name: body.name,
      apiKey,
      image,
      args,
      disk,
      ports: [...ports],
      env,
      cmd: body.cmd ?? (args.trim() !== '' ? ['bash', '-c', args] : ['sleep', 'infinity']),
      mounts: (mounts ?? {}) as JsonObject,
      gpuType: type,
      gpuCount: count,
      cloud,
      dataCenterId,
      cudaVersion,
      gpuUsdPerHour,
      createdAtMs: this.clock.nowMs(),
      startedAtMs: null,
      status: 'PROVISIONING',
      gen: 0,
      abort: new AbortController(),
      container: undefined,
      containerStarts: 0,
      containerStartedAtMs: 0,
      quickExits: 0,
      sshPort: null,
      publishedPort: null,
      bannerSeen: false,
      published: false,
      silentServer: undefined,
      silentSockets: new Set(),
      sshdFault: this.faultBook.takeSshdForCreate(),
      holdsStock: true,
      deleted: false,
      dirs,
      runtimeDir,
      networkMount,
      persistentMount:
        dirs.volume && mounts?.persistent
          ? { source: dirs.volume, target: mounts.persistent.path }
          : undefined,
    };
    this.resetContainerDisk(pod);
    writeFileSync(dirs.log, '');
    this.podsById.set(id, pod);
    this.podKeys.set(apiKey, id);
    this.ledgerBook.open(
      {
        id,
        name: pod.name,
        runId: env.OVERBRAINER_RUN_ID ?? null,
        gpuTypeId: type.id,
        gpuCount: count,
        dataCenterId,
        cloud,
        gpuUsdPerHour,
        diskGb: disk + (mounts?.persistent?.size ?? 0),
        diskUsdPerGbMonth: this.catalog.stoppedDiskUsdPerGbMonth,
      },
      'PROVISIONING',
    );
    // PROVISIONING (the image pull) → STARTING → RUNNING.
    const slow = this.faultBook.takeSlowBoot();
    this.launch(
      pod,
      pod.gen,
      slow?.provisioningMs ?? this.boot.provisioning,
      slow?.startingMs ?? this.boot.starting,
    );
    return { status: 201, body: this.podJson(pod) };
  }

  private newPodId(): string {
    for (;;) {
      const id = randomId(14);
      if (!this.podsById.has(id) && !this.ledgerBook.entry(id)) return id;
    }
  }

  /** The container disk as the image has it: empty dirs, the image's /etc/ssh. */
  private resetContainerDisk(pod: PodState): void {
    rmSync(join(pod.dirs.root, 'container'), { recursive: true, force: true });
    mkdirSync(pod.dirs.workspace, { recursive: true, mode: 0o755 });
    mkdirSync(pod.dirs.etcOverbrainer, { recursive: true, mode: 0o755 });
    mkdirSync(pod.dirs.etcSsh, { recursive: true, mode: 0o755 });
    mkdirSync(pod.dirs.rootSsh, { recursive: true, mode: 0o700 });
    mkdirSync(join(pod.dirs.rootHome, '.ssh'), { recursive: true, mode: 0o700 });
    for (const file of ['moduli', 'ssh_config']) {
      if (existsSync(join('/etc/ssh', file)))
        copyFileSync(join('/etc/ssh', file), join(pod.dirs.etcSsh, file));
    }
    for (const [rel, content] of Object.entries(this.imageFiles)) {
      const file = join(pod.dirs.workspace, rel);
      if (!file.startsWith(pod.dirs.workspace + '/'))
        throw new Error(`image file outside /workspace: ${rel}`);
      mkdirSync(dirname(file), { recursive: true, mode: 0o755 });
      writeFileSync(file, content, { mode: 0o755 });
    }
  }

  /**
   * The pod's log as Runpod's log stream serves it: every complete line of the pod's real output
   * (the emulator's own `runpod-emulator:` lines are the `system` source; bootstrap, sshd and
   * watchdog output the `container` source), stamped with the clock when first read, numbered.
   */
  private syncPodLog(pod: PodState): PodLogEvent[] {
    let book = this.logBooks.get(pod.id);
    if (!book) {
      book = { offset: 0, partial: '', events: [] };
      this.logBooks.set(pod.id, book);
    }
    let chunk: Buffer;
    try {
      const all = readFileSync(pod.dirs.log);
      chunk = all.subarray(book.offset);
      book.offset = all.length;
    } catch {
      return book.events;
    }
    const text = book.partial + chunk.toString('utf8');
    const lines = text.split('\n');
    book.partial = lines.pop() ?? '';
    const ts = rfc3339(this.clock.nowMs());
    for (const raw of lines) {
      const system = raw.startsWith('runpod-emulator: ');
      const line = system ? raw.slice('runpod-emulator: '.length) : raw;
      const seq = book.events.length + 1;
      book.events.push({
        id: `${ts}/${String(seq).padStart(12, '0')}`,
        ts,
        source: system ? 'system' : 'container',
        line,
      });
    }
    return book.events;
  }

  /**
   * `GET /v2/pods/{id}/logs`: Server-Sent Events, each an `id:` (`<ts>/<seq>`) and a JSON `data:`
   * line ({ts, source, line}). The backfill is `Last-Event-ID` (the events after it; an id this
   * pod never sent is refused with a 400), else `since` (the events at or after it), else the
   * last `tail` (default 100, at most 5000); then live lines until the pod is deleted. Returns
   * an answer for an error, undefined once the stream is served.
   */
  private streamPodLogs(
    podId: string,
    query: Record<string, unknown>,
    lastEventId: string | undefined,
    res: ServerResponse,
    dropAfter: number | undefined,
  ): Reply | undefined {
    const pod = this.podsById.get(podId);
    if (!pod || pod.deleted) return problem(404, `pod ${podId} not found`);
    const source = typeof query.source === 'string' ? query.source : undefined;
    const wanted = (e: PodLogEvent): boolean => source === undefined || e.source === source;
    const events = this.syncPodLog(pod);
    let next: number;
    if (lastEventId !== undefined) {
      const m = /^(.+)\/(\d{12})$/.exec(lastEventId);
      const seq = m ? Number(m[2]) : NaN;
      const known = events[seq - 1];
      if (!m || !known || known.id !== lastEventId)
        return problem(
          400,
          `Last-Event-ID '${lastEventId.slice(0, 80)}' is not a cursor of this stream`,
        );
      next = seq;
    } else if (typeof query.since === 'string') {
      const sinceMs = Date.parse(query.since);
      if (!Number.isFinite(sinceMs)) return problem(400, 'since is not an RFC3339 time');
      next = events.findIndex((e) => Date.parse(e.ts) >= sinceMs);
      if (next < 0) next = events.length;
    } else {
      const tail = typeof query.tail === 'number' ? query.tail : 100;
      const matching = events.map((e, i) => [e, i] as const).filter(([e]) => wanted(e));
      next =
        tail === 0
          ? events.length
          : (matching[Math.max(0, matching.length - tail)]?.[1] ?? events.length);
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    let sent = 0;
    let done = false;
    const pump = (): void => {
      if (done) return;
      const all = this.syncPodLog(pod);
      for (; next < all.length; next++) {
        const e = all[next]!;
        if (!wanted(e)) continue;
        const event = `id: ${e.id}\ndata: ${JSON.stringify({ ts: e.ts, source: e.source, line: e.line })}\n\n`;
        sent++;
        if (dropAfter !== undefined && sent >= dropAfter) {
          // The events so far reach the client; then the connection breaks.
          next++;
          stop();
          res.write(event, () => res.socket?.destroy());
          return;
        }
        res.write(event);
      }
      if (pod.deleted || this.closed) {
        stop();
        res.end();
      }
    };
    const timer = setInterval(pump, 50);
    const stop = (): void => {
      done = true;
      clearInterval(timer);
      this.hanging.delete(res);
    };
    this.hanging.add(res);
    res.once('close', stop);
    pump();
    return undefined;
  }

  private podLogLine(pod: PodState, line: string): void {
    try {
      writeFileSync(pod.dirs.log, `runpod-emulator: ${line}\n`, { flag: 'a' });
    } catch {
      // the state dir is gone (closing): nothing to record
    }
  }

  private setStatus(pod: PodState, status: PodStatus): void {
    pod.status = status;
    if (status !== 'RUNNING') pod.published = false;
    this.ledgerBook.status(pod.id, status);
  }

  private stale(pod: PodState, gen: number): boolean {
    return this.closed || pod.deleted || pod.gen !== gen;
  }

  private bumpGen(pod: PodState): number {
    pod.abort.abort();
    pod.abort = new AbortController();
    pod.gen++;
    return pod.gen;
  }

  private async delay(pod: PodState, ms: number): Promise<void> {
    if (ms > 0) await this.clock.sleep(ms, pod.abort.signal);
  }

  /**
   * Waits `beforeMs`, starts the container (STARTING), and after `startingMs` marks the pod
   * RUNNING. A container that cannot start leaves the pod in ERROR. Tracked, so `close()` can
   * wait for a start in flight and kill what it started.
   */
  private launch(pod: PodState, gen: number, beforeMs: number, startingMs: number): void {
    const run = async (): Promise<void> => {
      try {
        await this.delay(pod, beforeMs);
        if (this.stale(pod, gen)) return;
        await this.startContainer(pod, gen);
        await this.delay(pod, startingMs);
        if (this.stale(pod, gen) || pod.status !== 'STARTING') return;
        pod.startedAtMs = this.clock.nowMs();
        this.setStatus(pod, 'RUNNING');
        this.maybePublish(pod);
      } catch (error) {
        if (isAbortError(error) || this.stale(pod, gen)) return;
        this.podLogLine(pod, `container failed to start: ${String(error)}`);
        this.dropContainer(pod);
        this.setStatus(pod, 'ERROR');
        this.releaseStock(pod);
      }
    };
    const launched = run();
    this.launches.add(launched);
    void launched.finally(() => this.launches.delete(launched));
  }

  private has22(pod: PodState): boolean {
    return pod.ports.includes('22/tcp');
  }

  private async startContainer(pod: PodState, gen: number): Promise<void> {
    const mode = this.faultBook.sshdForPod(pod.id) ?? pod.sshdFault;
    const sshPort = await freePort(this.reservedPorts);
    this.reservedPorts.add(sshPort);
    let publishedPort = sshPort;
    if (mode === 'closed' || mode === 'silent') {
      publishedPort = await freePort(this.reservedPorts);
      this.reservedPorts.add(publishedPort);
    } else if (this.sshRelay !== null) {
      publishedPort = await this.sshRelay(pod.id, sshPort);
    }
    if (this.stale(pod, gen)) {
      this.reservedPorts.delete(sshPort);
      this.reservedPorts.delete(publishedPort);
      return;
    }
    pod.sshPort = sshPort;
    pod.publishedPort = publishedPort;
    pod.bannerSeen = false;
    if (mode === 'silent') {
      // The port answers TCP and never says a word: no SSH banner, ever.
      const server = createTcpServer((socket) => {
        pod.silentSockets.add(socket);
        socket.on('error', () => undefined);
        socket.once('close', () => pod.silentSockets.delete(socket));
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(publishedPort, '127.0.0.1', () => resolve());
      });
      pod.silentServer = server;
    }
    writeFileSync(join(pod.dirs.etcSsh, 'sshd_config'), sshdConfig(sshPort), { mode: 0o644 });
    const mounts: BindMount[] = [
      { source: pod.dirs.workspace, target: POD_PATHS.workspace },
      { source: pod.dirs.etcOverbrainer, target: POD_PATHS.etcOverbrainer },
      { source: pod.dirs.etcSsh, target: POD_PATHS.etcSsh },
      { source: pod.dirs.rootHome, target: POD_PATHS.rootHome },
      { source: pod.dirs.rootSsh, target: POD_PATHS.rootSsh },
    ];
    if (pod.persistentMount) mounts.push(pod.persistentMount);
    if (pod.networkMount) mounts.push(pod.networkMount);
    const initPath = join(pod.runtimeDir, 'init.sh');
    const tmpfs =
      this.workspaceQuotaBytes === null
        ? []
        : [{ target: `${POD_PATHS.workspace}/overbrainer`, sizeBytes: this.workspaceQuotaBytes }];
    writeFileSync(initPath, initScript(mounts, tmpfs), { mode: 0o700 });
    pod.containerStarts++;
    pod.containerStartedAtMs = this.clock.nowMs();
    this.podLogLine(pod, `container start #${pod.containerStarts} (sshd port ${sshPort})`);
    const container = await Container.start({
      cmd: pod.cmd,
      env: this.podEnv(pod, publishedPort),
      mounts,
      initScriptPath: initPath,
      logPath: pod.dirs.log,
    });
    if (this.stale(pod, gen)) {
      await container.kill();
      return;
    }
    pod.container = container;
    if (pod.status === 'PROVISIONING') this.setStatus(pod, 'STARTING');
    void container.exited.then((exit) => this.onContainerExit(pod, gen, exit));
    void this.probe(pod, gen, mode);
  }

  private podEnv(pod: PodState, publishedPort: number): Record<string, string> {
    const resolved: Record<string, string> = {};
    for (const [name, value] of Object.entries(pod.env)) {
      resolved[name] = value.replace(SECRET_REF, (_all, secret: string) => {
        const found = [...this.secrets.values()].find((s) => s.name === secret);
        if (!found) this.podLogLine(pod, `env ${name}: secret '${secret}' no longer exists`);
        return found?.value ?? '';
      });
    }
    return {
      // The image's environment: a plain system PATH, as a container image sets it (the host's
      // PATH may point into the host's home, which the pod does not see).
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: '/root',
      ...resolved,
      // Runpod's own variables win over the request's.
      RUNPOD_POD_ID: pod.id,
      RUNPOD_API_KEY: pod.apiKey,
      RUNPOD_PUBLIC_IP: '127.0.0.1',
      ...(this.has22(pod) ? { RUNPOD_TCP_PORT_22: String(publishedPort) } : {}),
      RUNPOD_GPU_COUNT: String(pod.gpuCount),
      RUNPOD_DC_ID: pod.dataCenterId,
    };
  }

  /** Publishes ssh.direct once the pod's sshd answers with a banner (real-time polling). */
  private async probe(pod: PodState, gen: number, mode: SshdFaultMode | undefined): Promise<void> {
    if (mode === 'unpublished') return;
    if (mode === 'closed' || mode === 'silent') {
      pod.bannerSeen = true; // published as soon as RUNNING, yet nothing SSH answers there
      this.maybePublish(pod);
      return;
    }
    const startedMs = Date.now();
    while (!this.stale(pod, gen)) {
      const port = pod.publishedPort;
      if (port !== null && (await probeSshBanner(port, 1000))) {
        if (this.stale(pod, gen)) return;
        pod.bannerSeen = true;
        this.maybePublish(pod);
        return;
      }
      // Quick at first (sshd usually answers within a second), then gentler on the machine.
      await sleepReal(
        Date.now() - startedMs < 2000 ? this.probeIntervalMs : this.probeIntervalMs * 4,
      );
    }
  }

  private maybePublish(pod: PodState): void {
    if (pod.status === 'RUNNING' && pod.bannerSeen && this.has22(pod)) pod.published = true;
  }

  private onContainerExit(
    pod: PodState,
    gen: number,
    exit: { code: number | null; signal: string | null },
  ): void {
    if (this.stale(pod, gen)) return; // we stopped it ourselves
    this.podLogLine(
      pod,
      `container exited (code ${exit.code ?? 'none'}, signal ${exit.signal ?? 'none'})`,
    );
    this.dropContainer(pod);
    const next = this.bumpGen(pod);
    if (exit.code === 125) {
      this.setStatus(pod, 'ERROR');
      this.releaseStock(pod);
      return;
    }
    if (!this.restartOnExit) {
      this.setStatus(pod, 'EXITED');
      this.releaseStock(pod);
      return;
    }
    // Runpod restarts a container whose command ended: same disk, a new port. A command that
    // keeps ending within seconds is restarted ever more slowly (up to 64 × the restart delay).
    const livedMs = this.clock.nowMs() - pod.containerStartedAtMs;
    pod.quickExits = livedMs < 10_000 ? pod.quickExits + 1 : 0;
    this.setStatus(pod, 'STARTING');
    const backoff = 2 ** Math.min(Math.max(0, pod.quickExits - 1), 6);
    this.launch(pod, next, this.boot.restart * backoff, this.boot.starting);
  }

  /** Forgets the container's ports and silent listener (the processes are gone or going). */
  private dropContainer(pod: PodState): void {
    pod.container = undefined;
    pod.published = false;
    pod.bannerSeen = false;
    if (pod.sshPort !== null) this.reservedPorts.delete(pod.sshPort);
    if (pod.publishedPort !== null) this.reservedPorts.delete(pod.publishedPort);
    pod.sshPort = null;
    pod.publishedPort = null;
    if (pod.silentServer) {
      for (const socket of pod.silentSockets) socket.destroy();
      pod.silentServer.close();
      pod.silentServer = undefined;
    }
  }

  /** Kills the pod's container (every process of it) and waits until none is left. */
  private async stopContainer(pod: PodState): Promise<void> {
    this.bumpGen(pod);
    const container = pod.container;
    this.dropContainer(pod);
    if (container) await container.kill();
  }

  private releaseStock(pod: PodState): void {
    if (!pod.holdsStock) return;
    pod.holdsStock = false;
    pod.gpuType.stock[pod.dataCenterId] = (pod.gpuType.stock[pod.dataCenterId] ?? 0) + pod.gpuCount;
  }

  private async deletePod(pod: PodState, by: DeletedBy): Promise<void> {
    if (pod.deleted) return;
    pod.deleted = true;
    // Billing and the pod's key end now. While its processes are being killed the pod reads as
    // TERMINATED (and is out of the list); once none is left it answers 404, so a client that
    // sees the 404 can rely on no process of the pod running.
    this.podKeys.delete(pod.apiKey);
    this.ledgerBook.close(pod.id, by);
    pod.status = 'TERMINATED';
    pod.published = false;
    await this.stopContainer(pod);
    this.podsById.delete(pod.id);
    this.releaseStock(pod);
    this.podLogLine(pod, `deleted by ${by}`);
    rmSync(pod.dirs.root, { recursive: true, force: true });
    rmSync(pod.runtimeDir, { recursive: true, force: true });
  }

  private async podAction(pod: PodState, action: string, by: DeletedBy): Promise<Reply> {
    if (!ACTIONS_BY_STATUS[pod.status].includes(action)) {
      return problem(409, `action '${action}' is not valid for a pod in status ${pod.status}`);
    }
    switch (action) {
      case 'terminate':
        await this.deletePod(pod, by);
        return { status: 204 };
      case 'stop':
        await this.stopContainer(pod);
        this.releaseStock(pod);
        this.setStatus(pod, 'EXITED');
        this.podLogLine(pod, `stopped by ${by}`);
        return { status: 200, body: this.podJson(pod) };
      case 'start': {
        const free = pod.gpuType.stock[pod.dataCenterId] ?? 0;
        if (!pod.holdsStock && free < pod.gpuCount) {
          return problem(
            400,
            'There are not enough free GPUs on the host machine to start this pod. Try again later or deploy a new pod.',
          );
        }
        if (!pod.holdsStock) {
          pod.gpuType.stock[pod.dataCenterId] = free - pod.gpuCount;
          pod.holdsStock = true;
        }
        // A stopped pod lost its container disk; its volumes remain.
        this.resetContainerDisk(pod);
        return this.restartInPlace(pod);
      }
      case 'restart':
        await this.stopContainer(pod);
        return this.restartInPlace(pod);
      default:
        return problem(422, 'Request validation failed.', [`$.action: unknown action '${action}'`]);
    }
  }

  private restartInPlace(pod: PodState): Reply {
    const gen = this.bumpGen(pod);
    this.setStatus(pod, 'STARTING');
    this.launch(pod, gen, 0, this.boot.starting);
    return { status: 200, body: this.podJson(pod) };
  }

  private podJson(pod: PodState): JsonObject {
    const running = pod.status === 'RUNNING';
    const port = pod.published ? pod.publishedPort : null;
    const billingGpu = pod.status === 'PROVISIONING' || pod.status === 'STARTING' || running;
    return {
      id: pod.id,
      name: pod.name,
      image: pod.image,
      args: pod.args,
      disk: pod.disk,
      ports: [...pod.ports],
      env: { ...pod.env },
      registry: null,
      status: pod.status,
      actions: [...ACTIONS_BY_STATUS[pod.status]],
      mounts: structuredClone(pod.mounts),
      gpu: { id: pod.gpuType.id, count: pod.gpuCount },
      cloud: pod.cloud,
      dataCenterId: pod.dataCenterId,
      cudaVersion: pod.cudaVersion,
      ssh: {
        // No Runpod SSH proxy here: only the direct mapping exists.
        proxy: null,
        direct:
          port !== null
            ? {
                host: '127.0.0.1',
                port,
                username: 'root',
                command: `ssh root@127.0.0.1 -p ${port}`,
              }
            : null,
      },
      template: null,
      cost: billingGpu ? pod.gpuUsdPerHour : 0,
      locked: false,
      globalNetworking: { enabled: false },
      runtime: running
        ? {
            uptime: Math.max(
              0,
              Math.floor((this.clock.nowMs() - (pod.startedAtMs ?? pod.createdAtMs)) / 1000),
            ),
            ports: pod.ports.map((p) => {
              const [privatePort, type] = p.split('/');
              const isSsh = p === '22/tcp';
              return {
                private: Number(privatePort),
                public: isSsh ? port : null,
                type: type ?? 'tcp',
                ip: isSsh && port !== null ? '127.0.0.1' : null,
              };
            }),
          }
        : null,
      createdAt: rfc3339(pod.createdAtMs),
      startedAt: pod.startedAtMs !== null ? rfc3339(pod.startedAtMs) : null,
    };
  }

  private internals(pod: PodState): PodInternals {
    return {
      id: pod.id,
      name: pod.name,
      status: pod.status,
      apiKey: pod.apiKey,
      sshPort: pod.sshPort,
      publishedPort: pod.publishedPort,
      dirs: { ...pod.dirs },
      pidNamespace: pod.container?.pidNamespace ?? null,
      unsharePid: pod.container?.unsharePid ?? null,
      initPid: pod.container?.initPid ?? null,
      processes: pod.container?.processes() ?? [],
      containerStarts: pod.containerStarts,
    };
  }

  // ---------------------------------------------------------------- shutdown

  /** Process exit: SIGKILL every container now (no awaiting possible). */
  killAllNow(): void {
    for (const pod of this.podsById.values()) pod.container?.killNow();
    this.unmountVolumes();
  }

  /** `PATCH /v2/network-volumes/{id}`: a new name, or a size that only grows (400 otherwise). */
  private updateNetworkVolume(id: string, body: { size?: number; name?: string }): Reply {
    const volume = this.catalog.networkVolumes.find((v) => v.id === id);
    if (!volume) return problem(404, 'network volume not found');
    if (body.size !== undefined && body.size < volume.sizeGb) {
      return problem(
        400,
        `network volume storage cannot be reduced: it is ${volume.sizeGb} GB, ${body.size} GB asked`,
      );
    }
    if (body.size !== undefined && body.size !== volume.sizeGb) {
      const source = join(this.stateDir, 'volumes', volume.id);
      if (this.mountedVolumes.has(source)) {
        const raised = spawnSync(
          'mount',
          ['-o', `remount,size=${this.volumeQuotaBytes(body.size)}`, source],
          { stdio: ['ignore', 'ignore', 'pipe'] },
        );
        if (raised.status !== 0) {
          return problem(500, `cannot grow the volume: ${String(raised.stderr).trim()}`);
        }
      }
      volume.sizeGb = body.size;
    }
    if (body.name !== undefined) volume.name = body.name;
    return { status: 200, body: volumeJson(volume) };
  }

  private volumeQuotaBytes(sizeGb: number): number {
    return Math.floor(sizeGb * (this.volumeQuota?.bytesPerGb ?? 0) * 0.94);
  }

  /** With `volumeQuota`, makes the volume's host directory a tmpfs of its quota: null, or why not. */
  private mountVolumeQuota(volumeId: string, source: string): string | null {
    if (this.volumeQuota === null || this.mountedVolumes.has(source)) return null;
    const volume = this.catalog.networkVolumes.find((v) => v.id === volumeId);
    if (!volume) return `network volume '${volumeId}' not found`;
    const mounted = spawnSync(
      'mount',
      [
        '-t',
        'tmpfs',
        '-o',
        `size=${this.volumeQuotaBytes(volume.sizeGb)},mode=0755,nosuid,nodev`,
        'tmpfs',
        source,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    if (mounted.status !== 0) {
      return `cannot mount the quota of network volume '${volumeId}': ${String(mounted.stderr).trim()}`;
    }
    this.mountedVolumes.add(source);
    return null;
  }

  private unmountVolumes(): void {
    for (const source of this.mountedVolumes) {
      spawnSync('umount', ['-l', source], { stdio: 'ignore' });
    }
    this.mountedVolumes.clear();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort();
    const pods = [...this.podsById.values()];
    await Promise.all(
      pods.map(async (pod) => {
        const container = pod.container;
        this.bumpGen(pod);
        this.dropContainer(pod);
        if (container) await container.kill();
      }),
    );
    // A container still being spawned is killed by its launch as soon as it exists.
    await Promise.allSettled([...this.launches]);
    for (const res of this.hanging) res.destroy();
    await new Promise<void>((resolve) => {
      if (!this.server.listening) {
        resolve();
        return;
      }
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
    live.delete(this);
    this.unmountVolumes();
    if (this.ownsStateDir) rmSync(this.stateDir, { recursive: true, force: true });
  }
}

interface CreatePodBody {
  name: string;
  image?: string;
  args?: string;
  disk?: number;
  ports?: string[];
  env?: Record<string, string>;
  registry?: string | null;
  cloud?: CloudType;
  cpu?: unknown;
  gpu?: { id: string; count?: number; allowedCudaVersions?: string[]; minCudaVersion?: string };
  dataCenterIds?: string[];
  globalNetworking?: boolean;
  mounts?: {
    persistent?: { size: number; path: string };
    network?: { volumeId: string; path: string }[];
  };
  startJupyter?: boolean;
  startSsh?: boolean;
  templateId?: string;
  /** LIVE API EXTENSION (see ./extensions.ts). */
  cmd?: string[];
}

type BucketSize = 'hour' | 'day' | 'week' | 'month' | 'year';

/** The start of the bucket `ms` falls in, moved by `shift` buckets (UTC; weeks start Monday). */
function bucketStart(ms: number, size: BucketSize, shift: number): number {
  const d = new Date(ms);
  const y = d.getUTCFullYear();
  const mo = d.getUTCMonth();
  const day = d.getUTCDate();
  switch (size) {
    case 'hour':
      return Math.floor(ms / 3_600_000) * 3_600_000 + shift * 3_600_000;
    case 'day':
      return Date.UTC(y, mo, day + shift);
    case 'week': {
      const sinceMonday = (d.getUTCDay() + 6) % 7;
      return Date.UTC(y, mo, day - sinceMonday + 7 * shift);
    }
    case 'month':
      return Date.UTC(y, mo + shift, 1);
    case 'year':
      return Date.UTC(y + shift, 0, 1);
  }
}

/** Runpod's amounts are dollars; six decimals keep a seconds-long test pod's cents visible. */
function roundUsd(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

function volumeJson(v: NetworkVolumeSpec): JsonObject {
  return { id: v.id, name: v.name, size: v.sizeGb, dataCenter: v.dataCenterId, type: v.type };
}

function round6(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

export type { LedgerEntry, LedgerSnapshot, PendingFault, Fault, SshdFaultMode };
