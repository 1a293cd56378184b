/**
 * The job integration files' scaffolding: the shells the job scripts run under (the system sh,
 * dash, busybox sh with only its applets: each one missing fails the file), an executor per shell,
 * python3, and waits on a job's processes and status.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  symlinkSync,
} from 'node:fs';
import path from 'node:path';
import type { JobStatus, TrainMetric } from '../../src/core/events';
import type {
  ExecOptions,
  ExecResult,
  Executor,
  StreamOptions,
} from '../../src/core/exec/executor';
import { LocalExecutor } from '../../src/core/exec/local';
import { jobStatus, shQuote } from '../../src/core/train/job';
import { parseMetricLine } from '../../src/core/train/metrics';

export const ROOT = path.resolve(__dirname, '..', '..');
export const EXAMPLE = path.join(ROOT, 'examples', 'tiny');

/** The real interpreter behind `python3` (a pyenv shim would cost a second per start). */
export function realPython(): string | null {
  const probe = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], {
    encoding: 'utf8',
  });
  return probe.status === 0 ? probe.stdout.trim() : null;
}

export function which(name: string): string | null {
  const probe = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  return probe.status === 0 ? probe.stdout.trim() : null;
}

/**
 * Runs every command under a chosen shell, through the real LocalExecutor
 * (its process groups, aborts and reads): `PATH=<path> exec <shell> -c <command>`.
 */
export class ShellExecutor implements Executor {
  readonly kind = 'local' as const;
  constructor(
    private readonly inner: LocalExecutor,
    private readonly shell: string,
    private readonly pathValue: string,
  ) {}

  private wrap(command: string): string {
    return `PATH=${shQuote(this.pathValue)}; export PATH; exec ${this.shell} -c ${shQuote(command)}`;
  }
  exec(command: string, options?: ExecOptions): Promise<ExecResult> {
    return this.inner.exec(this.wrap(command), options);
  }
  stream(command: string, options: StreamOptions): Promise<ExecResult> {
    return this.inner.stream(this.wrap(command), options);
  }
  readRange(p: string, offset: number, maxBytes: number): Promise<Buffer> {
    return this.inner.readRange(p, offset, maxBytes);
  }
  writeFileAtomic(p: string, data: string | Buffer): Promise<void> {
    return this.inner.writeFileAtomic(p, data);
  }
  upload(...args: Parameters<Executor['upload']>): Promise<void> {
    return this.inner.upload(...args);
  }
  download(...args: Parameters<Executor['download']>): Promise<void> {
    return this.inner.download(...args);
  }
  dispose(): void {}
}

/** PIDs of live (non-zombie) processes in process group `pgid`, from /proc. */
export function liveGroupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
    if (fields[0] !== 'Z' && fields[0] !== 'X' && Number(fields[2]) === pgid)
      members.push(Number(entry));
  }
  return members;
}

/** Live processes whose working directory is under `dir` (a job or a tail left behind). */
export function liveProcessesIn(dir: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cwd = readlinkSync(`/proc/${entry}/cwd`);
      if (cwd === dir || cwd.startsWith(`${dir}/`)) found.push(Number(entry));
    } catch {
      // Gone, a zombie, or not ours to look at.
    }
  }
  return found;
}

export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | null>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function waitForStatus(
  executor: Executor,
  runDir: string,
  timeoutMs = 30_000,
): Promise<JobStatus> {
  return waitFor('the job to end', timeoutMs, async () => {
    const status = await jobStatus(executor, runDir);
    return status.kind === 'running' ? null : status;
  });
}

export function metricsOf(file: string): TrainMetric[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .flatMap((line) => {
      const parsed = parseMetricLine(Buffer.from(line));
      return parsed.kind === 'metric' ? [parsed.metric] : [];
    });
}

export const python = realPython();
/** A shell the scripts must run under: missing, the file fails (it does not drop the shell). */
export function requiredShell(name: string): string {
  const found = which(name);
  if (found === null) {
    throw new Error(`${name} is not on PATH: install it (\`npm run test:integration\` does)`);
  }
  return found;
}
export const busybox = requiredShell('busybox');
export const dash = requiredShell('dash');

export interface Variant {
  name: string;
  make: (local: LocalExecutor, root: string) => Executor;
}

/** A directory whose only commands are busybox applets (and python3 for the trainer). */
export function busyboxBin(root: string): string {
  const bin = path.join(root, 'busybox-bin');
  mkdirSync(bin);
  const applets = spawnSync(busybox, ['--list'], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter(Boolean);
  for (const applet of applets) symlinkSync(busybox, path.join(bin, applet));
  symlinkSync(python as string, path.join(bin, 'python3'));
  // So the launcher's path without nohup (busybox has none) is the one tested here.
  assert.ok(!existsSync(path.join(bin, 'nohup')));
  return bin;
}

export const systemSh = realpathSync('/bin/sh');
export const variants: Variant[] = [
  { name: `sh (${systemSh}), through the LocalExecutor`, make: (local) => local },
];
// Where /bin/sh is dash already, the run above is the dash run.
if (realpathSync(dash) !== systemSh) {
  variants.push({
    name: 'dash',
    make: (local, root) => {
      const bin = path.join(root, 'dash-bin');
      mkdirSync(bin);
      symlinkSync(dash, path.join(bin, 'sh'));
      return new ShellExecutor(
        local,
        shQuote(dash),
        `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`,
      );
    },
  });
}
variants.push({
  name: 'busybox sh (busybox applets only)',
  make: (local, root) => new ShellExecutor(local, `${shQuote(busybox)} sh`, busyboxBin(root)),
});
