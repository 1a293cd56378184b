/**
 * Downloads over SSH (uploads are sshUpload.ts's): the shared engine (download.ts) fed by SFTP
 * reads, exec streams for big files and tar streams for batches of files.
 */
import type { SFTPWrapper } from 'ssh2';
import { ExecError, type DownloadOptions, type ExecResult } from './executor';
import { excerpt } from './failures';
import { downloadFiles, type EngineLimits, type ReadSource, type SourceFile } from './download';
import { shQuote } from './shell';
import type { RunOptions } from './sshChannel';
import { Slots, type Connection } from './sshConnection';
import type { Sftp } from './sshSftp';
import { TarReader, type TarHandler } from './tarReader';

/** Bytes asked together with a file's size: most small files come whole in that one read. */
const PREFETCH_BYTES = 16 * 1024;
/** Files from this size on are streamed through an exec channel rather than read over SFTP. */
const STREAM_MIN_BYTES = 1024 * 1024;
/** Exec channels streaming files at once (sshd allows 10 sessions per connection). */
const STREAMS_AT_ONCE = 4;
/** Bytes of quoted names per `tar` command (well inside SSH's packet limit). */
const TAR_COMMAND_BYTES = 32 * 1024;

/** Download tuning (defaults measured by bench/retrieval.bench.ts). */
export type TransferTuning = Partial<EngineLimits> & {
  /** Files at least this big stream through an exec channel (null: never; SFTP reads only). */
  streamMinBytes?: number | null;
  /** Files streamed at once. */
  streams?: number;
};

/** What the transfers need of the executor. */
export interface TransferLink {
  /** `user@host:port`, for messages. */
  readonly where: string;
  run(command: string, options: RunOptions): Promise<ExecResult>;
  readonly sftp: Sftp;
}

/** Downloads `files` of `remoteDir` into `localDir` (see Executor.download). */
export async function downloadTree(
  link: TransferLink,
  tuning: TransferTuning,
  remoteDir: string,
  localDir: string,
  files: readonly string[],
  options: DownloadOptions,
): Promise<void> {
  const { conn, sftp } = await link.sftp.session(options.signal);
  // 128 KiB reads: half the CPU of 64 KiB ones per GiB (bench/retrieval.bench.ts).
  const chunkBytes = tuning.chunkBytes ?? 128 * 1024;
  // The server caps open handles (OpenSSH tells it in its limits extension).
  const serverHandles = (sftp as { maxOpenHandles?: number }).maxOpenHandles ?? 64;
  const handles = Math.max(1, Math.min(tuning.files ?? 64, serverHandles - 4));
  await downloadFiles(
    new SftpSource(
      (what, call) => link.sftp.call(conn, what, call),
      conn,
      sftp,
      PREFETCH_BYTES,
      handles,
      tuning.streamMinBytes === null
        ? null
        : {
            minBytes: tuning.streamMinBytes ?? STREAM_MIN_BYTES,
            limiter: new Slots(tuning.streams ?? STREAMS_AT_ONCE),
            run: (path, position, length, write, signal) =>
              streamRange(link, path, position, length, write, signal ?? options.signal),
            batch: (dir, names, handler, signal) =>
              tarFiles(link, dir, names, handler, signal ?? options.signal),
          },
    ),
    remoteDir,
    localDir,
    files,
    options,
    {
      files: handles,
      chunkBytes,
      windowPerFile: tuning.windowPerFile ?? 16,
      readsInFlight: tuning.readsInFlight ?? 64,
    },
    (error, what) => link.sftp.error(conn, error, what),
  );
}

/**
 * Streams `length` bytes of `path` from `position` through one exec channel (`head -c L`, or
 * `tail -c +N | head -c L` from further in; POSIX, busybox too), handing each chunk to `write`
 * with backpressure. Several times the throughput of SFTP reads through ssh2 (each SFTP read is a request and a response
 * parsed in JS; a channel is one flow of data). Resolves with the bytes streamed: fewer than
 * `length` when the file shrank since it was opened (the hash then says it changed).
 */
async function streamRange(
  link: TransferLink,
  path: string,
  position: number,
  length: number,
  write: (chunk: Buffer) => Promise<void>,
  signal?: AbortSignal,
): Promise<number> {
  let streamed = 0;
  const command =
    position === 0
      ? wholeFileCommand(path, length)
      : `tail -c +${position + 1} -- ${shQuote(path)} | head -c ${length}`;
  const result = await link.run(command, {
    signal,
    maxOutputBytes: 64 * 1024,
    what: `reading ${path}`,
    bulk: true,
    onStdoutAsync: async (chunk) => {
      const room = length - streamed;
      const piece = chunk.length > room ? chunk.subarray(0, room) : chunk;
      if (piece.length === 0) return;
      streamed += piece.length;
      await write(piece);
    },
  });
  if (streamed < length && result.stderr.length > 0) {
    throw new ExecError('io', `reading ${path} on ${link.where} failed: ${excerpt(result.stderr)}`);
  }
  return streamed;
}

/** Bytes per read of {@link wholeFileCommand}'s `dd`. */
const DD_BLOCK_BYTES = 1024 * 1024;

/**
 * POSIX sh that writes the first `length` bytes of the file `path` to stdout: `dd` in 1 MiB
 * blocks, then one block of the rest (a regular file gives whole blocks; the group's two `dd`
 * share its offset). GNU `head -c` reads 8 KiB at a time: 1.5 s of the pod's CPU per GiB where
 * this takes about 0.5 s, beside the transfer on the same cores. A file that cannot be opened
 * is the shell's message on stderr; `dd`'s counts are dropped (a read failing midway leaves
 * the file short, which its hash then tells).
 */
function wholeFileCommand(path: string, length: number): string {
  const blocks = Math.floor(length / DD_BLOCK_BYTES);
  const rest = length % DD_BLOCK_BYTES;
  const parts = [
    ...(blocks > 0 ? [`dd bs=${DD_BLOCK_BYTES} count=${blocks} 2>/dev/null`] : []),
    ...(rest > 0 ? [`dd bs=${rest} count=1 2>/dev/null`] : []),
  ];
  return parts.length === 0
    ? ': < ' + shQuote(path)
    : `{ ${parts.join(' && ')}; } < ${shQuote(path)}`;
}

/** `names` cut into groups whose quoted names fit one command line of TAR_COMMAND_BYTES. */
function commandGroups(names: readonly string[]): string[][] {
  const groups: string[][] = [];
  let group: string[] = [];
  let bytes = 0;
  for (const name of names) {
    const quoted = shQuote(name).length + 1;
    if (group.length > 0 && bytes + quoted > TAR_COMMAND_BYTES) {
      groups.push(group);
      group = [];
      bytes = 0;
    }
    group.push(name);
    bytes += quoted;
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/**
 * Sends `names` (relative to `dir`) as tar streams (`tar -cf - -- names…`, GNU or busybox),
 * a few thousand names per command, two commands at once, each entry handed to `handler` as
 * it arrives (the reader refuses a damaged stream; the caller refuses names it did not ask
 * for). Files tar could not send (gone, unreadable) are simply not handed over.
 */
async function tarFiles(
  link: TransferLink,
  dir: string,
  names: readonly string[],
  handler: TarHandler,
  signal?: AbortSignal,
): Promise<void> {
  const groups = commandGroups(names);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < groups.length) {
      const list = groups[next++]!;
      const reader = new TarReader(handler);
      const result = await link.run(
        `cd -- ${shQuote(dir)} && exec tar -cf - -- ${list.map(shQuote).join(' ')}`,
        {
          signal,
          maxOutputBytes: 64 * 1024,
          what: 'the results stream',
          bulk: true,
          onStdoutAsync: (chunk) => reader.push(chunk),
        },
      );
      if (!reader.atBoundary) {
        throw new ExecError(
          'io',
          `the results stream from ${link.where} ended inside a file (tar exit ${result.code ?? result.signal}): ${excerpt(result.stderr)}`,
        );
      }
    }
  };
  await Promise.all([worker(), worker()]);
}

type SftpCall = <T>(
  what: string,
  call: (callback: (error: Error | undefined | null, value?: T) => void) => void,
) => Promise<T>;

/** Remote files over SFTP: open, then the size and the first chunk asked at once. */
class SftpSource implements ReadSource {
  private openHandles = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly call: SftpCall,
    private readonly conn: Connection,
    private readonly sftp: SFTPWrapper,
    private readonly prefetchBytes: number,
    private readonly maxHandles: number,
    /** Files this big or bigger are streamed through an exec channel; null: SFTP reads only. */
    private readonly streaming: {
      minBytes: number;
      limiter: Slots;
      run: (
        path: string,
        position: number,
        length: number,
        write: (chunk: Buffer) => Promise<void>,
        signal?: AbortSignal,
      ) => Promise<number>;
      batch: NonNullable<ReadSource['batch']>;
    } | null,
  ) {
    if (streaming) this.batch = streaming.batch;
  }

  readonly batch?: ReadSource['batch'];

  async open(path: string): Promise<SourceFile | undefined> {
    // Handles still being closed count too: the server caps open handles.
    if (this.openHandles >= this.maxHandles) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
    this.openHandles++;
    const { conn, sftp } = this;
    let handle: Buffer;
    try {
      handle = await this.call<Buffer>(`opening ${path}`, (cb) => sftp.open(path, 'r', cb));
    } catch (error) {
      this.release();
      if (error instanceof ExecError && error.kind === 'not_found') return undefined;
      throw error;
    }
    const read = (position: number, length: number, into?: Buffer): Promise<Buffer> => {
      const buffer = into && into.length >= length ? into : Buffer.allocUnsafe(length);
      return this.call<number>(`reading ${path}`, (cb) =>
        sftp.read(handle, buffer, 0, length, position, (error, bytesRead) => cb(error, bytesRead)),
      ).then((bytesRead) => buffer.subarray(0, bytesRead));
    };
    const first = read(0, this.prefetchBytes);
    first.catch(() => undefined);
    let closed = false;
    let released = false;
    const releaseOnce = (): void => {
      if (released) return;
      released = true;
      this.release();
    };
    const close = async (): Promise<void> => {
      if (closed) return;
      closed = true;
      // Not awaited: the next file need not wait for this round trip.
      if (conn.closed) releaseOnce();
      else sftp.close(handle, releaseOnce);
    };
    try {
      const stats = await this.call<{ size: number; isFile(): boolean }>(
        `looking at ${path}`,
        (cb) => sftp.fstat(handle, cb),
      );
      if (!stats.isFile()) {
        await close();
        return undefined;
      }
      const streaming = this.streaming;
      const stream =
        streaming === null || stats.size < streaming.minBytes
          ? undefined
          : async (
              position: number,
              length: number,
              write: (chunk: Buffer) => Promise<void>,
              signal?: AbortSignal,
            ): Promise<number> => {
              const release = await streaming.limiter.acquire(signal);
              try {
                return await streaming.run(path, position, length, write, signal);
              } finally {
                release();
              }
            };
      return { size: stats.size, first, read, close, ...(stream ? { stream } : {}) };
    } catch (error) {
      await close();
      throw error;
    }
  }

  private release(): void {
    this.openHandles--;
    this.waiting.shift()?.();
  }
}
