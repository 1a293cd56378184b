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
import { abortedError } from './errors';
import { assertSafeRelativePath, FileSink, listFiles, SafeDirs, writeWhole } from './localFiles';
import type { TarHandler } from './tarReader';

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

/** A counting semaphore. */
class Limiter {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active++;
    try {
      return await task();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}

/**
 * Read buffers recycled once written: a GiB in 64 KiB reads would otherwise
 * allocate (and garbage-collect) 16,000 of them.
 */
class BufferPool {
  private readonly free: Buffer[] = [];

  constructor(
    private readonly bytes: number,
    private readonly max: number,
  ) {}

  take(length: number): Buffer {
    if (length > this.bytes) return Buffer.allocUnsafe(length);
    return this.free.pop() ?? Buffer.allocUnsafe(this.bytes);
  }

  give(buffer: Buffer): void {
    if (buffer.length === this.bytes && this.free.length < this.max) this.free.push(buffer);
  }
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
  const doneDirs = new SafeDirs(localDir);
  const partDirs = new SafeDirs(options.partDir ?? `${localDir}.part`);
  const partials = await listFiles(partDirs.base);
  const reads = new Limiter(limits.readsInFlight);
  const pool = new BufferPool(limits.chunkBytes, limits.readsInFlight + limits.windowPerFile);
  const missing: string[] = [];
  let next = 0;
  let failure: ExecError | undefined;
  const signal = options.signal;

  const checkStop = (): void => {
    if (signal?.aborted) throw abortedError('the download', signal.reason);
    if (failure) throw failure;
  };

  // Files with no partial first, in one flow where the source can (a tar stream: no round trip
  // per file); whatever it did not hand over goes one by one below.
  const done = new Set<string>();
  const fresh = files.filter((file) => !partials.has(file));
  if (source.batch && fresh.length > 1) {
    const asked = new Set(fresh);
    let open: FileSink | null = null;
    const writes = new Limiter(limits.files);
    const writing: Promise<void>[] = [];
    try {
      await source.batch(
        remoteDir,
        fresh,
        {
          file: async (name, size) => {
            checkStop();
            if (!asked.delete(name)) {
              throw new ExecError(
                'io',
                `the target sent ${JSON.stringify(name)}, which was not asked for (or twice): nothing of it was written`,
              );
            }
            if (size <= limits.chunkBytes) {
              // Small: kept in memory and written in one piece, no partial (as one by one).
              const parts: Buffer[] = [];
              return {
                write: async (chunk) => {
                  checkStop();
                  parts.push(Buffer.from(chunk));
                },
                // Written beside the stream (up to `writesInFlight` at once): the stream does
                // not wait for each small file's open, write and close.
                end: async () => {
                  const data = Buffer.concat(parts);
                  let started!: () => void;
                  const slot = new Promise<void>((resolve) => (started = resolve));
                  writing.push(
                    writes.run(async () => {
                      started();
                      const result = await writeWhole(doneDirs, name, data);
                      done.add(name);
                      options.onProgress?.({
                        file: name,
                        bytesDone: result.bytes,
                        bytesTotal: size,
                      });
                      options.onFile?.({ file: name, ...result });
                    }),
                  );
                  await slot;
                },
              };
            }
            const sink = await FileSink.open(doneDirs, partDirs, name);
            open = sink;
            if (sink.offset > 0) await sink.restart();
            return {
              write: async (chunk) => {
                checkStop();
                await sink.write(chunk);
                options.onProgress?.({ file: name, bytesDone: sink.offset, bytesTotal: size });
              },
              end: async () => {
                open = null;
                const result = await sink.finish();
                done.add(name);
                options.onFile?.({ file: name, ...result });
              },
            };
          },
        },
        signal,
      );
    } catch (error) {
      if (signal?.aborted) throw abortedError('the download', signal.reason);
      if (error instanceof ExecError && (error.kind === 'connection' || error.kind === 'aborted')) {
        throw error;
      }
      // Anything else (a stream the target could not make, or one we refuse): one by one.
    } finally {
      await (open as FileSink | null)?.close().catch(() => undefined);
      // A local write that failed (a full disk) fails the download, as one by one.
      for (const outcome of await Promise.allSettled(writing)) {
        if (outcome.status === 'rejected') {
          failure ??=
            outcome.reason instanceof ExecError
              ? outcome.reason
              : wrapError(outcome.reason, 'writing a downloaded file');
        }
      }
    }
    if (failure) throw failure;
  }
  const queue = done.size === 0 ? files : files.filter((file) => !done.has(file));

  const transfer = async (file: string): Promise<void> => {
    const remotePath = posix.join(remoteDir, file);
    let remote: SourceFile | undefined;
    try {
      remote = await source.open(remotePath);
    } catch (error) {
      throw wrapError(error, `opening ${remotePath}`);
    }
    if (!remote) {
      missing.push(file);
      options.onFile?.({ file, missing: true });
      return;
    }
    const opened = remote;
    try {
      const size = opened.size;
      const report = (bytesDone: number): void =>
        options.onProgress?.({ file, bytesDone, bytesTotal: size });
      if (!partials.has(file) && size <= limits.chunkBytes) {
        // Small file: one read, one write, no partial.
        let data = opened.first ? await opened.first : await opened.read(0, size);
        data = await readRest(opened, data, size, wrapError, remotePath);
        checkStop();
        const result = await writeWhole(doneDirs, file, data);
        report(result.bytes);
        options.onFile?.({ file, ...result });
        return;
      }
      opened.first?.catch(() => undefined);
      const sink = await FileSink.open(doneDirs, partDirs, file);
      try {
        if (sink.offset > size) await sink.restart();
        if (opened.stream && sink.offset < size) {
          try {
            await opened.stream(
              sink.offset,
              size - sink.offset,
              async (chunk) => {
                checkStop();
                await sink.write(chunk);
                report(sink.offset);
              },
              signal,
            );
          } catch (error) {
            throw error instanceof ExecError ? error : wrapError(error, `reading ${remotePath}`);
          }
        } else {
          await pump(opened, remotePath, sink, size, report);
        }
        const result = await sink.finish();
        options.onFile?.({ file, ...result });
      } finally {
        await sink.close();
      }
    } finally {
      await opened.close().catch(() => undefined);
    }
  };

  /**
   * Reads [sink.offset, size) with up to `windowPerFile` reads in flight,
   * refilled as each one lands (not only the oldest), and writes them in
   * order. Memory: the window never spans more than windowPerFile chunks
   * past what is written.
   */
  const pump = (
    remote: SourceFile,
    remotePath: string,
    sink: FileSink,
    size: number,
    report: (bytesDone: number) => void,
  ): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const landed = new Map<number, { data: Buffer; buffer: Buffer }>();
      let issued = sink.offset;
      let inFlight = 0;
      let end = size; // lowered when the file turns out shorter
      let writing = false;
      let failed = false;
      const span = limits.windowPerFile * limits.chunkBytes;
      const fail = (error: unknown): void => {
        if (failed) return;
        failed = true;
        reject(error);
      };
      const read = (position: number, length: number): void => {
        inFlight++;
        const buffer = pool.take(length);
        reads
          .run(() => remote.read(position, length, buffer))
          .then(
            (data) => {
              inFlight--;
              if (failed) return;
              if (data.length === 0) {
                end = Math.min(end, position); // shrank since it was opened: the hash will say so
                pool.give(buffer);
              } else {
                landed.set(position, { data, buffer });
                // A short read: ask for the rest of this range on its own.
                if (data.length < length) read(position + data.length, length - data.length);
              }
              issue();
              void drain();
            },
            (error: unknown) => {
              inFlight--;
              fail(wrapError(error, `reading ${remotePath}`));
            },
          );
      };
      const issue = (): void => {
        while (
          !failed &&
          inFlight < limits.windowPerFile &&
          issued < end &&
          issued - sink.offset < span
        ) {
          const length = Math.min(limits.chunkBytes, end - issued);
          read(issued, length);
          issued += length;
        }
      };
      const drain = async (): Promise<void> => {
        if (writing || failed) return;
        writing = true;
        try {
          for (;;) {
            if (signal?.aborted || failure) {
              fail(signal?.aborted ? abortedError('the download', signal.reason) : failure);
              return;
            }
            const piece = landed.get(sink.offset);
            if (!piece) break;
            landed.delete(sink.offset);
            await sink.write(piece.data);
            pool.give(piece.buffer);
            report(sink.offset);
            issue();
          }
        } catch (error) {
          fail(error);
          return;
        } finally {
          writing = false;
        }
        if (sink.offset >= end && inFlight === 0) resolve();
        else if (landed.has(sink.offset)) void drain();
      };
      issue();
      if (issued >= end && inFlight === 0) resolve();
    });

  const worker = async (): Promise<void> => {
    while (!failure && !signal?.aborted && next < queue.length) {
      const name = queue[next++]!;
      try {
        await transfer(name);
      } catch (error) {
        failure ??= error instanceof ExecError ? error : wrapError(error, `downloading ${name}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, limits.files) }, worker));
  if (failure) throw failure;
  if (signal?.aborted) throw abortedError('the download', signal.reason);
  if (missing.length > 0 && !options.onFile) {
    throw new ExecError(
      'not_found',
      `${missing.length} file(s) to download no longer exist on the target, first ${JSON.stringify(missing[0])}`,
    );
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
