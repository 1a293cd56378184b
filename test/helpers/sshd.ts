/**
 * A real OpenSSH sshd for tests: `/usr/sbin/sshd -D -e -f <temp config>` on
 * 127.0.0.1 with a free port, its own ed25519 host key and authorized_keys in
 * a temp dir. Nothing here is mocked: the executor's tests talk to the same
 * daemon a pod runs. Every helper kills what it started and removes its temp
 * dir, so tests can run in parallel and leave nothing behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../../src/core/clock';
import type { SshExecutorOptions } from '../../src/core/exec/ssh';
import { generateEd25519KeyPair } from '../../src/core/exec/sshKeys';
import { scaleTiming } from '../../src/core/timing';
import { freePort, releasePort } from '../emulator/ports';

export interface KeyPair {
  /** OpenSSH private key (`-----BEGIN OPENSSH PRIVATE KEY-----`). */
  privateKey: Buffer;
  /** `ssh-ed25519 AAAA…` */
  publicKey: string;
}

/**
 * A fresh ed25519 key pair, generated in-process (not with ssh2's generator:
 * about one of its keys in 256 is malformed and sshd refuses it).
 */
export function generateEd25519(): KeyPair {
  const pair = generateEd25519KeyPair();
  return { privateKey: Buffer.from(pair.privateKey), publicKey: pair.publicKey };
}

export interface SshdOptions {
  /** Host key to serve (default: a fresh one). Pass the same one to start a "restarted" pod. */
  hostKey?: KeyPair;
  /** Public keys allowed to log in (default: a fresh client key, returned as `clientKey`). */
  authorizedKeys?: string[];
  /** Directory the tests use as the remote side (default: `<temp>/root`, created). */
  root?: string;
  /** Port to listen on (default: a free one). */
  port?: number;
  /**
   * Environment for every session (sshd `SetEnv`). `BASH_ENV` pointing at a
   * script changes what a session's commands find first, e.g. a lying `find`.
   */
  env?: Record<string, string>;
  /** Let bash read ~/.bashrc for each command, as sshd normally does (slow here). */
  sourceBashrc?: boolean;
  /** Extra sshd_config lines. */
  extraConfig?: string[];
}

export interface Sshd {
  readonly host: '127.0.0.1';
  readonly port: number;
  readonly user: string;
  /** `ssh-ed25519 AAAA…` of the served host key. */
  readonly hostPublicKey: string;
  readonly hostKey: KeyPair;
  /** The client key allowed in (when `authorizedKeys` was not given, else a key NOT authorized). */
  readonly clientKey: KeyPair;
  readonly clientPrivateKey: Buffer;
  readonly clientPublicKey: string;
  /** Remote-side scratch directory (absolute). */
  readonly root: string;
  /** The temp dir holding the config, keys and log. */
  readonly dir: string;
  /** sshd's own log (stderr of `-e`), last 256 KiB. */
  log(): string;
  /** PID of the listening daemon. */
  pid(): number;
  /** Kills every session's sshd processes but keeps listening: a dropped connection (commands live on). */
  dropSessions(): Promise<void>;
  /** Stops the daemon and its sessions, keeping the dir (restart() brings it back on the same port). */
  kill(): Promise<void>;
  /** Starts the daemon again on the same port with the same keys. */
  restart(): Promise<void>;
  /** Kills everything it started and removes the temp dir. */
  stop(): Promise<void>;
}

const SSHD = '/usr/sbin/sshd';
const LOG_CAP_BYTES = 256 * 1024;

/**
 * A loopback port nobody listens on right now, below the kernel's ephemeral range (the emulator's
 * pick): it may still be taken before use, and callers retry.
 */
export { freePort };

/** PIDs of every descendant of `pid` (children first found by scanning /proc). */
export function descendants(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The comm field may hold spaces and parentheses: the ppid follows the last ')'.
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parentOf.set(Number(entry), Number(rest[1]));
    } catch {
      // The process ended while we looked.
    }
  }
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const parent = queue.shift()!;
    for (const [child, ppid] of parentOf) {
      if (ppid === parent) {
        out.push(child);
        queue.push(child);
      }
    }
  }
  return out;
}

/** Whether a process exists (and is not a zombie). */
export function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** SIGKILLs each process (each process group, with `groups`) still there; gone ones are fine. */
export function killAll(pids: Iterable<number>, groups = false): void {
  for (const pid of pids) {
    try {
      process.kill(groups ? -pid : pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

async function waitGone(pids: number[], timeoutMs = 5_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (pids.some(processAlive) && Date.now() < until) await delay(10);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One `SetEnv` line (sshd keeps the first of repeated keywords). */
function setEnv(options: SshdOptions): string[] {
  const env: Record<string, string> = {
    ...(options.sourceBashrc ? {} : { SHLVL: '1' }),
    ...options.env,
  };
  const pairs = Object.entries(env).map(([name, value]) => {
    if (/[\s"]/.test(value))
      throw new Error(`SetEnv value for ${name} must not hold spaces or quotes`);
    return `${name}=${value}`;
  });
  return pairs.length > 0 ? [`SetEnv ${pairs.join(' ')}`] : [];
}

/** Resolves once `port` answers with an `SSH-` banner. */
async function waitBanner(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`sshd exited (${child.exitCode ?? child.signalCode}) before answering`);
    }
    const banner = await new Promise<string>((resolve) => {
      const socket: Socket = createConnection({ host: '127.0.0.1', port });
      let data = '';
      const done = (value: string): void => {
        socket.destroy();
        resolve(value);
      };
      socket.setTimeout(1_000, () => done(data));
      socket.on('data', (chunk) => {
        data += chunk.toString('latin1');
        if (data.includes('\n')) done(data);
      });
      socket.on('error', () => done(''));
      socket.on('close', () => done(data));
    });
    if (banner.startsWith('SSH-')) return;
    if (Date.now() > until) throw new Error(`sshd on port ${port} gave no SSH banner in time`);
    await delay(20);
  }
}

/** Starts a real sshd; see the module comment. Always `stop()` it (an `after` hook). */
export async function startSshd(options: SshdOptions = {}): Promise<Sshd> {
  mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const dir = mkdtempSync(join(tmpdir(), 'ob-sshd-'));
  const hostKey = options.hostKey ?? generateEd25519();
  const clientKey = generateEd25519();
  const root = options.root ?? join(dir, 'root');
  mkdirSync(root, { recursive: true });
  const hostKeyPath = join(dir, 'host_ed25519');
  writeFileSync(hostKeyPath, hostKey.privateKey, { mode: 0o600 });
  writeFileSync(hostKeyPath + '.pub', hostKey.publicKey + '\n');
  const authorized = options.authorizedKeys ?? [clientKey.publicKey];
  writeFileSync(join(dir, 'authorized_keys'), authorized.join('\n') + '\n', { mode: 0o600 });
  const user = 'root';

  let log = '';
  let child: ChildProcess | undefined;
  let port = options.port ?? 0;

  const writeConfig = (p: number): string => {
    const configPath = join(dir, 'sshd_config');
    writeFileSync(
      configPath,
      [
        `Port ${p}`,
        'ListenAddress 127.0.0.1',
        `HostKey ${hostKeyPath}`,
        `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
        'PidFile none',
        'StrictModes no',
        'UsePAM no',
        'Subsystem sftp internal-sftp',
        'PermitRootLogin prohibit-password',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'PrintMotd no',
        // bash sources ~/.bashrc for ssh commands only at SHLVL < 2; this machine's
        // .bashrc runs `pyenv init` (2-3 s per command). Pods pay their own rc cost.
        ...setEnv(options),
        ...(options.extraConfig?.some((l) => l.startsWith('LogLevel')) ? [] : ['LogLevel VERBOSE']),
        ...(options.extraConfig ?? []),
        '',
      ].join('\n'),
    );
    return configPath;
  };

  const launch = async (p: number): Promise<boolean> => {
    const configPath = writeConfig(p);
    const proc = spawn(SSHD, ['-D', '-e', '-f', configPath], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child = proc;
    proc.stderr?.on('data', (chunk: Buffer) => {
      log += chunk.toString('utf8');
      if (log.length > LOG_CAP_BYTES) log = log.slice(-LOG_CAP_BYTES);
    });
    try {
      await waitBanner(p, proc, 10_000);
      return true;
    } catch (error) {
      killAll([proc.pid ?? -1]);
      if (/Address already in use|Cannot bind/.test(log)) return false;
      throw new Error(`${(error as Error).message}\n${log}`, { cause: error });
    }
  };

  const startOnce = async (): Promise<void> => {
    for (let attempt = 0; attempt < 20; attempt++) {
      const p = port || (await freePort());
      if (await launch(p)) {
        port = p;
        return;
      }
      // A fixed port (restart) may still be held by the old daemon for a moment.
      if (options.port || port) await delay(50);
    }
    throw new Error(`sshd could not bind a port:\n${log}`);
  };

  const killTree = async (): Promise<void> => {
    const proc = child;
    if (!proc?.pid) return;
    const pids = [proc.pid, ...descendants(proc.pid)];
    killAll(pids);
    await waitGone(pids);
    if (proc.exitCode === null && proc.signalCode === null) {
      await new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    }
  };

  try {
    await startOnce();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }

  return {
    host: '127.0.0.1',
    get port() {
      return port;
    },
    user,
    hostPublicKey: hostKey.publicKey,
    hostKey,
    clientKey,
    clientPrivateKey: clientKey.privateKey,
    clientPublicKey: clientKey.publicKey,
    root,
    dir,
    log: () => log,
    pid: () => child?.pid ?? -1,
    dropSessions: async () => {
      const listener = child?.pid;
      if (!listener) return;
      // Only sshd's own session processes, as a network drop would end them: the
      // commands they ran live on, as they would on a pod.
      const pids = descendants(listener).filter((pid) => commOf(pid) === 'sshd');
      killAll(pids);
      await waitGone(pids);
    },
    kill: killTree,
    restart: async () => {
      await killTree();
      await startOnce();
    },
    stop: async () => {
      await killTree();
      releasePort(port);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A TCP relay between a client and a port, to simulate networks: `blackhole()`
 * keeps the sockets open but stops moving bytes (only keepalives can notice),
 * `cut()` resets every connection, `heal()` moves bytes again, `cutOnNextUp()` resets every
 * connection when a client next sends anything (a request in flight: nothing of it reaches the
 * target, its answer never comes). `oneWayDelayMs`
 * holds every chunk that long each way (a distant link: twice that per round trip).
 */
export interface TcpProxy {
  readonly port: number;
  blackhole(): void;
  cut(): void;
  cutOnNextUp(): void;
  heal(): void;
  /** Bytes relayed from the target to clients so far. */
  bytesDown(): number;
  close(): Promise<void>;
}

export async function startTcpProxy(
  targetPort: number,
  options: { oneWayDelayMs?: number } = {},
): Promise<TcpProxy> {
  const delayMs = options.oneWayDelayMs ?? 0;
  const later = (send: () => void): void => {
    if (delayMs > 0) setTimeout(send, delayMs);
    else send();
  };
  const pairs = new Set<[Socket, Socket]>();
  let blackholed = false;
  let cutArmed = false;
  let down = 0;
  const server = createServer((client) => {
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort });
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    if (blackholed) {
      client.pause();
      upstream.pause();
    }
    const forget = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk) => {
      if (cutArmed) {
        cutArmed = false;
        cut();
        return;
      }
      later(() => upstream.write(chunk));
    });
    upstream.on('data', (chunk) => {
      down += chunk.length;
      later(() => client.write(chunk));
    });
    client.on('error', forget);
    upstream.on('error', forget);
    client.on('close', forget);
    upstream.on('close', forget);
  });
  function cut(): void {
    for (const [a, b] of pairs) {
      a.resetAndDestroy();
      b.resetAndDestroy();
    }
    pairs.clear();
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    // Paused sockets stop reading: bytes wait in kernel buffers like packets on a dead
    // link, and flow again on heal() as TCP would retransmit them.
    blackhole: () => {
      blackholed = true;
      for (const [a, b] of pairs) {
        a.pause();
        b.pause();
      }
    },
    cut,
    cutOnNextUp: () => {
      cutArmed = true;
    },
    heal: () => {
      blackholed = false;
      for (const [a, b] of pairs) {
        a.resume();
        b.resume();
      }
    },
    bytesDown: () => down,
    close: async () => {
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * SshExecutor options for the client key `sshd` authorizes, pinned to its host key, on the
 * system clock and production timing; `overrides` win (another port: a proxy in between).
 */
export function executorOptions(
  sshd: Sshd,
  overrides: Partial<SshExecutorOptions> = {},
): SshExecutorOptions {
  return {
    host: sshd.host,
    port: sshd.port,
    username: sshd.user,
    privateKey: sshd.clientPrivateKey,
    hostPublicKey: sshd.hostPublicKey,
    clock: systemClock,
    timing: scaleTiming(1),
    ...overrides,
  };
}
