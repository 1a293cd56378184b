/**
 * The emulator's state and its server socket: every field the layers share, the constructor
 * (options, state dirs, the HTTP server), and the small pod bookkeeping every layer uses (status,
 * the pod log's system lines, generations). Layers, each extending the one before: base → podLogs
 * (the log stream) → containers (booting and restarting a pod's container) → pods (create, actions,
 * JSON, volumes) → handlers (the API operations) → http (routing, auth, faults, contract checks) →
 * emulator (the test-facing API, injected faults, shutdown).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Clock, rfc3339, systemClock } from '../../src/core/clock';
import { type CatalogSpec, defaultCatalog } from './catalog';
import { ensureHostMountpoints } from './container';
import { type JsonObject, MAX_PODS_PAGE_LIMIT } from './extensions';
import { type Fault, FaultBook } from './faults';
import type { GpuSetting } from './gpus';
import { Ledger } from './ledger';
import { OpenApiContract } from './openapi';
import { ReservedPorts } from './ports';
import {
  type BootDelaysMs,
  type EmulatorOptions,
  type PodStatus,
  type RequestLogEntry,
} from './types';
import {
  type PodLogEvent,
  type PodState,
  problem,
  randomApiKey,
  randomId,
  type Reply,
  type SecretState,
} from './state';

/** Every emulator of this process, so none leaves a pod behind when the process exits. */
export const live = new Set<{ killAllNow(): void }>();
let exitHookInstalled = false;
export function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const emulator of live) emulator.killAllNow();
  });
}

export abstract class EmulatorBase {
  protected readonly clock: Clock;
  /** A spent quota window (a `quotaSpent` fault): account calls before its reset answer 429. */
  protected quota: { window: 'minute' | 'hour' | 'day'; resetAtMs: number } | null = null;
  protected readonly contract = OpenApiContract.load();
  protected readonly ledgerBook: Ledger;
  protected readonly faultBook = new FaultBook();
  protected readonly catalog: CatalogSpec;
  protected readonly accountKey: string;
  protected readonly stateDir: string;
  protected readonly ownsStateDir: boolean;
  protected readonly boot: BootDelaysMs;
  protected readonly restartOnExit: boolean;
  protected readonly maxPageSize: number;
  protected readonly probeIntervalMs: number;
  protected readonly server: Server;
  protected readonly podsById = new Map<string, PodState>();
  protected readonly podKeys = new Map<string, string>();
  protected readonly secrets = new Map<string, SecretState>();
  protected readonly log: RequestLogEntry[] = [];
  protected readonly violations: string[] = [];
  protected readonly reservedPorts = new ReservedPorts();
  protected readonly hanging = new Set<ServerResponse>();
  /** Each pod's log, as the log stream serves it (see syncPodLog). */
  protected readonly logBooks = new Map<
    string,
    { offset: number; partial: string; events: PodLogEvent[] }
  >();
  /** Pods a fault keeps out of the next N pod lists (see `unlistedFor`). */
  protected readonly unlisted = new Map<string, number>();
  protected readonly launches = new Set<Promise<void>>();
  /** Pods a DELETE was answered for whose processes and files are still going (close() waits). */
  protected readonly teardowns = new Set<Promise<void>>();
  protected readonly sockets = new Set<Socket>();
  protected readonly closing = new AbortController();
  protected port = 0;
  protected seq = 0;
  protected unreachableMode: 'refuse' | 'reset' | undefined;
  protected unreachableEpisode = 0;
  protected closed = false;
  protected readonly imageFiles: Record<string, string>;
  protected readonly workspaceQuotaBytes: number | null;
  protected readonly volumeQuota: { bytesPerGb: number } | null;
  /** Host directories of quota volumes mounted (tmpfs), unmounted by `close()`. */
  protected readonly mountedVolumes = new Set<string>();
  protected readonly sshRelay: ((podId: string, sshPort: number) => Promise<number>) | null;
  /** What the pods' nvidia-smi stand-in answers (./gpus.ts): for all pods, and per pod. */
  protected gpuDefault: GpuSetting = 'busy';
  protected readonly gpuSettings = new Map<string, GpuSetting>();
  /** Whether a cluster member's own key may delete its cluster (unsettled at Runpod: both played). */
  protected memberKeyDeletesCluster: boolean;

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
    this.memberKeyDeletesCluster = options.memberKeyDeletesCluster ?? false;
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

  protected livePod(id: string): PodState {
    const pod = this.podsById.get(id);
    if (!pod || pod.deleted) throw new Error(`no pod '${id}' (deleted or never created)`);
    return pod;
  }

  protected putSecret(name: string, value: string, description?: string): SecretState {
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

  protected secretJson(s: SecretState): JsonObject {
    return {
      id: s.id,
      name: s.name,
      description: s.description,
      createdAt: rfc3339(s.createdAtMs),
      updatedAt: rfc3339(s.updatedAtMs),
    };
  }

  protected dcName(id: string): string {
    return this.catalog.dataCenters.find((dc) => dc.id === id)?.name ?? id;
  }

  protected podLogLine(pod: PodState, line: string): void {
    try {
      writeFileSync(pod.dirs.log, `runpod-emulator: ${line}\n`, { flag: 'a' });
    } catch {
      // the state dir is gone (closing): nothing to record
    }
  }

  protected setStatus(pod: PodState, status: PodStatus): void {
    pod.status = status;
    if (status !== 'RUNNING') pod.published = false;
    this.ledgerBook.status(pod.id, status);
  }

  protected stale(pod: PodState, gen: number): boolean {
    return this.closed || pod.deleted || pod.gen !== gen;
  }

  protected bumpGen(pod: PodState): number {
    pod.abort.abort();
    pod.abort = new AbortController();
    pod.gen++;
    return pod.gen;
  }

  protected abstract onRequest(req: IncomingMessage, res: ServerResponse): Promise<void>;
  protected abstract write(res: ServerResponse, reply: Reply): void;
  protected abstract addFault(input: Fault): Promise<string>;
  abstract killAllNow(): void;
}
