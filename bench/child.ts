/**
 * A benchmark's measured side in a process of its own, run the way the product runs: its entry
 * is bundled by esbuild (as dist/ is) and started with plain node. So the CPU figures hold only
 * the client's work: neither the TypeScript loader (tsx alone costs 0.5–0.9 s of CPU per idle
 * minute in a process) nor the benchmark's writer counts in them. Parameters and results go over
 * the IPC channel, never the command line (they include a private key).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { buildSync } from 'esbuild';

/** Where bundles go: inside the checkout, so their packages resolve from node_modules. */
const OUT_DIR = join(__dirname, '..', '.bench-tmp');

const built = new Set<string>();

/**
 * BENCH_CHILD_SSH2=product: ssh2 bundled into the child as dist/vendor-ssh2.js bundles it, whose
 * require of its native crypto binding (sshcrypto.node) then finds nothing, as in a .vsix (no
 * node_modules): ssh2 falls back to Node's crypto (for AES-GCM a decipher made per packet), as
 * the product does. Default: ssh2 from node_modules, with its binding.
 */
const ssh2AsProduct = process.env.BENCH_CHILD_SSH2 === 'product';

/** Every package of package.json but ssh2: external when ssh2 is bundled (as in the product). */
function packagesButSsh2(): string[] {
  const manifest = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
  };
  return Object.keys({ ...manifest.dependencies, ...manifest.devDependencies })
    .filter((name) => name !== 'ssh2')
    .concat(['cpu-features', '*.node']);
}

/** `entry` (a bench file whose main block runs `--child`) bundled once per process. */
function bundle(entry: string): string {
  // Named by the entry's path too: `--compare` bundles the same file of another tree.
  const tag = createHash('sha256')
    .update(`${entry}${ssh2AsProduct ? ' with ssh2 as in the product' : ''}`)
    .digest('hex')
    .slice(0, 8);
  const outfile = join(OUT_DIR, `${basename(entry).replace(/\.ts$/, '')}-${tag}.cjs`);
  if (!built.has(entry)) {
    mkdirSync(OUT_DIR, { recursive: true });
    buildSync({
      entryPoints: [entry],
      bundle: true,
      platform: 'node',
      target: 'node20',
      format: 'cjs',
      ...(ssh2AsProduct
        ? {
            external: packagesButSsh2(),
            mainFields: ['module', 'main'],
            // ssh2 from this checkout's node_modules, whichever tree the entry is in (--compare).
            nodePaths: [join(__dirname, '..', 'node_modules')],
          }
        : { packages: 'external' as const }),
      outfile,
      logLevel: 'warning',
    });
    built.add(entry);
  }
  return outfile;
}

/** A message of the parent ↔ child protocol: a type and its fields. */
export interface Message {
  type: string;
  [field: string]: unknown;
}

export interface BenchChild {
  process: ChildProcess;
  send(message: Message): void;
  /** The next message of `type` (rejects when the child ends first or after `timeoutMs`). */
  next<T extends Message>(type: string, timeoutMs: number): Promise<T>;
  /** Waits for the child to end; rejects on a non-zero exit. */
  done(): Promise<void>;
}

/** Messages as they come, taken by type (none lost to a listener attached late). */
class Inbox {
  private readonly queue: Message[] = [];
  private readonly waiters: (() => void)[] = [];
  private endedAs: string | null = null;

  push(message: Message): void {
    this.queue.push(message);
    this.wake();
  }

  end(why: string): void {
    this.endedAs = why;
    this.wake();
  }

  private wake(): void {
    this.waiters.splice(0).forEach((w) => w());
  }

  async next<T extends Message>(type: string, timeoutMs: number): Promise<T> {
    const until = performance.now() + timeoutMs;
    for (;;) {
      const index = this.queue.findIndex((m) => m.type === type);
      if (index >= 0) return this.queue.splice(index, 1)[0] as T;
      if (this.endedAs !== null) throw new Error(`${this.endedAs} before '${type}'`);
      const left = until - performance.now();
      if (left <= 0) throw new Error(`timed out waiting for '${type}'`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }
}

/**
 * Starts `entry` bundled, with `--child` (and `--expose-gc` when asked). Node options for the
 * child alone (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile the measured side, which
 * NODE_OPTIONS does not allow) come from BENCH_CHILD_NODE_ARGS, split at spaces.
 */
export function forkBundled(entry: string, options: { exposeGc?: boolean } = {}): BenchChild {
  const extra = (process.env.BENCH_CHILD_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');
  const proc = fork(bundle(entry), ['--child'], {
    execArgv: [...(options.exposeGc ? ['--expose-gc'] : []), ...extra],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const inbox = new Inbox();
  proc.on('message', (m) => inbox.push(m as Message));
  const closed = new Promise<number | null>((resolve) =>
    proc.on('exit', (code) => {
      inbox.end(`the child ended (exit ${code})`);
      resolve(code);
    }),
  );
  return {
    process: proc,
    send: (message) => proc.send(message),
    next: (type, timeoutMs) => inbox.next(type, timeoutMs),
    async done(): Promise<void> {
      const code = await closed;
      if (code !== 0) throw new Error(`the child failed (exit ${code})`);
    },
  };
}

let parentInbox: Inbox | null = null;

/** In the child: the parent's next message of `type` (messages are queued from the first call). */
export function fromParent<T extends Message>(type: string, timeoutMs = 3_600_000): Promise<T> {
  if (parentInbox === null) {
    const inbox = (parentInbox = new Inbox());
    process.on('message', (m) => inbox.push(m as Message));
    process.on('disconnect', () => inbox.end('the parent went away'));
  }
  return parentInbox.next(type, timeoutMs);
}

/** In the child: a message to the parent. */
export function toParent(message: Message): void {
  process.send!(message);
}
