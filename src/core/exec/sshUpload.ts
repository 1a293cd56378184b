/**
 * An upload over SSH, verified on the target: the files the target already has with the same
 * content (a run directory on a network volume a new pod mounts again) are not sent; the rest go
 * as one in-process tar stream into `tar -x` (one channel, no local `tar`, constant memory,
 * symlinks never followed), each file hashed (SHA-256) as it is read for the stream; then the
 * target hashes what it wrote (`sha256sum -c`) against those hashes. Big files go beside the
 * stream, each through a channel of its own that the target hashes as it writes it, so their
 * check costs no second read; on a distant link a big file goes as several byte ranges at once,
 * each through a channel of its own (./sshBigFiles.ts). POSIX sh,
 * `tar`, `tee`, `dd` and `sha256sum` on the target (GNU or busybox; OpenSSL's SHA-256 where it is
 * there and passes a self-test). With a relay (a cluster's rank 0, ../pod/clusterFiles.ts) the target
 * passes the archive on to other hosts as it arrives: every file goes in it, and their copies are
 * checked beside the target's.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ExecError, type ExecResult, type UploadOptions } from './executor';
import { excerpt } from './failures';
import { PICK_SHA256, shQuote } from './shell';
import { tarDirectory } from './tar';
import type { TransferLink } from './sshTransfer';
import { allOrNone, sendBigFile } from './sshBigFiles';
import { describeError } from '../errors';

/** Bytes per channel write of the archive (fewer, larger writes). */
const ARCHIVE_PIECE_BYTES = 256 * 1024;
/**
 * Files from this size on go through a channel of their own, which the target hashes as it
 * writes them (`tee | sha256sum`): their check overlaps the transfer instead of reading the whole
 * file again after it (about a fifth of a 1 GiB upload's time).
 */
const OWN_CHANNEL_MIN_BYTES = 16 * 1024 * 1024;
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

/**
 * The target passes the archive on to other hosts as it arrives (a cluster's rank 0 to the other
 * nodes): the one archive holds every file (none kept because the target has it, none through a
 * channel of its own), so that the others get them all from the one stream, while it flows.
 */
export interface UploadRelay {
  /**
   * The sh the target runs in place of `unpack` alone (which reads the archive on its stdin);
   * it exits with `unpack`'s status. `bytes`: the files' content in all.
   */
  command(unpack: string, bytes: number): string;
  /** Lines the command reads from its stdin before the archive (never an argument, never logged). */
  preamble: string;
  /** The command's result, every byte sent: throws for a host it passed the archive to that failed. */
  onResult(result: ExecResult): void;
  /**
   * The other hosts' copies checked against this machine's SHA-256s of the files sent (by path,
   * made as it read them for the archive), beside the target's own check.
   */
  verify(sums: ReadonlyMap<string, string>, signal: AbortSignal): Promise<void>;
}

/** Copies the contents of `localDir` into `remoteDir` (see the file comment). */
export async function uploadVerified(
  link: TransferLink,
  localDir: string,
  remoteDir: string,
  options: UploadOptions,
  relay?: UploadRelay,
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
  // When it exists, the local files are hashed while the target hashes its copies. A relay's
  // other hosts have none of them: everything goes.
  const ours = new Map<string, string | null>();
  let hashing: Promise<void> = Promise.resolve();
  const { sums: theirs, distant } = relay
    ? { sums: new Map<string, string>(), distant: false }
    : await remoteSums(
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
    (path) => !relay && !kept.has(path) && (sizes.get(path) ?? 0) >= OWN_CHANNEL_MIN_BYTES,
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
        const unpack = `mkdir -p -- ${dir} && tar -x -f - -C ${dir}`;
        const bytes = all.reduce((sum, path) => sum + (sizes.get(path) ?? 0), 0);
        const result = await link.run(relay ? relay.command(unpack, bytes) : unpack, {
          stdin: relay ? preceded(Buffer.from(relay.preamble), archive) : archive,
          signal: stop,
          maxOutputBytes: 64 * 1024,
          what: 'the upload',
        });
        relay?.onResult(result);
        if (result.code !== 0) {
          throw new ExecError(
            'io',
            `unpacking the upload into ${remoteDir} on ${link.where} failed (exit ${result.code ?? result.signal}): ${excerpt(result.stderr)}`,
          );
        }
        oneSent();
        await allOrNone(
          [
            (halt) => checkOnTarget(link, remoteDir, sums, halt),
            ...(relay ? [(halt: AbortSignal) => relay.verify(sums, halt)] : []),
          ],
          stop,
        );
      },
      async (stop) => {
        for (const path of own) {
          const file = { link, localDir, remoteDir, path, progress };
          await sendBigFile(file, distant, sizes.get(path) ?? 0, stop);
        }
        oneSent();
      },
    ],
    signal,
  );
  return { sent: sums.size + own.length, kept: kept.size };
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
export async function checkOnTarget(
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

/** `first`, then every chunk of `rest`. */
async function* preceded(first: Buffer, rest: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  yield first;
  yield* rest;
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
