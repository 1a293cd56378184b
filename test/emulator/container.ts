/**
 * A pod's container: its `cmd` run as PID 1 of a fresh Linux PID namespace, in a private mount
 * namespace where the pod's own directories are bind-mounted over the PRODUCTION paths
 * (/workspace, /etc/overbrainer, /etc/ssh, /root/.ssh) and /run is a fresh tmpfs. The real
 * bootstrap, the real watchdog and the SSH sessions of the pod's sshd all see the pod's own
 * filesystem at the paths a real pod has, and nothing of the pod leaks onto the host's paths.
 *
 *   node ─ setpriv --pdeathsig KILL ─exec→ unshare --mount --pid --fork --mount-proc
 *            --propagation private --kill-child=SIGKILL ─fork→ [PID 1] bash init.sh ─exec→ cmd
 *
 * Killing PID 1 of the namespace makes the kernel kill every process of the pod. Nothing of a pod
 * can outlive the emulator: if node dies (even SIGKILL), `--pdeathsig` kills unshare, and
 * unshare's `--kill-child` kills the namespace's PID 1, which takes every pod process with it;
 * the emulator also kills every container synchronously on process exit.
 *
 * Requires root (mount and PID namespaces), util-linux `unshare`/`setpriv`, and the host
 * mountpoints, which `ensureHostMountpoints` creates.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createConnection } from 'node:net';

/** Production paths the pod's own directories are mounted over. */
export const POD_PATHS = {
  workspace: '/workspace',
  etcOverbrainer: '/etc/overbrainer',
  etcSsh: '/etc/ssh',
  /**
   * The pod's own home: an image's /root, not the host's (whose shell rc files, e.g. pyenv's,
   * would run in every SSH session and leave locks behind when a pod is deleted mid-session).
   */
  rootHome: '/root',
  rootSsh: '/root/.ssh',
} as const;

export interface BindMount {
  /** Host directory. */
  source: string;
  /** Path inside the pod (created in the pod's view if missing). */
  target: string;
}

export interface ContainerSpec {
  /** The pod's argv, e.g. `["bash", "-c", "<bootstrap>"]`. */
  cmd: string[];
  /** The complete environment of the pod's command. */
  env: Record<string, string>;
  /** Mounts in order: the production paths first, then volumes (which may sit under them). */
  mounts: BindMount[];
  /** The init script (written by the caller with `initScript`). */
  initScriptPath: string;
  /** stdout and stderr of the pod (appended). */
  logPath: string;
  /** A network namespace to run in (`/proc/<pid>/ns/net`): a cluster member's. Default: the host's. */
  netnsPath?: string;
}

export interface ContainerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Creates the host mountpoints the pod mounts go over (the host's own content is untouched). */
export function ensureHostMountpoints(): void {
  for (const path of [POD_PATHS.workspace, POD_PATHS.etcOverbrainer, POD_PATHS.rootSsh]) {
    mkdirSync(path, { recursive: true, mode: 0o700 });
  }
}

function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/**
 * `mkdir -p` of a mount's target, only when it is not a directory yet: the production paths and
 * most targets exist, and each pod's start would otherwise start a process per mount for nothing.
 */
function mkdirSh(target: string): string {
  const q = shellQuote(target);
  return `[ -d ${q} ] || mkdir -p ${q} || fail mkdir ${q}`;
}

/**
 * The script PID 1 runs before it becomes the pod's command: mounts, then `exec "$@"`. On a mount
 * failure it exits 125 (nothing of the pod has run; the emulator marks the pod ERROR).
 */
export function initScript(
  mounts: BindMount[],
  tmpfs: readonly { target: string; sizeBytes: number }[] = [],
  /** Further setup lines (they may call `fail`), after the mounts: the GPU stand-in. */
  extra: readonly string[] = [],
): string {
  const lines = [
    '# Written by the Runpod emulator: the pod container init. Runs as PID 1 of the pod PID',
    '# namespace, in its private mount namespace, then becomes the pod command.',
    'fail() { echo "runpod-emulator: container setup failed: $*" >&2; exit 125; }',
  ];
  for (const m of mounts) {
    lines.push(
      mkdirSh(m.target),
      `mount --bind ${shellQuote(m.source)} ${shellQuote(m.target)} || fail bind ${shellQuote(m.target)}`,
    );
  }
  for (const t of tmpfs) {
    // A small disk of its own (the quota a job can fill), over what the binds put there.
    lines.push(
      mkdirSh(t.target),
      `mount -t tmpfs -o size=${Math.max(4096, Math.floor(t.sizeBytes))},mode=0755,nosuid,nodev tmpfs ${shellQuote(t.target)} || fail tmpfs ${shellQuote(t.target)}`,
    );
  }
  lines.push(
    ...extra,
    'mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run || fail tmpfs /run',
    'cd / || fail cd',
    'exec "$@"',
    '',
  );
  return lines.join('\n');
}

/**
 * Host pids whose PID namespace is `namespace` (`pid:[…]`), from /proc. Only meaningful while
 * that namespace lives: the kernel reuses the inode of a dead namespace for a new one. To tell
 * whether a pod's processes are gone, use {@link ProcessSnapshot}.
 */
export function processesInPidNamespace(namespace: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/ns/pid`) === namespace) pids.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return pids;
}

/** A process, told apart from a later one with the same pid by its start time. */
export interface ProcessIdentity {
  pid: number;
  /** Field 22 of /proc/<pid>/stat: start time in clock ticks since boot. */
  startTicks: number;
}

function readStat(pid: number): { state: string; startTicks: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces and parentheses).
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0] ?? '', startTicks: Number(rest[19]) };
  } catch {
    return undefined;
  }
}

export function processIdentity(pid: number): ProcessIdentity | undefined {
  const stat = readStat(pid);
  return stat ? { pid, startTicks: stat.startTicks } : undefined;
}

/** Whether that very process still runs (a zombie has stopped running). */
export function isRunning(id: ProcessIdentity): boolean {
  const stat = readStat(id.pid);
  return (
    stat !== undefined &&
    stat.startTicks === id.startTicks &&
    stat.state !== 'Z' &&
    stat.state !== 'X'
  );
}

/** Whether a host pid is a live (non-zombie) process. */
export function isLiveProcess(pid: number): boolean {
  const stat = readStat(pid);
  return stat !== undefined && stat.state !== 'Z' && stat.state !== 'X';
}

/**
 * The processes of a PID namespace at one moment, to check later that none of them runs any
 * more. When a namespace's PID 1 has ended, the kernel has already killed and reaped every other
 * process of it, so "init is gone" also covers processes started after the snapshot.
 */
export class ProcessSnapshot {
  private constructor(
    readonly processes: ProcessIdentity[],
    /** The namespace's PID 1, if it was alive at the snapshot. */
    readonly init: ProcessIdentity | undefined,
  ) {}

  static of(namespace: string): ProcessSnapshot {
    const processes: ProcessIdentity[] = [];
    let init: ProcessIdentity | undefined;
    for (const pid of processesInPidNamespace(namespace)) {
      const id = processIdentity(pid);
      if (!id || !isRunning(id)) continue;
      processes.push(id);
      if (nsPid(pid) === 1) init = id;
    }
    return new ProcessSnapshot(processes, init);
  }

  /** The processes of the snapshot still running (empty when the pod is truly gone). */
  running(): ProcessIdentity[] {
    return this.processes.filter(isRunning);
  }

  /** Whether the namespace itself is over (its PID 1 ended). */
  namespaceEnded(): boolean {
    return this.init === undefined || !isRunning(this.init);
  }
}

/** The pid a host process has inside its own (innermost) PID namespace. */
function nsPid(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const line = /^NSpid:\s+(.*)$/m.exec(status)?.[1];
    const last = line?.trim().split(/\s+/).pop();
    return last === undefined ? undefined : Number(last);
  } catch {
    return undefined;
  }
}

function sleepReal(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export class Container {
  /** Host pid of `unshare` (our child). */
  readonly unsharePid: number;
  /** Host pid of the namespace's PID 1, once known. */
  initPid: number | undefined;
  /** That PID 1, told apart from a later process with the same pid. */
  init: ProcessIdentity | undefined;
  /** `pid:[inode]` of the pod's PID namespace, once known. */
  pidNamespace: string | undefined;
  /** Resolves when unshare (and so the namespace's PID 1) has exited. */
  readonly exited: Promise<ContainerExit>;
  private exitInfo: ContainerExit | undefined;

  private constructor(private readonly child: ChildProcess) {
    if (child.pid === undefined) throw new Error('container did not start');
    this.unsharePid = child.pid;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        resolve(this.exitInfo);
      });
    });
  }

  /** Spawns the container and waits until its PID 1 exists (or it already ended). */
  static async start(spec: ContainerSpec): Promise<Container> {
    const log = openSync(spec.logPath, 'a');
    let child: ChildProcess;
    try {
      child = spawn(
        'setpriv',
        [
          '--pdeathsig',
          'KILL',
          '--',
          ...(spec.netnsPath === undefined ? [] : ['nsenter', `--net=${spec.netnsPath}`, '--']),
          'unshare',
          '--mount',
          '--pid',
          '--fork',
          '--mount-proc',
          '--propagation',
          'private',
          '--kill-child=SIGKILL',
          '--',
          'bash',
          spec.initScriptPath,
          ...spec.cmd,
        ],
        // Its own session and process group, as a container's command has; the env is passed as
        // env (never in argv, which any local user can read).
        { env: spec.env, stdio: ['ignore', log, log], detached: true },
      );
    } finally {
      closeSync(log);
    }
    const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
    await Promise.race([
      spawnError.then((e) => {
        throw new Error(`cannot start the pod container (setpriv/unshare): ${e.message}`);
      }),
      new Promise<void>((resolve) => child.once('spawn', () => resolve())),
    ]);
    const container = new Container(child);
    await container.findInit();
    return container;
  }

  get hasExited(): boolean {
    return this.exitInfo !== undefined;
  }

  private async findInit(): Promise<void> {
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && !this.hasExited) {
      try {
        const children = readFileSync(
          `/proc/${this.unsharePid}/task/${this.unsharePid}/children`,
          'utf8',
        ).trim();
        const first = children.split(/\s+/)[0];
        if (first) {
          const pid = Number(first);
          const namespace = readlinkSync(`/proc/${pid}/ns/pid`);
          // Until unshare's child has its own namespace it is still in ours: keep looking.
          const identity = processIdentity(pid);
          if (namespace !== readlinkSync('/proc/self/ns/pid') && identity) {
            this.initPid = pid;
            this.init = identity;
            this.pidNamespace = namespace;
            return;
          }
        }
      } catch {
        // not forked yet, or already gone
      }
      await sleepReal(2);
    }
  }

  /** Host pids of every live process of the pod (none once its PID 1 has ended). */
  processes(): number[] {
    // A dead namespace's inode may already name another pod's namespace: only look while ours
    // demonstrably lives.
    if (!this.pidNamespace || !this.init || !isRunning(this.init)) return [];
    return processesInPidNamespace(this.pidNamespace).filter(isLiveProcess);
  }

  /**
   * Kills every process of the pod: SIGKILL to the namespace's PID 1, after which the kernel
   * kills and reaps every other process of the namespace before PID 1 itself is reaped. Resolves
   * once unshare has reaped it; throws if the pod's PID 1 still runs after the fallbacks.
   */
  async kill(): Promise<void> {
    if (this.hasExited) return;
    if (this.init && isRunning(this.init)) this.signal(this.init.pid);
    else if (!this.init) this.signal(this.unsharePid); // not forked yet: --kill-child does it
    const timedOut = await Promise.race([
      this.exited.then(() => false),
      sleepReal(3000).then(() => true),
    ]);
    if (!timedOut) return;
    // unshare itself is stuck: killing it makes --kill-child (PDEATHSIG) kill PID 1.
    this.signal(this.unsharePid);
    await this.exited;
    for (let i = 0; i < 200 && this.init && isRunning(this.init); i++) await sleepReal(5);
    if (this.init && isRunning(this.init)) {
      throw new Error(`the pod's PID 1 (host pid ${this.init.pid}) survived SIGKILL`);
    }
  }

  private signal(pid: number): void {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }

  /**
   * Freezes every process of the pod (SIGSTOP), as a host that stops answering: its sshd accepts
   * TCP (the kernel does) and never says a word, open sessions go silent, the job makes no step.
   */
  freeze(): void {
    if (this.hasExited || this.pidNamespace === undefined) return;
    for (const pid of processesInPidNamespace(this.pidNamespace)) {
      try {
        process.kill(pid, 'SIGSTOP');
      } catch {
        // gone meanwhile
      }
    }
  }

  /** Synchronous last resort (process exit, a crash fault): SIGKILL PID 1 (else unshare). */
  killNow(): void {
    if (this.hasExited) return;
    if (this.init) {
      if (isRunning(this.init)) this.signal(this.init.pid);
    } else {
      this.signal(this.unsharePid);
    }
  }
}

/**
 * Whether an SSH server answers on 127.0.0.1:`port`: a TCP connection that receives an
 * `SSH-` banner within `timeoutMs`.
 */
export function probeSshBanner(port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let received = '';
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (received.startsWith('SSH-')) done(true);
      else if (received.length >= 4) done(false);
    });
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
  });
}
