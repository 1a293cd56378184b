/**
 * The local target: commands run under `sh -c` on this machine, each in its
 * own process group so an abort or a timeout kills everything it started.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:fs';
import { lstat, mkdir, open, readdir, realpath, rename, unlink } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { systemClock, type Clock } from '../clock';
import {
  CommandRunner,
  DEFAULT_MAX_OUTPUT_BYTES,
  ExecError,
  type CommandOptions,
  type DownloadOptions,
  type ExecResult,
  type Executor,
  type UploadOptions,
} from './executor';
import { abortedError, fsError, throwIfAborted } from './failures';
import { downloadFiles, type ReadSource, type SourceFile } from './download';
import { ensureRealDir } from './localFiles';

/** How long a killed command's group gets after TERM before KILL. */
const KILL_GRACE_MS = 1_000;

export interface LocalExecutorOptions {
  clock?: Clock;
}

/** Collects a stream's bytes up to a cap. */
export class Capped {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(private readonly maxBytes: number) {}

  push(chunk: Buffer): void {
    const room = this.maxBytes - this.size;
    if (room <= 0) {
      if (chunk.length > 0) this.truncated = true;
      return;
    }
    if (chunk.length > room) this.truncated = true;
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.chunks.push(kept);
    this.size += kept.length;
  }

  get bytes(): Buffer {
    return Buffer.concat(this.chunks, this.size);
  }
}

/**
 * The environment of every command the local target runs, the job (the workspace's own code)
 * included: this process's, without the secrets the product holds: every
 * `OVERBRAINER_RUNPOD__*` variable (the API key, the API's address) and Runpod's own
 * `RUNPOD_API_KEY`. Everything else (PATH, HOME, a token the user exported for their job) stays.
 */
export function localCommandEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(env).filter(
      ([name]) => !name.startsWith('OVERBRAINER_RUNPOD__') && name !== 'RUNPOD_API_KEY',
    ),
  );
}

export class LocalExecutor extends CommandRunner implements Executor {
  readonly kind = 'local' as const;
  private readonly clock: Clock;
  private readonly running = new Set<ChildProcess>();
  private disposed = false;

  constructor(options: LocalExecutorOptions = {}) {
    super();
    this.clock = options.clock ?? systemClock;
  }

  protected async runCommand(command: string, options: CommandOptions): Promise<ExecResult> {
    if (this.disposed) throw new ExecError('aborted', 'the local executor was disposed');
    throwIfAborted(options.signal, 'the command');
    const maxBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    const stdout = new Capped(maxBytes);
    const stderr = new Capped(maxBytes);
    let child: ChildProcess;
    try {
      // detached: its own session and process group, so a kill reaches its children too.
      child = spawn('/bin/sh', ['-c', command], {
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
        env: localCommandEnv(process.env),
      });
    } catch (error) {
      throw fsError(error, 'starting /bin/sh');
    }
    this.running.add(child);
    const closed = new Promise<{ code: number | null; signal: string | null }>(
      (resolve, reject) => {
        child.once('error', reject);
        child.once('close', (code, signal) => resolve({ code, signal }));
      },
    );
    child.stdout?.on('data', (chunk: Buffer) =>
      options.onStdout ? options.onStdout(chunk) : stdout.push(chunk),
    );
    child.stderr?.on('data', (chunk: Buffer) => {
      options.onStderr?.(chunk);
      stderr.push(chunk);
    });
    // A command that never reads its stdin must not fail the run with EPIPE.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(options.stdin ?? '');

    let finished = false;
    void closed.then(
      () => (finished = true),
      () => (finished = true),
    );
    let ended: 'aborted' | 'timeout' | undefined;
    let killing: Promise<void> | undefined;
    // Only a command still running is killed: a finished group's id may belong to someone else.
    const end = (why: 'aborted' | 'timeout'): void => {
      if (finished || ended) return;
      ended = why;
      killing = this.killGroup(child, closed);
    };
    const onAbort = (): void => end('aborted');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const timer = new AbortController();
    if (options.timeoutMs !== undefined) {
      this.clock.sleep(options.timeoutMs, timer.signal).then(
        () => end('timeout'),
        () => undefined,
      );
    }

    try {
      const result = await closed;
      await killing;
      if (ended === 'aborted') throw abortedError('the command', options.signal?.reason);
      if (ended === 'timeout') {
        throw new ExecError('timeout', `the command did not finish within ${options.timeoutMs} ms`);
      }
      return {
        code: result.code,
        signal: result.signal,
        stdout: stdout.bytes,
        stderr: stderr.bytes,
        truncated: stdout.truncated || stderr.truncated,
      };
    } catch (error) {
      throw fsError(error, 'running a command');
    } finally {
      timer.abort();
      options.signal?.removeEventListener('abort', onAbort);
      this.running.delete(child);
    }
  }

  /** TERM to the whole group, KILL after a grace; resolves once the command is gone. */
  private async killGroup(child: ChildProcess, closed: Promise<unknown>): Promise<void> {
    const pid = child.pid;
    if (pid === undefined) return;
    const signalGroup = (signal: NodeJS.Signals): void => {
      try {
        process.kill(-pid, signal);
      } catch {
        // The group is already gone.
      }
    };
    signalGroup('SIGTERM');
    const graceOver = new AbortController();
    const exited = closed.then(
      () => 'exited' as const,
      () => 'exited' as const,
    );
    const grace = this.clock.sleep(KILL_GRACE_MS, graceOver.signal).then(
      () => 'grace' as const,
      () => 'exited' as const,
    );
    if ((await Promise.race([exited, grace])) === 'grace') signalGroup('SIGKILL');
    graceOver.abort();
    // The group may outlive its leader: make sure every member got the KILL.
    signalGroup('SIGKILL');
    await exited;
  }

  async readRange(path: string, offset: number, maxBytes: number): Promise<Buffer> {
    let handle;
    try {
      handle = await open(path, 'r');
    } catch (error) {
      throw fsError(error, `reading ${path}`);
    }
    try {
      const buffer = Buffer.allocUnsafe(Math.max(0, maxBytes));
      let done = 0;
      while (done < buffer.length) {
        const { bytesRead } = await handle.read(buffer, done, buffer.length - done, offset + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      return buffer.subarray(0, done);
    } catch (error) {
      throw fsError(error, `reading ${path}`);
    } finally {
      await handle.close();
    }
  }

  async writeFileAtomic(path: string, data: string | Buffer): Promise<void> {
    await writeFileAtomicLocal(path, data);
  }

  async upload(localDir: string, remoteDir: string, options: UploadOptions): Promise<void> {
    throwIfAborted(options.signal, 'the upload');
    try {
      await mkdir(remoteDir, { recursive: true });
      if ((await realpath(localDir)) === (await realpath(remoteDir))) return; // runs in place
      await copyTree(localDir, remoteDir, '', options);
    } catch (error) {
      throw fsError(error, `copying ${localDir} to ${remoteDir}`);
    }
  }

  async download(
    remoteDir: string,
    localDir: string,
    files: readonly string[],
    options: DownloadOptions = {},
  ): Promise<void> {
    await downloadFiles(
      localSource,
      remoteDir,
      localDir,
      files,
      options,
      { files: 8, chunkBytes: 1024 * 1024, windowPerFile: 2, readsInFlight: 16 },
      fsError,
    );
  }

  dispose(): void {
    this.disposed = true;
    for (const child of this.running) {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    this.running.clear();
  }
}

/** Local files as a download source (links are not followed: such a file counts as gone). */
const localSource: ReadSource = {
  async open(path: string): Promise<SourceFile | undefined> {
    let handle;
    try {
      handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ELOOP') return undefined;
      throw error;
    }
    const stats = await handle.stat();
    if (!stats.isFile()) {
      await handle.close();
      return undefined;
    }
    const opened = handle;
    return {
      size: stats.size,
      read: async (position, length, into) => {
        const buffer = into && into.length >= length ? into : Buffer.allocUnsafe(length);
        const { bytesRead } = await opened.read(buffer, 0, length, position);
        return buffer.subarray(0, bytesRead);
      },
      close: () => opened.close(),
    };
  },
};

/** Temp file in the same directory, fsync, rename: readers see the old or the new file. */
export async function writeFileAtomicLocal(path: string, data: string | Buffer): Promise<void> {
  const dir = dirname(path);
  const temp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await mkdir(dir, { recursive: true });
    const handle = await open(
      temp,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o644,
    );
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw fsError(error, `writing ${path}`);
  }
}

/** Copies the tree below `from/relative` into `to/relative`, never through a link. */
async function copyTree(
  from: string,
  to: string,
  relative: string,
  options: UploadOptions,
): Promise<void> {
  const exclude = new Set(options.exclude);
  const names = await readdir(relative ? join(from, relative) : from);
  for (const name of names.sort()) {
    throwIfAborted(options.signal, 'the upload');
    if (!relative && exclude.has(name)) continue;
    const path = relative ? `${relative}/${name}` : name;
    const source = join(from, path);
    const target = join(to, path);
    const stats = await lstat(source);
    if (stats.isSymbolicLink()) {
      options.onWarning?.(`not uploaded: ${path} is a symlink (links are never followed)`);
    } else if (stats.isDirectory()) {
      await ensureRealDir(target);
      await copyTree(from, to, path, options);
    } else if (stats.isFile()) {
      await copyFileNoFollow(source, target, stats.mode & 0o777);
    } else {
      options.onWarning?.(`not uploaded: ${path} is not a regular file or a directory`);
    }
  }
}

async function copyFileNoFollow(source: string, target: string, mode: number): Promise<void> {
  const input = await open(source, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;
    let output;
    try {
      output = await open(target, flags, mode);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ELOOP') throw error;
      // A link where the file goes: replace the link, never write through it.
      await unlink(target);
      output = await open(target, flags, mode);
    }
    try {
      const buffer = Buffer.allocUnsafe(1024 * 1024);
      for (;;) {
        const { bytesRead } = await input.read(buffer, 0, buffer.length, null);
        if (bytesRead === 0) break;
        await output.write(buffer, 0, bytesRead);
      }
      await output.chmod(mode);
    } finally {
      await output.close();
    }
  } finally {
    await input.close();
  }
}
