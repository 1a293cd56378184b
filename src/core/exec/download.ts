/**
 * The download engine both executors share: many files in flight, several
 * reads in flight per file (so a high-latency link stays full), bytes hashed
 * as they are written (verification overlaps the transfer), memory bounded
 * by the read window, partial files kept for a resume. Where the bytes come
 * from is a {@link ReadSource}: SFTP for a pod, the file system locally.
 */
import { posix } from 'node:path';
import type { DownloadOptions } from './executor';
import { ExecError } from './executor';
import { abortedError } from './failures';
import {
  assertSafeRelativePath,
  FileSink,
  listFiles,
  SafeDirs,
  SYNC_WRITE_MAX_BYTES,
  writeWhole,
} from './localFiles';
import type { TarEntryWriter, TarHandler } from './tarReader';
import { BufferPool, Limiter, readWindowed, type Fill, type ReadWindow } from './readWindow';

/** An open file on the source side. */
export interface SourceFile {
  /** Its size when it was opened. */
  readonly size: number;
  /**
   * Bytes from `position`; may be shorter than `length`; empty at the end.
   * With `into` (at least `length` bytes), the bytes land there (saves an
   * allocation per read: the caller recycles it).
   */
  read(position: number, length: number, into?: Buffer): Promise<Buffer>;
  /** Bytes at offset 0 fetched ahead while the size was asked (saves a round trip). */
  readonly first?: Promise<Buffer>;
  /**
   * Hands `length` bytes from `position` to `write` in order, with backpressure, in one flow
   * (faster than reads where the source has one); resolves with the bytes handed over, fewer
   * when the file shrank. Absent: the file is read with {@link read}.
   */
  readonly stream?: (
    position: number,
    length: number,
    write: (chunk: Buffer) => Promise<void>,
    signal?: AbortSignal,
  ) => Promise<number>;
  close(): Promise<void>;
}

export interface ReadSource {
  /** The file at `path`, or undefined when it does not exist (or is no longer a regular file). */
  open(path: string): Promise<SourceFile | undefined>;
  /**
   * Sends whole files of `remoteDir` in one flow (a tar stream), each regular file handed to
   * `handler` as it comes. Files it does not hand over (gone, no longer regular files, or a
   * target that cannot do it) are fetched one by one afterwards. Absent: one by one only.
   */
  batch?(
    remoteDir: string,
    files: readonly string[],
    handler: TarHandler,
    signal?: AbortSignal,
  ): Promise<void>;
}

export interface EngineLimits {
  /** Files transferred at once. */
  files: number;
  /** Bytes asked per read. */
  chunkBytes: number;
  /** Reads in flight for one file. */
  windowPerFile: number;
  /** Reads in flight overall (memory bound: this × chunkBytes). */
  readsInFlight: number;
}

/**
 * Downloads `files` (relative to `remoteDir`) from `source` into `localDir`.
 * See {@link Executor.download} for the contract. `wrapError` turns a
 * source's failure into the ExecError the caller sees.
 */
export async function downloadFiles(
  source: ReadSource,
  remoteDir: string,
  localDir: string,
  files: readonly string[],
  options: DownloadOptions,
  limits: EngineLimits,
  wrapError: (error: unknown, what: string) => ExecError,
): Promise<void> {
  for (const file of files) assertSafeRelativePath(file);
  const partDirs = new SafeDirs(options.partDir ?? `${localDir}.part`);
  const partials = await listFiles(partDirs.base);
  const run = new Download(
    source,
    remoteDir,
    new SafeDirs(localDir),
    partDirs,
    options,
    limits,
    wrapError,
  );
  // Files with no partial first, in one flow where the source can (a tar stream: no round trip
  // per file); whatever it did not hand over goes one by one.
  const fresh = files.filter((file) => !partials.has(file));
  if (source.batch && fresh.length > 1) await run.batch(fresh);
  await run.oneByOne(
    run.done.size === 0 ? files : files.filter((file) => !run.done.has(file)),
    partials,
  );
  run.finish();
}

/** One call of {@link downloadFiles}, in its steps. */
class Download implements ReadWindow {
  /** Files complete on disk. */
  readonly done = new Set<string>();
  readonly reads: Limiter;
  readonly pool: BufferPool;
  private readonly missing: string[] = [];
  private failure: ExecError | undefined;
  private readonly signal: AbortSignal | undefined;

  constructor(
    private readonly source: ReadSource,
    private readonly remoteDir: string,
    private readonly doneDirs: SafeDirs,
    private readonly partDirs: SafeDirs,
    private readonly options: DownloadOptions,
    readonly limits: EngineLimits,
    /** A source's failure as the ExecError the caller sees. */
    private readonly wrapError: (error: unknown, what: string) => ExecError,
  ) {
    this.reads = new Limiter(limits.readsInFlight);
    this.pool = new BufferPool(limits.chunkBytes, limits.readsInFlight + limits.windowPerFile);
    this.signal = options.signal;
  }

  private checkStop(): void {
    if (this.signal?.aborted) throw abortedError('the download', this.signal.reason);
    if (this.failure) throw this.failure;
  }

  /**
   * `fresh` through the source's batch (a tar stream), each file written as it comes. A
   * stream the target could not make, or one we refuse, leaves the rest to {@link oneByOne};
   * a drop, an abort or a local write that failed fails the download.
   */
  async batch(fresh: readonly string[]): Promise<void> {
    const asked = new Set(fresh);
    const open: { sink: FileSink | null } = { sink: null };
    const writes = new Limiter(this.limits.files);
    const writing: Promise<void>[] = [];
    try {
      await this.source.batch!(
        this.remoteDir,
        fresh,
        {
          file: async (name, size) => {
            this.checkStop();
            if (!asked.delete(name)) {
              throw new ExecError(
                'io',
                `the target sent ${JSON.stringify(name)}, which was not asked for (or twice): nothing of it was written`,
              );
            }
            return size <= this.limits.chunkBytes
              ? this.smallFromBatch(name, size, writes, writing)
              : this.bigFromBatch(name, size, open);
          },
        },
        this.signal,
      );
    } catch (error) {
      if (this.signal?.aborted) throw abortedError('the download', this.signal.reason);
      if (error instanceof ExecError && (error.kind === 'connection' || error.kind === 'aborted')) {
        throw error;
      }
      // Anything else (a stream the target could not make, or one we refuse): one by one.
    } finally {
      await open.sink?.close().catch(() => undefined);
      // A local write that failed (a full disk) fails the download, as one by one.
      for (const outcome of await Promise.allSettled(writing)) {
        if (outcome.status === 'rejected') {
          this.failure ??=
            outcome.reason instanceof ExecError
              ? outcome.reason
              : this.wrapError(outcome.reason, 'writing a downloaded file');
        }
      }
    }
    if (this.failure) throw this.failure;
  }

  /**
   * A small file of the batch: its pieces kept as they came (no copy), written and hashed in one
   * piece at its end. One that fits a synchronous write (SYNC_WRITE_MAX_BYTES) is written there
   * and then, before the stream goes on: it costs three system calls on this thread either way,
   * and the stream's buffers are let go at once. A bigger one is copied out of them and written
   * beside the stream (up to `files` at once).
   */
  private smallFromBatch(
    name: string,
    size: number,
    writes: Limiter,
    writing: Promise<void>[],
  ): TarEntryWriter {
    const parts: Buffer[] = [];
    const write = async (data: Buffer): Promise<void> => {
      const result = await writeWhole(this.doneDirs, name, data);
      this.done.add(name);
      this.options.onProgress?.({ file: name, bytesDone: result.bytes, bytesTotal: size });
      this.options.onFile?.({ file: name, ...result });
    };
    return {
      write: async (chunk) => {
        this.checkStop();
        parts.push(chunk);
      },
      end: async () => {
        this.checkStop();
        if (size <= SYNC_WRITE_MAX_BYTES) {
          await write(parts.length === 1 ? parts[0]! : Buffer.concat(parts, size));
          return;
        }
        // Out of the stream's buffers (a subarray would keep a whole read of the stream alive).
        const data = Buffer.concat(parts, size);
        parts.length = 0;
        let started!: () => void;
        const slot = new Promise<void>((resolve) => (started = resolve));
        writing.push(
          writes.run(async () => {
            started();
            await write(data);
          }),
        );
        await slot;
      },
    };
  }

  /** A bigger file of the batch: streamed into its partial file, hashed as written. */
  private async bigFromBatch(
    name: string,
    size: number,
    open: { sink: FileSink | null },
  ): Promise<TarEntryWriter> {
    const sink = await FileSink.open(this.doneDirs, this.partDirs, name);
    open.sink = sink;
    if (sink.offset > 0) await sink.restart();
    return {
      write: async (chunk) => {
        this.checkStop();
        await sink.write(chunk);
        this.options.onProgress?.({ file: name, bytesDone: sink.offset, bytesTotal: size });
      },
      end: async () => {
        open.sink = null;
        const result = await sink.finish();
        this.done.add(name);
        this.options.onFile?.({ file: name, ...result });
      },
    };
  }

  /** `queue` one file at a time per worker, `limits.files` workers. */
  async oneByOne(queue: readonly string[], partials: ReadonlySet<string>): Promise<void> {
    let next = 0;
    const worker = async (): Promise<void> => {
      while (!this.failure && !this.signal?.aborted && next < queue.length) {
        const name = queue[next++]!;
        try {
          await this.transfer(name, partials.has(name));
        } catch (error) {
          this.failure ??=
            error instanceof ExecError ? error : this.wrapError(error, `downloading ${name}`);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, this.limits.files) }, worker));
  }

  /** How the download ended: its failure, an abort, or files gone without an `onFile`. */
  finish(): void {
    if (this.failure) throw this.failure;
    if (this.signal?.aborted) throw abortedError('the download', this.signal.reason);
    if (this.missing.length > 0 && !this.options.onFile) {
      throw new ExecError(
        'not_found',
        `${this.missing.length} file(s) to download no longer exist on the target, first ${JSON.stringify(this.missing[0])}`,
      );
    }
  }

  /** One file: opened, then read whole (small), streamed or pumped into its partial file. */
  private async transfer(file: string, partial: boolean): Promise<void> {
    const remotePath = posix.join(this.remoteDir, file);
    let remote: SourceFile | undefined;
    try {
      remote = await this.source.open(remotePath);
    } catch (error) {
      throw this.wrapError(error, `opening ${remotePath}`);
    }
    if (!remote) {
      this.missing.push(file);
      this.options.onFile?.({ file, missing: true });
      return;
    }
    const opened = remote;
    try {
      const size = opened.size;
      const report = (bytesDone: number): void =>
        this.options.onProgress?.({ file, bytesDone, bytesTotal: size });
      if (!partial && size <= this.limits.chunkBytes) {
        // Small file: one read, one write, no partial.
        let data = opened.first ? await opened.first : await opened.read(0, size);
        data = await readRest(opened, data, size, this.wrapError, remotePath);
        this.checkStop();
        const result = await writeWhole(this.doneDirs, file, data);
        report(result.bytes);
        this.options.onFile?.({ file, ...result });
        return;
      }
      opened.first?.catch(() => undefined);
      const sink = await FileSink.open(this.doneDirs, this.partDirs, file);
      try {
        if (sink.offset > size) await sink.restart();
        const fill: Fill = { remote: opened, remotePath, sink, size, report };
        await (opened.stream && sink.offset < size
          ? this.stream(fill)
          : readWindowed(fill, this, () => this.checkStop(), this.wrapError));
        const result = await sink.finish();
        this.options.onFile?.({ file, ...result });
      } finally {
        await sink.close();
      }
    } finally {
      await opened.close().catch(() => undefined);
    }
  }

  /** The rest of a file [sink.offset, size) through the source's stream, in one flow. */
  private async stream({ remote, remotePath, sink, size, report }: Fill): Promise<void> {
    try {
      await remote.stream!(
        sink.offset,
        size - sink.offset,
        async (chunk) => {
          this.checkStop();
          await sink.write(chunk);
          report(sink.offset);
        },
        this.signal,
      );
    } catch (error) {
      throw error instanceof ExecError ? error : this.wrapError(error, `reading ${remotePath}`);
    }
  }
}

/** Completes a first read that came back short. */
async function readRest(
  remote: SourceFile,
  first: Buffer,
  size: number,
  wrapError: (error: unknown, what: string) => ExecError,
  remotePath: string,
): Promise<Buffer> {
  if (first.length >= size) return first.length === size ? first : first.subarray(0, size);
  const parts = [first];
  let position = first.length;
  while (position < size) {
    let more: Buffer;
    try {
      more = await remote.read(position, size - position);
    } catch (error) {
      throw wrapError(error, `reading ${remotePath}`);
    }
    if (more.length === 0) break;
    parts.push(more);
    position += more.length;
  }
  return Buffer.concat(parts);
}
