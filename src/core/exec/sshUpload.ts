/**
 * An upload over SSH, verified on the target: the files the target already has with the same
 * content (a run directory on a network volume a new pod mounts again) are not sent; the rest go
 * as one in-process tar stream into `tar -x` (one channel, no local `tar`, constant memory,
 * symlinks never followed), each file hashed (SHA-256) as it is read for the stream; then the
 * target hashes what it wrote (`sha256sum -c`) against those hashes. Big files go beside the
 * stream, each through a channel of its own that the target hashes as it writes it (see
 * sendHashed), so their check costs no second read; on a distant link a big file goes as
 * several byte ranges at once, each through a channel of its own (see sendStriped). POSIX sh,
 * `tar`, `tee`, `dd` and `sha256sum` on the target (GNU or busybox; OpenSSL's SHA-256 where it is
 * there and passes a self-test).
 */
import { createHash, type Hash } from 'node:crypto';
import { constants, createReadStream } from 'node:fs';
import { lstat, open, readdir, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { ExecError, type ExecResult, type UploadOptions } from './executor';
import { excerpt } from './errors';
import { PICK_SHA256, shQuote } from './shell';
import { tarDirectory } from './tar';
import type { TransferLink } from './sshTransfer';
import { describeError } from '../errors';

/** Bytes per channel write of the archive (fewer, larger writes). */
const ARCHIVE_PIECE_BYTES = 256 * 1024;
/**
 * Files from this size on go through a channel of their own, which the target hashes as it
 * writes them (`tee | sha256sum`): their check overlaps the transfer instead of reading the whole
 * file again after it (about a fifth of a 1 GiB upload's time).
 */
const OWN_CHANNEL_MIN_BYTES = 16 * 1024 * 1024;
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
/** Files of the verification listed per `sha256sum -c` command's stdin (bounded output). */
const SHA_LINE = /^([0-9a-f]{64}) [ *](.*)$/;

/**
 * Names `sha256sum` lists as they are (GNU escapes a name holding a backslash or a newline, and
 * busybox cannot read such lines back): others are sent, but not compared before or checked
 * after (the caller is told).
 */
function listable(path: string): boolean {
  return !/[\\\n\r]/.test(path);
}

/**
 * The regular files under `dir` (relative POSIX paths), minus top-level `exclude`; links skipped.
 * Their sizes go into `sizes` when given.
 */
export async function regularFiles(
  dir: string,
  exclude: readonly string[],
  sizes?: Map<string, number>,
): Promise<string[]> {
  const out: string[] = [];
  const skip = new Set(exclude);
  const walk = async (relative: string): Promise<void> => {
    const names = await readdir(relative ? join(dir, relative) : dir);
    for (const name of names) {
      if (!relative && skip.has(name)) continue;
      const path = relative ? `${relative}/${name}` : name;
      const stats = await lstat(join(dir, path)).catch(() => null);
      if (stats?.isDirectory()) await walk(path);
      else if (stats?.isFile()) {
        out.push(path);
        sizes?.set(path, stats.size);
      }
    }
  };
  await walk('');
  return out;
}

async function sha256Of(file: string, signal?: AbortSignal): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file, { highWaterMark: 256 * 1024, signal })) {
    hash.update(chunk as Buffer);
  }
  return hash.digest('hex');
}

/** `sha256sum` lines (`<hex>  <path>`) by path. */
function parseSums(text: string): Map<string, string> {
  const sums = new Map<string, string>();
  for (const line of text.split('\n')) {
    const match = SHA_LINE.exec(line);
    if (match) sums.set(match[2]!, match[1]!);
  }
  return sums;
}

/** The line the target prints first when the directory exists (it may hold some of the files). */
const HAVE_DIR = 'have-dir';

/**
 * The SHA-256 of each of `paths` the target has as a regular file under `remoteDir` (none when
 * the directory does not exist yet, as for a new run), and whether the link is distant.
 * `onDirExists` is called as soon as the target says the directory exists, before it hashes:
 * the local side can hash meanwhile.
 */
async function remoteSums(
  link: TransferLink,
  remoteDir: string,
  paths: readonly string[],
  sizes: ReadonlyMap<string, number>,
  onDirExists: () => void,
  signal?: AbortSignal,
): Promise<{ sums: Map<string, string>; distant: boolean }> {
  if (paths.length === 0) return { sums: new Map(), distant: false };
  // Each line: `b` (a big file here: the fastest hasher the pod has, see PICK_SHA256) or `s`,
  // then the path.
  const script =
    `cd -- ${shQuote(remoteDir)} 2>/dev/null || exit 0; echo ${HAVE_DIR}; ` +
    `${PICK_SHA256}; ` +
    `while IFS= read -r l; do f=\${l#? }; if [ -f "$f" ] && [ ! -L "$f" ]; then ` +
    `if [ "\${l%% *}" = b ]; then d=$($h < "$f") && printf '%s  %s\\n' "\${d%% *}" "$f"; ` +
    `else sha256sum -- "$f"; fi; fi; done; exit 0`;
  const chunks: Buffer[] = [];
  let told = false;
  const result = await link.run(script, {
    stdin: paths
      .map((path) => `${(sizes.get(path) ?? 0) >= OWN_CHANNEL_MIN_BYTES ? 'b' : 's'} ${path}\n`)
      .join(''),
    signal,
    what: 'the look at the files the pod has',
    onStdout: (chunk) => {
      chunks.push(chunk);
      if (!told && Buffer.concat(chunks).toString('utf8').startsWith(`${HAVE_DIR}\n`)) {
        told = true;
        onDirExists();
      }
    },
  });
  if (result.code !== 0) {
    throw new ExecError(
      'io',
      `looking at the files already in ${remoteDir} on ${link.where} failed (exit ${result.code ?? result.signal}): ${excerpt(result.stderr)}`,
    );
  }
  return {
    sums: parseSums(Buffer.concat(chunks).toString('utf8')),
    distant: result.distant === true,
  };
}

/** What an upload did (for messages and the benchmark). */
export interface UploadSummary {
  /** Files sent in the archive. */
  sent: number;
  /** Files the target already had with the same content. */
  kept: number;
}

/** Copies the contents of `localDir` into `remoteDir` (see the file comment). */
export async function uploadVerified(
  link: TransferLink,
  localDir: string,
  remoteDir: string,
  options: UploadOptions,
): Promise<UploadSummary> {
  const { signal } = options;
  const sizes = new Map<string, number>();
  const all = await regularFiles(localDir, options.exclude, sizes).catch((error: unknown) => {
    throw new ExecError('io', `the upload could not read its input: ${describeError(error)}`, {
      cause: error,
    });
  });
  const files = all.filter(listable);
  // Only a directory that exists (a volume mounted again) has any: one short command otherwise.
  // When it exists, the local files are hashed while the target hashes its copies.
  const ours = new Map<string, string | null>();
  let hashing: Promise<void> = Promise.resolve();
  const { sums: theirs, distant } = await remoteSums(
    link,
    remoteDir,
    files,
    sizes,
    () => {
      hashing = (async () => {
        for (const path of files) {
          if (signal?.aborted) return;
          ours.set(path, await sha256Of(join(localDir, path), signal).catch(() => null));
        }
      })();
    },
    signal,
  );
  await hashing;
  const kept = new Set<string>();
  for (const [path, sum] of theirs) if (ours.get(path) === sum) kept.add(path);
  const progress = uploadProgress(all, sizes, kept, options.onProgress);
  const own = files.filter(
    (path) => !kept.has(path) && (sizes.get(path) ?? 0) >= OWN_CHANNEL_MIN_BYTES,
  );
  const sendsOwn = new Set(own);
  const sums = new Map<string, string>();
  const archive = coalesce(
    tarDirectory(localDir, {
      exclude: options.exclude,
      onWarning: options.onWarning,
      signal,
      skip: (path) => kept.has(path) || sendsOwn.has(path),
      onFileHash: (path, sum) => {
        sums.set(path, sum);
        progress.fileDone();
      },
      onContentBytes: progress.bytes,
    }),
    ARCHIVE_PIECE_BYTES,
  );
  const dir = shQuote(remoteDir);
  // "checking" once every byte is sent and the pod still has files to hash.
  let sent = 0;
  const oneSent = (): void => {
    if (++sent === 2 && sums.size > 0) progress.checking();
  };
  // The big files one after the other beside the archive: the target writes and hashes each
  // while the archive unpacks (two processes there, on two cores). Either failing stops the other.
  await allOrNone(
    [
      async (stop) => {
        const result = await link.run(`mkdir -p -- ${dir} && tar -x -f - -C ${dir}`, {
          stdin: archive,
          signal: stop,
          maxOutputBytes: 64 * 1024,
          what: 'the upload',
        });
        if (result.code !== 0) {
          throw new ExecError(
            'io',
            `unpacking the upload into ${remoteDir} on ${link.where} failed (exit ${result.code ?? result.signal}): ${excerpt(result.stderr)}`,
          );
        }
        oneSent();
        await checkOnTarget(link, remoteDir, sums, stop);
      },
      async (stop) => {
        for (const path of own) {
          const send =
            distant && (sizes.get(path) ?? 0) >= 2 * STRIPE_MIN_BYTES ? sendStriped : sendHashed;
          await send({ link, localDir, remoteDir, path, progress }, stop);
        }
        oneSent();
      },
    ],
    signal,
  );
  return { sent: sums.size + own.length, kept: kept.size };
}

/** Runs `tasks` at once; the first to fail stops the others (through their signal) and is thrown. */
async function allOrNone(
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
interface BigFile {
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

/** The message of a failed write, free of characters the shell would act on in `echo "…"`. */
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

/**
 * The upload's reports: the totals (the files not kept) at once, then each piece of content and
 * each file as it goes into the archive, then the pod's check.
 */
function uploadProgress(
  all: readonly string[],
  sizes: ReadonlyMap<string, number>,
  kept: ReadonlySet<string>,
  onProgress: UploadOptions['onProgress'],
): { bytes: (n: number) => void; fileDone: () => void; checking: () => void } {
  const sent = all.filter((path) => !kept.has(path));
  const counts = {
    bytesDone: 0,
    bytesTotal: sent.reduce((sum, path) => sum + (sizes.get(path) ?? 0), 0),
    filesDone: 0,
    filesTotal: sent.length,
  };
  onProgress?.({ ...counts });
  return {
    bytes: (n) => {
      counts.bytesDone += n;
      onProgress?.({ ...counts });
    },
    fileDone: () => {
      counts.filesDone++;
      onProgress?.({ ...counts });
    },
    checking: () => onProgress?.({ ...counts, checking: true }),
  };
}

/** The target hashes what it wrote; any file that differs (or is missing) fails the upload. */
async function checkOnTarget(
  link: TransferLink,
  remoteDir: string,
  sums: ReadonlyMap<string, string>,
  signal?: AbortSignal,
): Promise<void> {
  const lines = [...sums].filter(([path]) => listable(path)).map(([p, s]) => `${s}  ${p}\n`);
  if (lines.length === 0) return;
  const result = await link.run(`cd -- ${shQuote(remoteDir)} && sha256sum -c -`, {
    stdin: lines.join(''),
    signal,
    maxOutputBytes: 64 * 1024,
    what: 'the check of the upload',
  });
  if (result.code === 0) return;
  const failed = result.stdout
    .toString('utf8')
    .split('\n')
    .filter((line) => !/: OK$/.test(line) && line.trim() !== '');
  throw new ExecError(
    'io',
    `the upload to ${remoteDir} on ${link.where} did not verify: ${failed.length > 0 ? failed.slice(0, 5).join('; ') : excerpt(result.stderr)}`,
  );
}

/** Joins small chunks into pieces of about `bytes` (fewer, larger channel writes). */
async function* coalesce(source: AsyncIterable<Buffer>, bytes: number): AsyncGenerator<Buffer> {
  let parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of source) {
    parts.push(chunk);
    size += chunk.length;
    if (size >= bytes) {
      yield Buffer.concat(parts, size);
      parts = [];
      size = 0;
    }
  }
  if (size > 0) yield Buffer.concat(parts, size);
}
