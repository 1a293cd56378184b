/**
 * Helpers for tests that talk to the emulator: an API client that validates every request it
 * sends and every response it reads against openapi-v2.json (+ ./extensions.ts), a small pod
 * command that does what a pod's bootstrap must (host key from env, authorized_keys, sshd), and
 * an ssh2 session with a pinned host key.
 */
import assert from 'node:assert/strict';
import { Client, utils, type ConnectConfig } from 'ssh2';
import { ProcessSnapshot } from './container';
import { ContractViolation, OpenApiContract } from './openapi';

export interface ApiResponse<T = unknown> {
  status: number;
  headers: Headers;
  contentType: string | null;
  /** Parsed JSON body, or undefined for an empty body. */
  body: T;
}

export interface CallOptions {
  body?: unknown;
  /** Send this text as the body instead of JSON (to test malformed bodies). */
  rawBody?: string;
  /** Bearer key (default: the client's key); null sends no Authorization header. */
  key?: string | null;
  /** The body breaks the contract on purpose: do not validate the request. */
  invalidRequest?: boolean;
  timeoutMs?: number;
  headers?: Record<string, string>;
}

/** Every exchange checked against the document; a violation throws `ContractViolation`. */
/** The header every admin route (`/_emulator/*`) requires: the account key, as for the API. */
export function adminHeaders(emulator: { apiKey: string }): Record<string, string> {
  return { authorization: `Bearer ${emulator.apiKey}` };
}

export class ApiClient {
  readonly contract = OpenApiContract.load();
  /** Every exchange so far, for tests that count calls. */
  readonly exchanges: { method: string; path: string; status: number }[] = [];

  constructor(
    readonly baseUrl: string,
    readonly key: string,
  ) {}

  async call<T = unknown>(
    method: string,
    path: string,
    options: CallOptions = {},
  ): Promise<ApiResponse<T>> {
    const url = new URL(this.baseUrl + path);
    if (options.body !== undefined && !options.invalidRequest) {
      this.contract.assertRequestBody(method, url.pathname, options.body);
    }
    const headers: Record<string, string> = {
      'user-agent': 'overbrainer-emulator-tests/0.1.0',
      ...options.headers,
    };
    const key = options.key === undefined ? this.key : options.key;
    if (key !== null) headers.authorization = `Bearer ${key}`;
    let payload: string | undefined;
    if (options.rawBody !== undefined) payload = options.rawBody;
    else if (options.body !== undefined) payload = JSON.stringify(options.body);
    if (payload !== undefined) headers['content-type'] ??= 'application/json';
    const response = await fetch(url, {
      method,
      headers,
      body: payload,
      signal: AbortSignal.timeout(options.timeoutMs ?? 15_000),
    });
    const text = await response.text();
    const body = text === '' ? undefined : (JSON.parse(text) as unknown);
    const contentType = response.headers.get('content-type');
    this.exchanges.push({ method, path, status: response.status });
    this.contract.assertResponse(method, url.pathname, {
      status: response.status,
      contentType,
      retryAfter: response.headers.get('retry-after'),
      body,
    });
    return { status: response.status, headers: response.headers, contentType, body: body as T };
  }

  get<T = unknown>(path: string, options?: CallOptions): Promise<ApiResponse<T>> {
    return this.call<T>('GET', path, options);
  }
  post<T = unknown>(path: string, body: unknown, options?: CallOptions): Promise<ApiResponse<T>> {
    return this.call<T>('POST', path, { ...options, body });
  }
  delete<T = unknown>(path: string, options?: CallOptions): Promise<ApiResponse<T>> {
    return this.call<T>('DELETE', path, options);
  }
}

export { ContractViolation };

/** Takes a snapshot of a pod's processes (its PID namespace must be alive). */
export function snapshotPod(pidNamespace: string | null | undefined): ProcessSnapshot {
  assert.ok(pidNamespace, 'the pod has no running container');
  const snapshot = ProcessSnapshot.of(pidNamespace);
  assert.ok(snapshot.init, `no PID 1 found in ${pidNamespace}`);
  return snapshot;
}

/** Asserts that no process of the snapshot runs and that its namespace has ended. */
export function assertPodGone(snapshot: ProcessSnapshot, what = 'the pod'): void {
  const running = snapshot.running().map((p) => p.pid);
  assert.deepEqual(running, [], `${what}: processes still running`);
  assert.ok(snapshot.namespaceEnded(), `${what}: its PID 1 still runs`);
}

/** The parts of a Pod the tests read. */
export interface PodBody {
  id: string;
  name: string;
  status: string;
  cost: number;
  env: Record<string, string>;
  dataCenterId: string | null;
  gpu: { id: string; count: number };
  ssh: { direct: { host: string; port: number; username: string; command: string } | null };
  runtime: { uptime?: number } | null;
  createdAt: string;
  startedAt: string | null;
  actions: string[];
}

export interface Problem {
  title: string;
  status: number;
  detail: string;
  errors?: string[];
}

export interface KeyPair {
  /** OpenSSH private key. */
  privateKey: string;
  /** `ssh-ed25519 AAAA… comment` */
  publicKey: string;
  /** The raw public key blob, as ssh2's hostVerifier receives it. */
  blob: Buffer;
}

export function ed25519(): KeyPair {
  // ssh2 1.17's generateKeyPairSync('ed25519') strips leading zero bytes of the public key (one
  // key in 256), and OpenSSH then refuses both files ("error in libcrypto"): a pod's sshd would
  // not start. Draw again until the public key has its 32 bytes.
  for (;;) {
    const pair = utils.generateKeyPairSync('ed25519');
    const blob = Buffer.from(pair.public.split(' ')[1] ?? '', 'base64');
    if (blob.length === 4 + 'ssh-ed25519'.length + 4 + 32) {
      return { privateKey: pair.private, publicKey: pair.public, blob };
    }
  }
}

/**
 * The essentials of a pod bootstrap, for tests independent of the project's real one: install the
 * host key from env, authorize one client key, start sshd (`/usr/sbin/sshd`, or `service ssh
 * restart` when TEST_SSHD_START=service), then stay alive as PID 1.
 */
export const TEST_POD_SCRIPT = [
  'set -eu',
  'rm -f /etc/ssh/ssh_host_*',
  'printf "%s" "$TEST_HOST_KEY_B64" | base64 -d > /etc/ssh/ssh_host_ed25519_key',
  'chmod 600 /etc/ssh/ssh_host_ed25519_key',
  'mkdir -p /root/.ssh && chmod 700 /root/.ssh',
  'printf "%s\\n" "$TEST_AUTHORIZED_KEY" > /root/.ssh/authorized_keys',
  'chmod 600 /root/.ssh/authorized_keys',
  'unset TEST_HOST_KEY_B64',
  'if [ "${TEST_SSHD_START:-direct}" = service ]; then service ssh restart; else mkdir -p /run/sshd; /usr/sbin/sshd; fi',
  'echo "test pod: sshd started"',
  // TEST_EXIT_FILE: the command ends (exit 7) once that file appears, to exercise restarts.
  'if [ -n "${TEST_EXIT_FILE:-}" ]; then',
  '  while [ ! -e "$TEST_EXIT_FILE" ]; do sleep 0.05; done',
  '  rm -f "$TEST_EXIT_FILE"; echo "test pod: exiting"; exit 7',
  'fi',
  'exec sleep infinity',
].join('\n');

export function testPodCmd(): string[] {
  return ['bash', '-c', TEST_POD_SCRIPT];
}

export function testPodEnv(
  hostKey: KeyPair,
  client: KeyPair,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    TEST_HOST_KEY_B64: Buffer.from(hostKey.privateKey).toString('base64'),
    TEST_AUTHORIZED_KEY: client.publicKey,
    ...extra,
  };
}

export interface SshTarget {
  port: number;
  /** The client's private key. */
  privateKey: string;
  /** The host key blob to pin. */
  hostKeyBlob: Buffer;
  host?: string;
  timeoutMs?: number;
}

/** Opens an SSH connection that only accepts the pinned host key. */
export function sshConnect(target: SshTarget): Promise<Client> {
  return new Promise((resolve, reject) => {
    const client = new Client();
    let settled = false;
    client.once('ready', () => {
      settled = true;
      resolve(client);
    });
    // ssh2 may report more than one error for one failed connection: the first one counts.
    client.on('error', (error) => {
      client.end();
      if (settled) return;
      settled = true;
      reject(error);
    });
    client.connect(connectConfig(target));
  });
}

/** How the helpers connect: as root, with the pod's key, to the pinned host key only. */
function connectConfig(target: SshTarget): ConnectConfig {
  return {
    host: target.host ?? '127.0.0.1',
    port: target.port,
    username: 'root',
    privateKey: target.privateKey,
    readyTimeout: target.timeoutMs ?? 10_000,
    hostVerifier: (key: Buffer) => key.equals(target.hostKeyBlob),
  };
}

/**
 * Proves who answers on a port without logging in: the SSH key exchange completes only if the
 * server holds the pinned host key. Cheaper than a session (no login, no shell on the pod).
 */
export function sshHandshake(target: SshTarget): Promise<void> {
  return new Promise((resolve, reject) => {
    const client = new Client();
    let settled = false;
    const settle = (error?: Error): void => {
      if (settled) return;
      settled = true;
      client.end();
      if (error) reject(error);
      else resolve();
    };
    client.once('handshake', () => settle());
    client.on('error', (error) => settle(error));
    client.connect(connectConfig(target));
  });
}

/** Runs `command` on an open connection; resolves with its output and exit code. */
export function sshRun(
  client: Client,
  command: string,
): Promise<{ stdout: string; stderr: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    client.exec(command, (error, stream) => {
      if (error) {
        reject(error);
        return;
      }
      let stdout = '';
      let stderr = '';
      let code: number | null = null;
      stream.on('data', (d: Buffer) => (stdout += d.toString()));
      stream.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      stream.on('exit', (c: number | null) => (code = c));
      stream.on('close', () => resolve({ stdout, stderr, code }));
    });
  });
}

/** Connects, runs one command, disconnects. */
export async function sshExec(
  target: SshTarget,
  command: string,
): Promise<{ stdout: string; stderr: string; code: number | null }> {
  const client = await sshConnect(target);
  try {
    return await sshRun(client, command);
  } finally {
    client.end();
  }
}

/** Polls `probe` (real time) until it returns a value other than undefined. */
/**
 * Creates a pod as the client would for run `runId` (name `overbrainer-<runId>-<suffix>`, the
 * run marker in its env, SSH off until its script says), running `cmd`; its ID.
 */
export async function postRunPod(
  api: ApiClient,
  runId: string,
  cmd: string[],
  options: { suffix?: string; env?: Record<string, string> } = {},
): Promise<string> {
  const created = await api.post<PodBody>('/pods', {
    name: `overbrainer-${runId}-${options.suffix ?? '1'}`,
    image: 'runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404',
    cloud: 'SECURE',
    gpu: { id: 'NVIDIA GeForce RTX 4090', count: 1, minCudaVersion: '13.0' },
    disk: 20,
    ports: ['22/tcp'],
    startSsh: false,
    env: options.env ?? { OVERBRAINER_RUN_ID: runId },
    cmd,
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  return created.body.id;
}

export async function waitFor<T>(
  what: string | (() => string),
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 20_000,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Polls GET /pods/{id} until `accept` holds; returns that pod and every status seen. */
export async function waitForPod(
  api: ApiClient,
  id: string,
  accept: (pod: PodBody) => boolean,
  timeoutMs = 20_000,
  intervalMs = 100,
): Promise<{ pod: PodBody; statuses: string[] }> {
  const statuses: string[] = [];
  const pod = await waitFor(
    () => `pod ${id} to reach the expected state (seen: ${statuses.join(' → ')})`,
    async () => {
      const r = await api.get<PodBody>(`/pods/${id}`);
      if (r.status !== 200) throw new Error(`GET /pods/${id} answered ${r.status}`);
      if (statuses[statuses.length - 1] !== r.body.status) statuses.push(r.body.status);
      return accept(r.body) ? r.body : undefined;
    },
    timeoutMs,
    intervalMs,
  );
  return { pod, statuses };
}
