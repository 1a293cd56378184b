/**
 * Writing downloaded files on this machine without ever following or creating
 * a symlink: every directory below a base is created one level at a time and
 * checked with lstat, files are opened with O_NOFOLLOW, and partial files
 * keep their prefix so a dropped transfer resumes instead of starting over.
 */
import { closeSync, constants, openSync, writeSync, type Stats } from 'node:fs';
import { lstat, mkdir, open, readdir, rename, rm, unlink, type FileHandle } from 'node:fs/promises';
import { createHash, type Hash } from 'node:crypto';
import { join, posix } from 'node:path';
import { ExecError } from './executor';
import { fsError } from './failures';
import { resolveInside, unsafeRelativePath } from './pathRules';

const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW;
const HASH_READ_BYTES = 1024 * 1024;
/** A download's chunks smaller than this are gathered into blocks of SINK_BLOCK_BYTES. */
const SINK_COPY_BELOW_BYTES = 64 * 1024;
const SINK_BLOCK_BYTES = 1024 * 1024;
/** Blocks written behind at once per file (its memory: one more being filled). */
const SINK_BLOCKS_QUEUED = 2;

export { unsafeRelativePath } from './pathRules';

/** Throws an `io` ExecError naming the file and why when `path` breaks the path rules. */
export function assertSafeRelativePath(path: string): void {
  const reason = unsafeRelativePath(path);
  if (reason) {
    throw new ExecError('io', `refusing the file name ${JSON.stringify(path)}: it ${reason}`);
  }
}

/**
 * Directories below `base`, created on demand. A component that exists but is
 * a symlink or not a directory is refused: nothing is ever written through a
 * link, whoever planted it.
 */
export class SafeDirs {
  /** Directories made (or found real) below the base, by relative path. */
  private readonly known = new Set<string>();
  /** Those being made: files asked at once wait on one mkdir, not one each. */
  private readonly making = new Map<string, Promise<void>>();
  private baseChecked: Promise<void> | undefined;

  constructor(readonly base: string) {}

  /** The absolute path of `relative` below the base; a name that would land elsewhere throws. */
  pathOf(relative: string): string {
    try {
      return resolveInside(this.base, relative);
    } catch (error) {
      throw new ExecError('io', (error as Error).message);
    }
  }

  /** Makes sure the directory holding `relative` exists as real directories. */
  async ensureParent(relative: string): Promise<void> {
    const parent = posix.dirname(relative);
    await this.ensureBase();
    if (parent === '.' || this.known.has(parent)) return;
    let done = '';
    for (const segment of parent.split('/')) {
      done = done ? `${done}/${segment}` : segment;
      if (!this.known.has(done)) await this.ensureDir(done);
    }
  }

  /** One mkdir (and look) per directory however many wait on it; a failure is tried again later. */
  private ensureDir(relative: string): Promise<void> {
    let making = this.making.get(relative);
    if (making === undefined) {
      making = ensureRealDir(join(this.base, relative)).then(
        () => {
          this.known.add(relative);
          this.making.delete(relative);
        },
        (error: unknown) => {
          this.making.delete(relative);
          throw error;
        },
      );
      this.making.set(relative, making);
    }
    return making;
  }

  private ensureBase(): Promise<void> {
    this.baseChecked ??= (async () => {
      await mkdir(this.base, { recursive: true });
      await ensureRealDir(this.base);
    })();
    return this.baseChecked;
  }
}

/** Creates `path` as a directory, or checks that it already is one (not a symlink). */
export async function ensureRealDir(path: string): Promise<void> {
  try {
    await mkdir(path);
    return;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST')
      throw fsError(error, `creating ${path}`);
  }
  const stats = await lstat(path);
  if (stats.isSymbolicLink()) {
    throw new ExecError(
      'io',
      `refusing to write through ${path}: it is a symlink; move it away and try again`,
    );
  }
  if (!stats.isDirectory()) {
    throw new ExecError(
      'io',
      `cannot create the directory ${path}: a file is in the way; move it away and try again`,
    );
  }
}

async function lstatOrUndefined(path: string): Promise<Stats | undefined> {
  try {
    return await lstat(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw fsError(error, `looking at ${path}`);
  }
}

/** SHA-256 and size of a local file, streamed (never following a symlink). */
export async function sha256File(
  path: string,
  hash: Hash = createHash('sha256'),
): Promise<{ sha256: string; bytes: number }> {
  const bytes = await hashInto(path, hash);
  return { sha256: hash.digest('hex'), bytes };
}

async function hashInto(path: string, hash: Hash): Promise<number> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const buffer = Buffer.allocUnsafe(HASH_READ_BYTES);
    let total = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) return total;
      hash.update(buffer.subarray(0, bytesRead));
      total += bytesRead;
    }
  } finally {
    await handle.close();
  }
}

export interface SinkResult {
  bytes: number;
  sha256: string;
  resumedBytes: number;
}

/**
 * One file being downloaded: bytes go to `<partDir>/<file>` in order and into
 * a SHA-256 as they are written; `finish()` moves it to `<doneDir>/<file>`.
 * An existing partial file is resumed: its prefix is re-hashed (node cannot
 * persist a hash state) and the transfer continues at its size.
 */
export class FileSink {
  private handle: FileHandle | undefined;
  private hash: Hash = createHash('sha256');
  private written = 0;
  private resumed = 0;
  /** Small chunks gathered for one write (see {@link write}). */
  private block: Buffer | null = null;
  private blockUsed = 0;
  private freeBlocks: Buffer[] = [];
  /** Writes queued, oldest first; each removes itself when done. */
  private readonly writes: Promise<void>[] = [];
  /** The first write that failed: every later call throws it. */
  private failure: unknown;

  private constructor(
    private readonly doneDirs: SafeDirs,
    private readonly partDirs: SafeDirs,
    readonly file: string,
  ) {}

  /** Opens the partial file of `file`, resuming it when one is there. */
  static async open(doneDirs: SafeDirs, partDirs: SafeDirs, file: string): Promise<FileSink> {
    const sink = new FileSink(doneDirs, partDirs, file);
    await sink.openPart();
    return sink;
  }

  /** Where the transfer continues (the partial file's size). */
  get offset(): number {
    return this.written;
  }

  get resumedBytes(): number {
    return this.resumed;
  }

  private get partPath(): string {
    return this.partDirs.pathOf(this.file);
  }

  private async openPart(): Promise<void> {
    await this.partDirs.ensureParent(this.file);
    const path = this.partPath;
    const existing = await lstatOrUndefined(path);
    if (existing && !existing.isFile()) {
      // A directory or link left by an older listing: it only ever held our own partials.
      await rm(path, { recursive: true, force: true });
    } else if (existing) {
      this.resumed = await hashInto(path, this.hash);
      this.written = this.resumed;
    }
    try {
      this.handle = await open(path, WRITE_FLAGS | constants.O_APPEND, 0o644);
    } catch (error) {
      throw fsError(error, `writing ${path}`);
    }
  }

  /** Starts over (the remote file is shorter than what we have: it changed). */
  async restart(): Promise<void> {
    this.block = null;
    this.blockUsed = 0;
    await this.drain(0);
    await this.handle?.truncate(0);
    this.hash = createHash('sha256');
    this.written = 0;
    this.resumed = 0;
  }

  /**
   * Appends the next bytes of the file. A small chunk (an SSH packet's worth) is copied into a
   * block and the call returns at once; full blocks are written behind, in order, up to
   * {@link SINK_BLOCKS_QUEUED} at once (a write per 32 KiB packet, each waited for, held a
   * stream to a fraction of what the link carries). A bigger chunk is written before the call
   * returns (its buffer may be reused then). A failed write fails the next call.
   */
  async write(chunk: Buffer): Promise<void> {
    if (!this.handle) throw new ExecError('io', `${this.partPath} is closed`);
    this.throwIfFailed();
    this.hash.update(chunk);
    this.written += chunk.length;
    if (chunk.length >= SINK_COPY_BELOW_BYTES) {
      this.queueBlock();
      this.queue(chunk);
      await this.drain(0);
      return;
    }
    let copied = 0;
    while (copied < chunk.length) {
      const block = (this.block ??= this.freeBlocks.pop() ?? Buffer.allocUnsafe(SINK_BLOCK_BYTES));
      const bytes = chunk.copy(block, this.blockUsed, copied);
      copied += bytes;
      this.blockUsed += bytes;
      if (this.blockUsed === block.length) {
        this.queueBlock();
        await this.drain(SINK_BLOCKS_QUEUED - 1);
      }
    }
  }

  /** Writes the block being filled (behind: see {@link drain}). */
  private queueBlock(): void {
    const block = this.block;
    if (!block || this.blockUsed === 0) return;
    this.queue(block.subarray(0, this.blockUsed), block);
    this.block = null;
    this.blockUsed = 0;
  }

  /** Writes `data` after the writes already queued; `block` goes back to the free list after. */
  private queue(data: Buffer, block?: Buffer): void {
    const handle = this.handle!;
    const previous = this.writes.at(-1) ?? Promise.resolve();
    const write = previous
      .then(async () => {
        if (this.failure !== undefined) return;
        let done = 0;
        while (done < data.length) {
          const { bytesWritten } = await handle.write(data, done, data.length - done, null);
          done += bytesWritten;
        }
      })
      .catch((error: unknown) => {
        this.failure ??= error;
      })
      .finally(() => {
        this.writes.shift();
        if (block && this.freeBlocks.length < SINK_BLOCKS_QUEUED) this.freeBlocks.push(block);
      });
    this.writes.push(write);
  }

  /** Waits until at most `queued` writes are pending; throws the first that failed. */
  private async drain(queued: number): Promise<void> {
    while (this.writes.length > queued) await this.writes[0];
    this.throwIfFailed();
  }

  private throwIfFailed(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  /** Closes the file and moves it into the done tree. */
  async finish(): Promise<SinkResult> {
    await this.close();
    await this.doneDirs.ensureParent(this.file);
    const target = this.doneDirs.pathOf(this.file);
    try {
      // rename() replaces a file or a link, never writes through one.
      await retryAfterClearing(target, () => rename(this.partPath, target));
    } catch (error) {
      throw fsError(error, `moving ${this.partPath} into place`);
    }
    return { bytes: this.written, sha256: this.hash.digest('hex'), resumedBytes: this.resumed };
  }

  /** Closes the file, keeping what was written for a later resume. */
  async close(): Promise<void> {
    if (!this.handle) return;
    this.queueBlock();
    try {
      await this.drain(0);
    } finally {
      const handle = this.handle;
      this.handle = undefined;
      this.freeBlocks = [];
      await handle.close();
    }
  }

  /** Closes and deletes the partial file. */
  async discard(): Promise<void> {
    await this.close();
    await unlink(this.partPath).catch(() => undefined);
  }
}

/**
 * Runs `action`; when a leftover directory or link at `target` (only ever
 * inside our own staging trees) is in its way, removes it and runs it again.
 * Saves an lstat per file in the common case.
 */
async function retryAfterClearing<T>(target: string, action: () => Promise<T>): Promise<T> {
  try {
    return await action();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EISDIR' && code !== 'ELOOP' && code !== 'ENOTEMPTY' && code !== 'EEXIST') {
      throw error;
    }
    await rm(target, { recursive: true, force: true });
    return action();
  }
}

/**
 * Writes a whole small file straight into the done tree (no partial: it came
 * in one piece) and gives its hash.
 */
export async function writeWhole(
  doneDirs: SafeDirs,
  file: string,
  data: Buffer,
): Promise<SinkResult> {
  await doneDirs.ensureParent(file);
  const target = doneDirs.pathOf(file);
  const hashed = (): SinkResult => ({
    bytes: data.length,
    sha256: createHash('sha256').update(data).digest('hex'),
    resumedBytes: 0,
  });
  if (data.length <= SYNC_WRITE_MAX_BYTES) {
    // A small file in three quick system calls on this thread: ten thousand of them through
    // the thread pool (four threads) cost seconds; in line they cost a few hundred ms.
    let fd: number | undefined;
    try {
      fd = openSync(target, WRITE_FLAGS | constants.O_TRUNC, 0o644);
    } catch {
      // A link or a directory in the way, or another error: the careful path below says which.
    }
    if (fd !== undefined) {
      try {
        let done = 0;
        while (done < data.length) done += writeSync(fd, data, done, data.length - done);
      } catch (error) {
        throw fsError(error, `writing ${target}`);
      } finally {
        closeSync(fd);
      }
      return hashed();
    }
  }
  let handle: FileHandle;
  try {
    handle = await retryAfterClearing(target, () =>
      open(target, WRITE_FLAGS | constants.O_TRUNC, 0o644),
    );
  } catch (error) {
    throw fsError(error, `writing ${target}`);
  }
  try {
    let done = 0;
    while (done < data.length) {
      const { bytesWritten } = await handle.write(data, done, data.length - done, null);
      done += bytesWritten;
    }
  } finally {
    await handle.close();
  }
  return hashed();
}

/** Files up to this size are written with synchronous calls (see {@link writeWhole}). */
export const SYNC_WRITE_MAX_BYTES = 64 * 1024;

/**
 * Relative paths of the regular files below `dir` (empty when it does not
 * exist). Links are listed as found but never followed.
 */
export async function listFiles(dir: string): Promise<Set<string>> {
  const out = new Set<string>();
  const walk = async (relative: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(relative ? join(dir, relative) : dir, { withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw fsError(error, `listing ${dir}`);
    }
    for (const entry of entries) {
      const path = relative ? `${relative}/${entry.name}` : entry.name;
      if (entry.isDirectory()) await walk(path);
      else out.add(path);
    }
  };
  await walk('');
  return out;
}
