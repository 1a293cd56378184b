/**
 * A file read with many reads in flight (so a high-latency link stays full), refilled as each
 * lands and written in order into its partial file: memory bounded by the read window, the read
 * buffers recycled. The download engine (./download.ts) reads each big file so where the source
 * has no stream.
 */
import type { EngineLimits, SourceFile } from './download';
import type { ExecError } from './executor';
import type { FileSink } from './localFiles';

/** A counting semaphore. */
export class Limiter {
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
export class BufferPool {
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

/** The read limits of one download, shared by its files. */
export interface ReadWindow {
  limits: EngineLimits;
  pool: BufferPool;
  reads: Limiter;
}

/** The rest of one file to bring into its partial file: [sink.offset, size) of `remote`. */
export interface Fill {
  remote: SourceFile;
  remotePath: string;
  sink: FileSink;
  size: number;
  /** Told the bytes written so far after each write. */
  report: (bytesDone: number) => void;
}

/**
 * Reads [sink.offset, size) of `remote` with up to `windowPerFile` reads in flight,
 * refilled as each one lands (not only the oldest), and writes them in
 * order. Memory: the window never spans more than windowPerFile chunks
 * past what is written.
 */
export function readWindowed(
  { remote, remotePath, sink, size, report }: Fill,
  { limits, pool, reads }: ReadWindow,
  checkStop: () => void,
  wrapError: (error: unknown, what: string) => ExecError,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
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
          // Aborted, or another file's transfer failed: this one stops too.
          checkStop();
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
}
