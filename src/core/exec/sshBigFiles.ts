/**
 * The big files of an upload, each beside the archive through channels of its own that the target
 * hashes as it writes them (`tee | sha256sum`), so their check costs no second read; over a
 * distant link as several byte ranges at once, each written in place by `dd` and hashed on both
 * sides.
 */
import { createHash, type Hash } from 'node:crypto';
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { ExecError, type ExecResult } from './executor';
import { excerpt } from './failures';
import { PICK_SHA256, shQuote } from './shell';
import type { TransferLink } from './sshTransfer';

/** Bytes per read of a file sent through its own channel. */
const FILE_READ_BYTES = 256 * 1024;
/**
 * On a distant link, a big file goes as up to this many byte ranges at once, each through a
 * channel of its own: sshd takes at most its channel window (2 MiB) per round trip on each, so
 * over 50 ms of round trip one channel carries about 40 MiB/s whatever the link could. With the
 * archive's channel that is 5 of the executor's 6 (DEFAULT_MAX_CHANNELS): one stays free for the
 * commands that run beside an upload (the watchdog's verdict, the cost cap). 128 MiB through
 * 50 ms: 3 ranges 1.7–2.0 s, 4 ranges 1.5–1.75 s, side by side.
 */
const STRIPES = 4;
/** The least a range carries (fewer ranges for a smaller file). */
const STRIPE_MIN_BYTES = 16 * 1024 * 1024;
/** Ranges start on a multiple of this (the target's `dd` seeks in blocks of it). */
const STRIPE_ALIGN_BYTES = 1024 * 1024;
/**
 * One big file through channels of its own: as byte ranges at once over a distant link when it
 * is big enough for two of them ({@link sendStriped}), else through one ({@link sendHashed}).
 */
export function sendBigFile(
  file: BigFile,
  distant: boolean,
  sizeBytes: number,
  signal?: AbortSignal,
): Promise<void> {
  return distant && sizeBytes >= 2 * STRIPE_MIN_BYTES
    ? sendStriped(file, signal)
    : sendHashed(file, signal);
}

/** Runs `tasks` at once; the first to fail stops the others (through their signal) and is thrown. */
export async function allOrNone(
  tasks: readonly ((signal: AbortSignal) => Promise<void>)[],
  signal?: AbortSignal,
): Promise<void> {
  const stop = new AbortController();
  const onAbort = (): void => stop.abort(signal?.reason);
  if (signal?.aborted) onAbort();
  signal?.addEventListener('abort', onAbort, { once: true });
  let first: { error: unknown } | undefined;
  try {
    await Promise.all(
      tasks.map((task) =>
        task(stop.signal).catch((error: unknown) => {
          first ??= { error };
          stop.abort(error);
        }),
      ),
    );
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  if (first) throw first.error;
}

/** One big file to send through channels of its own. */
export interface BigFile {
  link: TransferLink;
  localDir: string;
  remoteDir: string;
  /** Relative POSIX path, the same on both sides. */
  path: string;
  progress: { bytes: (n: number) => void; fileDone: () => void };
}

/** A big file opened to be sent (never through a link), with its mode and size then. */
async function openToSend(
  file: BigFile,
): Promise<{ handle: FileHandle; mode: number; size: number; close: () => Promise<void> }> {
  const handle = await open(
    join(file.localDir, file.path),
    constants.O_RDONLY | constants.O_NOFOLLOW,
  );
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => (closed ??= handle.close());
  try {
    const stats = await handle.stat();
    return { handle, mode: stats.mode & 0o777, size: stats.size, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * POSIX sh that makes `path` under `remoteDir` an empty file with `mode` (in place of whatever
 * was there, a link included: `tee` and `dd` keep the mode of a file they write into).
 */
function emptyFileScript(remoteDir: string, path: string, mode: number): string {
  const slash = path.lastIndexOf('/');
  const name = shQuote(path);
  return (
    `mkdir -p -- ${shQuote(slash < 0 ? remoteDir : `${remoteDir}/${path.slice(0, slash)}`)} && cd -- ${shQuote(remoteDir)} && ` +
    `rm -f -- ${name} && : > ${name} && chmod ${mode.toString(8)} -- ${name}`
  );
}

/** sh printing `writing <path> failed` on stderr, the path quoted (a workspace path: any character). */
function writeFailed(path: string): string {
  return `printf 'writing %s failed\\n' ${shQuote(path)} >&2`;
}

/** Fails unless the target printed the SHA-256 `ours` first and nothing went to its stderr. */
function checkSent(file: BigFile, result: ExecResult, ours: string, part = ''): void {
  const theirs = /^([0-9a-f]{64})\b/.exec(result.stdout.toString('utf8'))?.[1];
  if (result.code === 0 && result.stderr.length === 0 && theirs === ours) return;
  const why =
    result.stderr.length > 0
      ? excerpt(result.stderr)
      : `the pod hashed ${theirs ?? 'nothing'} (exit ${result.code ?? result.signal}), this machine sent ${ours}`;
  throw new ExecError(
    'io',
    `the upload to ${file.remoteDir} on ${file.link.where} did not verify: ${file.path}${part}: ${why}`,
  );
}

/**
 * The bytes of `handle` from `start` (by position, so ranges read at once do not meet) to `end`,
 * or to the end of the file when `end` is null; each piece hashed and counted as it is read.
 */
async function* fileContent(
  file: BigFile,
  handle: FileHandle,
  hash: Hash,
  start: number,
  end: number | null,
): AsyncGenerator<Buffer> {
  for (let at = start; end === null || at < end;) {
    const buffer = Buffer.allocUnsafe(
      end === null ? FILE_READ_BYTES : Math.min(FILE_READ_BYTES, end - at),
    );
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, at);
    if (bytesRead === 0) {
      if (end === null) return;
      throw new Error(`${file.path} got shorter while it was sent: upload it again`);
    }
    at += bytesRead;
    const piece = buffer.subarray(0, bytesRead);
    hash.update(piece);
    file.progress.bytes(bytesRead);
    yield piece;
  }
}

/**
 * One big file through its own channel: read and hashed here as it is sent; on the target, `tee`
 * writes it and `sha256sum` hashes the same bytes as they are written. The upload fails unless
 * both hashes agree and `tee` wrote everything (a full disk makes it fail, and say so).
 */
async function sendHashed(file: BigFile, signal?: AbortSignal): Promise<void> {
  const { handle, mode, close } = await openToSend(file);
  const hash = createHash('sha256');
  const name = shQuote(file.path);
  const script =
    `${emptyFileScript(file.remoteDir, file.path, mode)} && ${PICK_SHA256} && ` +
    `{ tee -- ${name} || ${writeFailed(file.path)}; } | $h`;
  const result = await file.link
    .run(script, {
      stdin: fileContent(file, handle, hash, 0, null),
      signal,
      maxOutputBytes: 64 * 1024,
      what: `the upload of ${file.path}`,
    })
    .finally(close); // also when the command ended before it read anything
  checkSent(file, result, hash.digest('hex'));
  file.progress.fileDone();
}

/**
 * One big file over a distant link, as byte ranges at once (see {@link STRIPES}), each through
 * a channel of its own and hashed here as it is read. On the target, one command first makes
 * the file empty with its mode; then each range's bytes go through `tee` into `dd`, which writes
 * them in place at the range's offset, and on into the hasher, so every byte is hashed as it is
 * written, as for {@link sendHashed}. Each range's two hashes must agree and each `dd` succeed;
 * any range failing stops the others.
 */
async function sendStriped(file: BigFile, signal?: AbortSignal): Promise<void> {
  const { handle, mode, size, close } = await openToSend(file);
  try {
    const made = await file.link.run(emptyFileScript(file.remoteDir, file.path, mode), {
      signal,
      maxOutputBytes: 64 * 1024,
      what: `the upload of ${file.path}`,
    });
    if (made.code !== 0 || made.stderr.length > 0) {
      throw new ExecError(
        'io',
        `the upload could not create ${file.path} in ${file.remoteDir} on ${file.link.where} (exit ${made.code ?? made.signal}): ${excerpt(made.stderr)}`,
      );
    }
    const count = Math.max(1, Math.min(STRIPES, Math.floor(size / STRIPE_MIN_BYTES)));
    const span = Math.ceil(size / count / STRIPE_ALIGN_BYTES) * STRIPE_ALIGN_BYTES;
    const starts = Array.from({ length: count }, (_, i) => i * span).filter((at) => at < size);
    const name = shQuote(file.path);
    await allOrNone(
      starts.map((start) => async (stop) => {
        const end = Math.min(size, start + span);
        const hash = createHash('sha256');
        // fd 3 of the hashing group is the pipe into dd; the hasher's digest goes to fd 4 (the
        // channel's stdout) and the hasher keeps no copy of fd 3 (dd ends when tee does).
        const script =
          `cd -- ${shQuote(file.remoteDir)} && ${PICK_SHA256} && ` +
          `{ { tee -- /dev/fd/3 | $h >&4 3>&-; } 3>&1 | ` +
          `dd of=${name} bs=${STRIPE_ALIGN_BYTES} seek=${start / STRIPE_ALIGN_BYTES} conv=notrunc 2>/dev/null ` +
          `|| ${writeFailed(file.path)}; } 4>&1`;
        const result = await file.link.run(script, {
          stdin: fileContent(file, handle, hash, start, end),
          signal: stop,
          maxOutputBytes: 64 * 1024,
          what: `the upload of ${file.path}`,
        });
        checkSent(file, result, hash.digest('hex'), ` (bytes ${start}–${end})`);
      }),
      signal,
    );
  } finally {
    await close();
  }
  file.progress.fileDone();
}
