/**
 * One SSH connection to a pod (ssh2) with the run's host key pinned: a host
 * presenting any other key is dropped during key exchange, before
 * authentication, so nothing is ever sent to it. Also the small pieces every
 * SSH module shares: the channel slots and the abort race.
 */
import { createHash } from 'node:crypto';
import type { Client, ServerHostKeyAlgorithm, SFTPWrapper } from 'ssh2';
import { ExecError } from './executor';
import { abortedError } from './failures';

/**
 * ssh2, loaded on the first connection: activating the extension (no SSH before a run needs
 * it) does not pay for evaluating it. A plain require, so esbuild still bundles it.
 */
function ssh2(): typeof import('ssh2') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('ssh2') as typeof import('ssh2');
}

export interface SshTarget {
  host: string;
  port: number;
  username: string;
  /**
   * The client private key (OpenSSH format): a pod's run key, read from `runs/<id>/ssh/id_ed25519`;
   * for the user's own machine, their unencrypted identity file, if any.
   */
  privateKey?: Buffer;
  /** A pod's pinned host key, `ssh-ed25519 AAAA…` (a trailing comment is ignored). */
  hostPublicKey?: string;
  /** The user's own machine instead of a pod: its host keys from their known_hosts, their agent. */
  userHost?: UserHostTrust;
}

/** How the user's own machine is trusted and logged into (exec/userHost.ts reads it). */
export interface UserHostTrust {
  /** Every key the user's known_hosts lists for the machine (never empty: unknown is refused). */
  hostKeys: { type: string; blob: Buffer }[];
  /** The known_hosts files read, for messages. */
  knownHostsFiles: string[];
  /** The SSH agent's socket (SSH_AUTH_SOCK), if any. */
  agent?: string;
}

/** How one connection is made (see SshExecutorOptions). */
export interface ConnectParams extends SshTarget {
  /** Bounds the connect (TCP + handshake + auth); at least {@link MIN_CONNECT_TIMEOUT_MS}. */
  connectTimeoutMs: number;
  keepaliveIntervalMs: number;
  keepaliveCountMax: number;
  /** `user@host:port`, for messages. */
  where: string;
  log: (line: string) => void;
  /** Whether the executor was disposed (a drop then reads as `aborted`). */
  disposed: () => boolean;
}

/** The pinned key's wire blob, checked to be an ssh-ed25519 key. */
export function parseHostPublicKey(line: string): Buffer {
  const [type, base64] = line.trim().split(/\s+/);
  const blob = base64 ? Buffer.from(base64, 'base64') : Buffer.alloc(0);
  const nameLength = blob.length >= 4 ? blob.readUInt32BE(0) : -1;
  const name = nameLength > 0 ? blob.subarray(4, 4 + nameLength).toString('latin1') : '';
  if (type !== 'ssh-ed25519' || name !== 'ssh-ed25519' || blob.length !== 51) {
    throw new ExecError(
      'host_key',
      'the pinned host key is not an `ssh-ed25519 AAAA…` public key: the run record is damaged; nothing was sent',
    );
  }
  return blob;
}

/** OpenSSH's `SHA256:…` fingerprint of a key blob. */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/** An abortable counting semaphore. */
export class Slots {
  private active = 0;
  private readonly waiting: { grant: () => void }[] = [];

  constructor(private readonly limit: number) {}

  async acquire(signal?: AbortSignal): Promise<() => void> {
    if (this.active < this.limit) {
      this.active++;
      return this.releaser();
    }
    await new Promise<void>((resolve, reject) => {
      const entry = {
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        const index = this.waiting.indexOf(entry);
        if (index >= 0) this.waiting.splice(index, 1);
        reject(abortedError('the command', signal?.reason));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(entry);
    });
    this.active++;
    return this.releaser();
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.active--;
      this.waiting.shift()?.grant();
    };
  }
}

/** One established SSH connection and what depends on it. */
export class Connection {
  closed = false;
  sftp: Promise<SFTPWrapper> | undefined;
  private readonly dropListeners = new Set<(error: ExecError) => void>();

  constructor(readonly client: Client) {}

  /** Calls `listener` if the connection drops; the returned function unregisters it. */
  onDrop(listener: (error: ExecError) => void): () => void {
    this.dropListeners.add(listener);
    return () => this.dropListeners.delete(listener);
  }

  drop(error: ExecError): void {
    if (this.closed) return;
    this.closed = true;
    for (const listener of [...this.dropListeners]) listener(error);
    this.dropListeners.clear();
  }
}

export function disposedError(): ExecError {
  return new ExecError('aborted', 'the SSH executor was disposed');
}

/** `promise`, or an `aborted` rejection as soon as `signal` fires. */
export function raceAbort<T>(
  promise: Promise<T>,
  signal: AbortSignal | undefined,
  what: string,
): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortedError(what, signal.reason));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortedError(what, signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * Connects with the pinned host key and the run's client key. Rejects with `host_key` (nothing
 * sent), `auth`, `timeout` or `connection`.
 */
/**
 * The least a connect is given: a TCP connect plus key exchange plus auth takes real time whatever
 * a scaled timing says (ed25519 in JS on a busy machine: hundreds of ms).
 */
export const MIN_CONNECT_TIMEOUT_MS = 2_000;

export function openConnection(given: ConnectParams): Promise<Connection> {
  const params = {
    ...given,
    connectTimeoutMs: Math.max(MIN_CONNECT_TIMEOUT_MS, given.connectTimeoutMs),
  };
  const trusted = params.userHost?.hostKeys.map((key) => key.blob) ?? [
    parseHostPublicKey(params.hostPublicKey ?? ''),
  ];
  const pinned = trusted[0]!;
  const client = new (ssh2().Client)();
  let presented: Buffer | undefined;
  let ready = false;
  let lastError: Error | undefined;
  const { where } = params;
  const failed = (error: Error): ExecError => connectError(params, pinned, error, presented);
  params.log(`connecting to ${where}`);
  return new Promise<Connection>((resolve, reject) => {
    client.on('error', (error: Error & { level?: string }) => {
      lastError = error;
      if (!ready) reject(failed(error));
    });
    client.on('close', () => {
      if (!ready) reject(failed(lastError ?? new Error('closed')));
    });
    client.once('ready', () => {
      ready = true;
      // Requests are small writes answered by small writes: with Nagle's algorithm each waits
      // for the peer's delayed ACK (40 ms on Linux), measured 55 ms for `exec true` against 17.
      client.setNoDelay(true);
      const conn = new Connection(client);
      client.on('close', () => {
        const reason = lastError ? ` (${lastError.message})` : '';
        params.log(`connection to ${where} closed${reason}`);
        conn.drop(
          params.disposed()
            ? disposedError()
            : new ExecError(
                'connection',
                `the SSH connection to ${where} dropped${reason}; the next call reconnects`,
                { cause: lastError },
              ),
        );
      });
      params.log(`connected to ${where}`);
      resolve(conn);
    });
    try {
      client.connect({
        host: params.host,
        port: params.port,
        username: params.username,
        ...(params.privateKey === undefined ? {} : { privateKey: params.privateKey }),
        ...(params.userHost?.agent === undefined ? {} : { agent: params.userHost.agent }),
        readyTimeout: params.connectTimeoutMs,
        keepaliveInterval: params.keepaliveIntervalMs,
        keepaliveCountMax: params.keepaliveCountMax,
        tryKeyboard: false,
        // Only the key type we pin, so the server cannot offer another one instead.
        algorithms: {
          serverHostKey: params.userHost
            ? hostKeyAlgorithms(params.userHost.hostKeys.map((key) => key.type))
            : ['ssh-ed25519'],
        },
        // Runs during key exchange, before any authentication: a wrong key ends it there.
        hostVerifier: (key: Buffer) => {
          const ok = Buffer.isBuffer(key) && trusted.some((known) => key.equals(known));
          if (!ok) presented = Buffer.from(key);
          return ok;
        },
      });
    } catch (error) {
      reject(failed(error as Error));
    }
  });
}

function connectError(
  params: ConnectParams,
  pinned: Buffer,
  error: Error & { level?: string; code?: string },
  presented?: Buffer,
): ExecError {
  const { where } = params;
  if (presented && params.userHost) {
    return new ExecError(
      'host_key',
      `${params.host}:${params.port} presented the host key ${fingerprint(presented)}, which your known_hosts ` +
        `(${params.userHost.knownHostsFiles.join(', ')}) does not list for it: refused before anything was sent. ` +
        `If the machine was reinstalled, check the new key's fingerprint on it, remove the old entry with ` +
        `\`ssh-keygen -R ${knownHostsName(params.host, params.port)}\` and connect once with ssh to add it; ` +
        `otherwise someone may be in between.`,
      { hint: "Nothing was sent. Check the machine's host key before you trust it again." },
    );
  }
  if (presented) {
    return new ExecError(
      'host_key',
      `${params.host}:${params.port} presented the host key ${fingerprint(presented)}, ` +
        `not the one pinned for this run (${fingerprint(pinned)}): refused before anything was sent. ` +
        `It is not the machine this run created; check the pod (\`overbrainer pod ls\`) before trying again.`,
    );
  }
  if (error.level === 'client-authentication' && params.userHost) {
    return new ExecError(
      'auth',
      `${where} refused your SSH keys (your agent${params.userHost.agent === undefined ? ' is not running' : ''} and your identity files): ` +
        `check that \`ssh -p ${params.port} ${params.username}@${params.host} true\` works, e.g. after \`ssh-add\``,
      {
        cause: error,
        hint: "Add your key to your agent (`ssh-add`) or to the machine's authorized_keys, then run the command again.",
      },
    );
  }
  if (error.level === 'client-authentication') {
    return new ExecError(
      'auth',
      `${where} refused this run's SSH key: it is not the run's pod, or its authorized_keys changed`,
      { cause: error },
    );
  }
  if (error.level === 'client-timeout') {
    return new ExecError(
      'timeout',
      `${where} gave no SSH answer within ${params.connectTimeoutMs} ms; check the network and that the pod is running`,
      { cause: error },
    );
  }
  const reason = error.code ?? error.message;
  return new ExecError(
    'connection',
    `cannot connect to ${where} over SSH (${reason}); check the network and that the pod is running`,
    { cause: error },
  );
}

/** The known_hosts name of a host: `host` on port 22, else `[host]:port`. */
export function knownHostsName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

/** The server host key algorithms that match the key types the user's known_hosts holds. */
function hostKeyAlgorithms(types: string[]): ServerHostKeyAlgorithm[] {
  const out = new Set<string>();
  for (const type of types) {
    if (type === 'ssh-rsa') ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'].forEach((a) => out.add(a));
    else out.add(type);
  }
  return [...out] as ServerHostKeyAlgorithm[];
}
