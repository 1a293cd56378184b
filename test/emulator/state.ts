/**
 * What the emulator's layers share: a pod's and a secret's state, the reply shape, Runpod's
 * problem+json errors and reasons, and small helpers (ids, free ports, sshd_config, billing buckets).
 */
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { type Server as TcpServer, type Socket } from 'node:net';
import { type CloudType, type GpuTypeSpec, type NetworkVolumeSpec } from './catalog';
import { type BindMount, Container } from './container';
import { type JsonObject } from './extensions';
import { ROUTES, type SshdFaultMode } from './faults';
import { type PodDirs, type PodStatus } from './types';

export type Reply = { status: number; body?: unknown; headers?: Record<string, string> };

export interface PodLogEvent {
  id: string;
  ts: string;
  source: 'container' | 'system';
  line: string;
}

export interface PodState {
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
  /** Its place in an Instant Cluster; undefined for a pod of its own. */
  member: MemberState | undefined;
}

/** A cluster member's place: its cluster, rank and address, and the cluster's shape. */
export interface MemberState {
  clusterId: string;
  rank: number;
  ip: string;
  podCount: number;
  gpuCountPerPod: number;
}

export interface SecretState {
  id: string;
  name: string;
  value: string;
  description: string | null;
  createdAtMs: number;
  updatedAtMs: number;
}

export const SECRET_REF = /\{\{\s*RUNPOD_SECRET_([A-Za-z0-9_.-]+)\s*\}\}/g;
export const MAX_BODY_BYTES = 4 * 1024 * 1024;
export const REASONS: Record<number, string> = {
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
export const DEFAULT_DETAILS: Record<number, string> = {
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
/** The operations the emulator serves: every route a request fault can target, and the bill. */
export const IMPLEMENTED = new Set<string>([
  ...ROUTES.filter((route) => route !== '*'),
  'listPodBilling',
  'listClusterBilling',
]);
export const ACTIONS_BY_STATUS: Record<PodStatus, string[]> = {
  PROVISIONING: ['stop', 'terminate'],
  STARTING: ['stop', 'terminate'],
  RUNNING: ['stop', 'restart', 'terminate'],
  EXITED: ['start', 'terminate'],
  ERROR: ['start', 'terminate'],
  TERMINATED: [],
};

export function randomId(
  length: number,
  alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789',
): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const b of bytes) out += alphabet[b % alphabet.length];
  return out;
}

export function randomApiKey(): string {
  return `rpa_${randomId(40, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')}`;
}

export function problem(status: number, detail?: string, errors?: string[]): Reply {
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

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function sleepReal(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The pod image's sshd_config; a cluster member's sshd listens on its own namespace's addresses. */
export function sshdConfig(port: number, listenAddress = '127.0.0.1'): string {
  return [
    '# As the pod image ships it (written by the Runpod emulator at each container start).',
    `Port ${port}`,
    `ListenAddress ${listenAddress}`,
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

/** Whether {@link checkPrerequisites} passed once in this process (its probes are spawnSync). */
let prerequisitesMet = false;

export function checkPrerequisites(): void {
  if (prerequisitesMet) return;
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
  prerequisitesMet = true;
}

export interface CreatePodBody {
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

export type BucketSize = 'hour' | 'day' | 'week' | 'month' | 'year';

/** The start of the bucket `ms` falls in, moved by `shift` buckets (UTC; weeks start Monday). */
export function bucketStart(ms: number, size: BucketSize, shift: number): number {
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

/**
 * The window of a billing list (`startTime`/`endTime` or `lastN`, and `bucketSize`), snapped to
 * bucket boundaries as the document says (start down, end up); `lastN` is the last N buckets
 * ending with the current one. A problem reply when the query breaks a rule.
 */
export function billingWindow(
  query: Record<string, unknown>,
  nowMs: number,
): { bucketSize: BucketSize; startMs: number; endMs: number } | Reply {
  const bucketSize = (query.bucketSize as BucketSize | undefined) ?? 'day';
  const lastN = query.lastN as number | undefined;
  if (lastN !== undefined && (query.startTime !== undefined || query.endTime !== undefined)) {
    return problem(
      400,
      'lastN is mutually exclusive with startTime/endTime: give one or the other',
    );
  }
  if (lastN !== undefined) {
    return {
      bucketSize,
      startMs: bucketStart(nowMs, bucketSize, 1 - lastN),
      endMs: bucketStart(nowMs, bucketSize, 1),
    };
  }
  const rawStart = query.startTime as string | undefined;
  const rawEnd = query.endTime as string | undefined;
  const from = rawStart === undefined ? nowMs - 30 * 86_400_000 : Date.parse(rawStart);
  const to = rawEnd === undefined ? nowMs : Date.parse(rawEnd);
  if (Number.isNaN(from) || Number.isNaN(to))
    return problem(400, 'startTime/endTime must be RFC 3339');
  const startMs = bucketStart(from, bucketSize, 0);
  const endBucket = bucketStart(to, bucketSize, 0);
  const endMs = endBucket === to ? to : bucketStart(to, bucketSize, 1);
  if (endMs <= startMs) return problem(400, 'endTime must be after startTime');
  return { bucketSize, startMs, endMs };
}

/** Runpod's amounts are dollars; six decimals keep a seconds-long test pod's cents visible. */
export function roundUsd(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

export function volumeJson(v: NetworkVolumeSpec): JsonObject {
  return { id: v.id, name: v.name, size: v.sizeGb, dataCenter: v.dataCenterId, type: v.type };
}

export function round6(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}
