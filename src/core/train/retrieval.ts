/**
 * Verified retrieval of a run's results (spec §7). The pod lists and hashes
 * its files (a NUL-framed SHA-256 manifest made by a POSIX sh script), the
 * list is checked before anything is written (a hostile list — `..`,
 * absolute paths, duplicates, names outside the requested entries — is
 * refused as a whole), every file is downloaded into a staging directory
 * inside the run directory while it is hashed, and only when every file
 * matches its manifest hash are the files moved into place. Nothing is ever
 * written through a symlink, and nothing outside the local run directory.
 * A dropped connection resumes: finished files are re-hashed locally and
 * kept, a partial file continues where it stopped. A file still being written
 * while it is retrieved is never taken, even when the hash and the download
 * happened to read the same bytes: the pod marks when hashing starts and says
 * at the end which files changed since (`find -newer`).
 */
import { lstat, mkdir, readdir, rename, rm, unlink } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { systemClock, type Clock } from '../clock';
import { ExecError, type DownloadedFile, type ExecResult, type Executor } from '../exec/executor';
import { excerpt } from '../exec/errors';
import { listFiles, sha256File, unsafeRelativePath } from '../exec/localFiles';
import { shQuote } from '../exec/shell';

/** The staging directory inside a local run directory (never a result name). */
export const STAGING_DIR = '.retrieving';
/** Most files a manifest may list. */
export const MANIFEST_MAX_ENTRIES = 200_000;
/** Longest path (bytes) a manifest may name, and longest single name. */
export const MANIFEST_MAX_PATH_BYTES = 4_000;
export const MANIFEST_MAX_NAME_BYTES = 255;
/** Most manifest output read from the pod. */
export const MANIFEST_MAX_BYTES = 64 * 1024 * 1024;
/** Exit code of the manifest script when the run directory is missing. */
const EXIT_NO_RUN_DIR = 3;
/** Exit code of the change check when there is no change marker (it could not be made). */
const EXIT_NO_MARKER = 5;

export interface ManifestEntry {
  /** Relative path inside the run directory, without `./`. */
  path: string;
  /** Lowercase hex SHA-256 the pod computed. */
  sha256: string;
}

export type ManifestErrorKind =
  | 'malformed'
  | 'absolute'
  | 'traversal'
  | 'empty_name'
  | 'not_utf8'
  | 'duplicate'
  | 'conflict'
  | 'outside_entries'
  | 'excluded'
  | 'too_long'
  | 'too_many';

/** The pod's file list was refused; nothing was downloaded. */
export class ManifestError extends Error {
  constructor(
    readonly kind: ManifestErrorKind,
    /** The offending name as the pod gave it (escaped for display in the message). */
    readonly file: string,
    reason: string,
  ) {
    super(
      `refusing the pod's file list: ${display(file)} ${reason}. Nothing was downloaded and ` +
        `nothing was written outside the run directory; the pod's run directory holds ` +
        `unexpected files, so inspect it before retrieving again.`,
    );
    this.name = 'ManifestError';
  }
}

export type RetrievalErrorKind = 'run_dir_missing' | 'manifest_failed' | 'local_conflict';

/** Retrieval could not run or finish (not a verification failure: those are in the result). */
export class RetrievalError extends Error {
  constructor(
    readonly kind: RetrievalErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'RetrievalError';
  }
}

/** A name for a message: quoted, control characters escaped, cut at 200 characters. */
function display(name: string): string {
  const shown = name.length > 200 ? `${name.slice(0, 200)}…` : name;
  return JSON.stringify(shown);
}

/** An entry as `find` will be given it: relative, no `./`, no trailing `/`. */
export function normalizeEntry(entry: string): string {
  let path = entry.trim();
  while (path.startsWith('./')) path = path.slice(2);
  while (path.endsWith('/')) path = path.slice(0, -1);
  const reason = unsafeRelativePath(path);
  if (reason) {
    throw new RetrievalError('manifest_failed', `the artifact entry ${display(entry)} ${reason}`);
  }
  if (path === STAGING_DIR || path.startsWith(`${STAGING_DIR}/`)) {
    throw new RetrievalError('manifest_failed', `the artifact entry ${display(entry)} is reserved`);
  }
  return path;
}

/** Entries normalized, without duplicates or entries inside another entry. */
function normalizeEntries(entries: readonly string[]): string[] {
  const paths = [...new Set(entries.map(normalizeEntry))].sort();
  return paths.filter(
    (path) => !paths.some((other) => other !== path && path.startsWith(`${other}/`)),
  );
}

/**
 * Excludes are name globs left out at any depth (`checkpoint-*`); one that starts with `!` is a
 * path kept all the same, as in a .gitignore (`!output/checkpoint-12`: a stopped run's snapshot).
 */
function splitExcludes(excludes: readonly string[]): { globs: string[]; kept: string[] } {
  const globs: string[] = [];
  const kept: string[] = [];
  for (const exclude of excludes) {
    if (exclude.startsWith('!')) kept.push(normalizeEntry(exclude.slice(1)));
    else globs.push(exclude);
  }
  return { globs, kept };
}

/** The common frame of the pod-side scripts: cd, then `find` per existing entry. */
function findScript(
  runDir: string,
  entries: readonly string[],
  excludeGlobs: readonly string[],
  action: (find: string) => string[],
  prelude: string[] = [],
  postlude: string[] = [],
): string {
  const paths = normalizeEntries(entries);
  const { globs, kept } = splitExcludes(excludeGlobs);
  const keep = kept.map((path) => ` ! -path ${shQuote(`./${path}`)}`).join('');
  const prune =
    globs.length === 0
      ? ''
      : `\\( \\( ${globs.map((glob) => `-name ${shQuote(glob)}`).join(' -o ')} \\)${keep} \\) -prune -o `;
  return [
    `cd -- ${shQuote(runDir)} 2>/dev/null || { echo "no run directory ${runDir.replace(/["`$\\]/g, '')}" >&2; exit ${EXIT_NO_RUN_DIR}; }`,
    ...prelude,
    `for e in ${paths.map((path) => shQuote(`./${path}`)).join(' ') || "''"}; do`,
    `  [ -n "$e" ] || continue`,
    `  [ -e "$e" ] || [ -h "$e" ] || continue`,
    ...action(`find "$e" ${prune}-type f`).map((line) => `  ${line}`),
    `done`,
    ...postlude,
    '',
  ].join('\n');
}

/**
 * The change marker of one retrieval on the pod, relative to the run
 * directory: inside the reserved staging name, which no entry can be or
 * contain, so it is never walked nor retrieved.
 */
function changeMarkerPath(marker: string): string {
  if (!/^[0-9a-f]{8,64}$/.test(marker)) {
    throw new RetrievalError('manifest_failed', `the change marker ${display(marker)} is not hex`);
  }
  return `./${STAGING_DIR}/changes.${marker}`;
}

/**
 * Makes the change marker `$m`, then waits until the clock, as `find -newer`
 * sees it, has moved past the marker's mtime (a few ms where find compares
 * nanoseconds, up to a second where it compares seconds, as busybox does):
 * any write after this wait makes a file newer than the marker, any write
 * before it leaves the file not newer, so a file last written just before the
 * retrieval is not taken for a changing one. A marker that cannot be made
 * (disk full) or a clock that does not move is removed: the check is skipped.
 */
function changeMarkerLines(marker: string): string[] {
  return [
    `m=${shQuote(changeMarkerPath(marker))}`,
    `if mkdir -p ./${STAGING_DIR} 2>/dev/null && touch "$m" 2>/dev/null; then`,
    `  if sleep 0.01 2>/dev/null; then d=0.01; n=400; else d=1; n=4; fi`,
    `  i=0`,
    `  while :; do`,
    `    touch "$m.tick" 2>/dev/null || { rm -f "$m"; break; }`,
    `    [ -z "$(find "$m.tick" -newer "$m" 2>/dev/null)" ] || break`,
    `    i=$((i + 1)); [ "$i" -lt "$n" ] || { rm -f "$m"; break; }`,
    `    sleep "$d"`,
    `  done`,
    `  rm -f "$m.tick"`,
    `fi`,
  ];
}

/**
 * The POSIX sh script that lists and hashes `entries` of `runDir` on the pod:
 * `<64 hex>  ./<path>\0` per regular file (links never followed), subtrees
 * whose name matches an exclude glob left out. GNU `sha256sum -z` hashes in
 * batches without escaping names; elsewhere (busybox) each file is fed to
 * `sha256sum` on stdin, which is safe for any name. Exit 3: no run directory;
 * any other failure (an unreadable file, a vanished one) fails the script, so
 * an incomplete list is never taken for a complete one. With `changeMarker`
 * (hex), the change marker is made before anything is hashed (see
 * {@link changedScript}).
 */
export function manifestScript(
  runDir: string,
  entries: readonly string[],
  excludeGlobs: readonly string[] = [],
  changeMarker?: string,
): string {
  const perFile = `for f do h=$(sha256sum < "$f") || exit 1; printf "%s  %s\\0" "\${h%% *}" "$f"; done`;
  return findScript(
    runDir,
    entries,
    excludeGlobs,
    (find) => [
      `if [ "$z" = 1 ]; then`,
      `  ${find} -exec sha256sum -z -- {} + || exit 4`,
      `else`,
      `  ${find} -exec sh -c ${shQuote(perFile)} sh {} + || exit 4`,
      `fi`,
    ],
    [
      ...(changeMarker === undefined ? [] : changeMarkerLines(changeMarker)),
      `if printf '' | sha256sum -z >/dev/null 2>&1; then z=1; else z=0; fi`,
    ],
  );
}

/**
 * The files of the same walk as {@link manifestScript} modified since its
 * change marker was made (`./<path>\0` each), once the downloads and the
 * hashing are over: a file listed here was still being written while it was
 * retrieved, whatever bytes were read. Removes the marker. Exit 5: there is
 * no marker (it could not be made); 4: the walk failed.
 */
export function changedScript(
  runDir: string,
  entries: readonly string[],
  excludeGlobs: readonly string[],
  changeMarker: string,
): string {
  return findScript(
    runDir,
    entries,
    excludeGlobs,
    (find) => [`${find} -newer "$m" -print0 || s=4`],
    [
      `m=${shQuote(changeMarkerPath(changeMarker))}`,
      `[ -f "$m" ] || { echo "no change marker" >&2; exit ${EXIT_NO_MARKER}; }`,
      `s=0`,
    ],
    [`rm -f "$m"`, `rmdir ./${STAGING_DIR} 2>/dev/null`, `exit "$s"`],
  );
}

/**
 * The same walk as {@link manifestScript} without hashing: `./<path>\0` per
 * file, at once. Retrieval starts downloading from it while the manifest is
 * still hashing on the pod; the manifest stays the authority.
 */
export function listingScript(
  runDir: string,
  entries: readonly string[],
  excludeGlobs: readonly string[] = [],
): string {
  return findScript(runDir, entries, excludeGlobs, (find) => [`${find} -print0 || exit 4`]);
}

/** A shell glob (`*`, `?`, `[...]`) as a whole-name regular expression. */
function globRegExp(glob: string): RegExp {
  let source = '';
  for (let i = 0; i < glob.length; i++) {
    const char = glob[i]!;
    if (char === '*') source += '.*';
    else if (char === '?') source += '.';
    else if (char === '[') {
      const end = glob.indexOf(']', i + 2);
      if (end < 0) {
        source += '\\[';
        continue;
      }
      let body = glob.slice(i + 1, end);
      if (body.startsWith('!')) body = `^${body.slice(1)}`;
      source += `[${body.replace(/\\/g, '\\\\')}]`;
      i = end;
    } else source += char.replace(/[.+^${}()|\\/]/g, '\\$&');
  }
  return new RegExp(`^${source}$`, 's');
}

export interface ParseManifestOptions {
  /** The requested entries: every name must be one of them or lie below one. */
  entries: readonly string[];
  /**
   * Exclude globs: no name may have a segment matching one, except under a path kept with `!`
   * (see {@link RetrieveOptions.excludes}).
   */
  excludes?: readonly string[];
  maxEntries?: number;
  maxPathBytes?: number;
}

const RECORD = /^([0-9a-f]{64})( [ *])/;

/**
 * Checks the names of one list (manifest or listing) as they come: each must
 * be `./<relative path>` below a requested entry, valid UTF-8, without `..`
 * or empty segments, not excluded, not too long, listed once, and never both
 * a file and a directory.
 */
class NameChecker {
  private readonly entries: string[];
  private readonly excludes: RegExp[];
  private readonly kept: string[];
  private readonly maxEntries: number;
  private readonly maxPathBytes: number;
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });
  private readonly names = new Set<string>();
  private readonly parents = new Set<string>();

  constructor(options: ParseManifestOptions) {
    this.entries = normalizeEntries(options.entries);
    const { globs, kept } = splitExcludes(options.excludes ?? []);
    this.excludes = globs.map(globRegExp);
    this.kept = kept;
    this.maxEntries = options.maxEntries ?? MANIFEST_MAX_ENTRIES;
    this.maxPathBytes = options.maxPathBytes ?? MANIFEST_MAX_PATH_BYTES;
  }

  /** The relative path of a `./<path>` name, or a ManifestError. */
  check(nameBytes: Buffer): string {
    if (this.names.size >= this.maxEntries) {
      throw new ManifestError('too_many', '', `lists more than ${this.maxEntries} files`);
    }
    let name: string;
    try {
      name = this.decoder.decode(nameBytes);
    } catch {
      throw new ManifestError('not_utf8', nameBytes.toString('latin1'), 'is not valid UTF-8');
    }
    if (nameBytes.length === 0) throw new ManifestError('empty_name', name, 'is an empty name');
    if (name.startsWith('/')) throw new ManifestError('absolute', name, 'is an absolute path');
    if (!name.startsWith('./')) {
      throw new ManifestError('malformed', name, 'does not start with `./`');
    }
    const path = name.slice(2);
    if (path.length === 0) throw new ManifestError('empty_name', name, 'is an empty name');
    if (nameBytes.length - 2 > this.maxPathBytes) {
      throw new ManifestError('too_long', name, `is longer than ${this.maxPathBytes} bytes`);
    }
    const segments = path.split('/');
    const kept = this.kept.some((keep) => path === keep || path.startsWith(`${keep}/`));
    for (const segment of segments) {
      if (segment === '..') throw new ManifestError('traversal', name, 'climbs out with `..`');
      if (segment === '' || segment === '.') {
        throw new ManifestError('malformed', name, 'has an empty or `.` path segment');
      }
      if (Buffer.byteLength(segment) > MANIFEST_MAX_NAME_BYTES) {
        throw new ManifestError(
          'too_long',
          name,
          `has a name longer than ${MANIFEST_MAX_NAME_BYTES} bytes`,
        );
      }
      if (!kept && this.excludes.some((glob) => glob.test(segment))) {
        throw new ManifestError(
          'excluded',
          name,
          'matches an exclude pattern the pod should have left out',
        );
      }
    }
    if (!this.entries.some((entry) => path === entry || path.startsWith(`${entry}/`))) {
      throw new ManifestError('outside_entries', name, 'is not under the requested artifacts');
    }
    if (this.names.has(path)) throw new ManifestError('duplicate', name, 'is listed twice');
    if (this.parents.has(path)) {
      throw new ManifestError('conflict', name, 'is listed as a file and as a directory');
    }
    let prefix = '';
    for (const segment of segments.slice(0, -1)) {
      prefix = prefix ? `${prefix}/${segment}` : segment;
      if (this.names.has(prefix)) {
        throw new ManifestError('conflict', name, 'lies below a name listed as a file');
      }
      this.parents.add(prefix);
    }
    this.names.add(path);
    return path;
  }
}

/** The NUL-terminated records of `buffer` (refusing a cut-short last one). */
function records(buffer: Buffer): Buffer[] {
  if (buffer.length === 0) return [];
  if (buffer[buffer.length - 1] !== 0) {
    const tail = buffer.subarray(buffer.lastIndexOf(0) + 1).toString('latin1');
    throw new ManifestError('malformed', tail, 'is not NUL-terminated (the list was cut short)');
  }
  const out: Buffer[] = [];
  let start = 0;
  while (start < buffer.length) {
    const end = buffer.indexOf(0, start);
    out.push(buffer.subarray(start, end));
    start = end + 1;
  }
  return out;
}

/**
 * The entries of a NUL-framed manifest, or a {@link ManifestError} for the
 * first hostile or malformed record: the whole list is refused, never a part.
 */
export function parseManifest(buffer: Buffer, options: ParseManifestOptions): ManifestEntry[] {
  const checker = new NameChecker(options);
  return records(buffer).map((record) => {
    const head = RECORD.exec(record.subarray(0, 66).toString('latin1'));
    if (!head) {
      throw new ManifestError(
        'malformed',
        record.toString('latin1'),
        'is not `<sha256>  ./<path>`',
      );
    }
    return { path: checker.check(record.subarray(66)), sha256: head[1]! };
  });
}

/** The names of a NUL-framed listing (`./<path>\0`), checked like a manifest's. */
export function parseListing(buffer: Buffer, options: ParseManifestOptions): string[] {
  const checker = new NameChecker(options);
  return records(buffer).map((record) => checker.check(record));
}

export interface Mismatch {
  file: string;
  /**
   * `changed`: the file was written on the pod while it was retrieved (a process there still
   * writes it), whatever its hash; `hash`: the downloaded bytes are not the ones the pod hashed;
   * `missing`: it vanished before it was downloaded.
   */
  reason: 'changed' | 'hash' | 'missing';
  /** Absent for a file that appeared while retrieving (the manifest did not list it). */
  expectedSha256?: string;
  actualSha256?: string;
}

/**
 * What went wrong, for the run's message: files still being written first (with
 * what to do about them), then files that did not verify; a few names each.
 */
export function describeMismatches(mismatches: readonly Mismatch[]): string {
  const names = (list: readonly Mismatch[]): string =>
    list
      .slice(0, 3)
      .map((m) => m.file)
      .join(', ') + (list.length > 3 ? ', …' : '');
  const changed = mismatches.filter((m) => m.reason === 'changed');
  const other = mismatches.filter((m) => m.reason !== 'changed');
  const parts: string[] = [];
  if (changed.length > 0) {
    parts.push(
      `${changed.length} file(s) were still being written on the pod while they were retrieved ` +
        `(${names(changed)}): none was taken; stop whatever still writes them (or let it finish), ` +
        `then retrieve again`,
    );
  }
  if (other.length > 0) parts.push(`${other.length} file(s) did not verify (${names(other)})`);
  return parts.join('; ');
}

export interface RetrieveProgress {
  phase: 'listing' | 'checking' | 'downloading' | 'moving';
  filesDone: number;
  filesTotal: number;
  /** Bytes of finished and partially downloaded files on disk so far. */
  bytesDone: number;
  file?: string;
}

export interface RetrieveOptions {
  executor: Executor;
  remoteRunDir: string;
  localRunDir: string;
  /** What comes back (`output/`, `metrics.jsonl`, `job.log`). */
  entries: readonly string[];
  /**
   * Names left out at any depth (`checkpoint-*`); one starting with `!` is a path brought back
   * all the same (`!output/checkpoint-12`, a stopped run's snapshot).
   */
  excludes?: readonly string[];
  signal?: AbortSignal;
  onProgress?: (progress: RetrieveProgress) => void;
  clock?: Clock;
  /** Tries in all when the connection drops (each resumes the last). Default 3. */
  attempts?: number;
  /** Wait between those tries. Default 1 s. */
  retryDelayMs?: number;
  /** Least time between two download progress reports. Default 100 ms. */
  progressIntervalMs?: number;
}

export interface RetrieveResult {
  /** Every listed file is in place and matched its SHA-256. */
  verified: boolean;
  /** Files the pod listed. */
  files: number;
  /** Their total size as downloaded. */
  bytes: number;
  /** Bytes that came over the wire in this call. */
  transferredBytes: number;
  /** Bytes reused from an earlier, interrupted call (staged files and partials). */
  reusedBytes: number;
  mismatches: Mismatch[];
  manifest: ManifestEntry[];
}

/**
 * Lists the files on the pod and downloads them at once, while the pod hashes
 * them (the manifest); then checks each file's SHA-256 (computed locally as
 * it was written) against the manifest, and moves the files into
 * `localRunDir` only when every one matched. Not verified → nothing moved,
 * the verified files stay staged for the next call. A refused list stops
 * everything and removes the staging directory. Throws
 * {@link ManifestError} (a hostile list), {@link RetrievalError} or ExecError.
 */
export async function retrieve(options: RetrieveOptions): Promise<RetrieveResult> {
  const clock = options.clock ?? systemClock;
  const attempts = Math.max(1, options.attempts ?? 3);
  const excludes = options.excludes ?? [];
  const entries = normalizeEntries(options.entries);
  const progressEveryMs = options.progressIntervalMs ?? 100;
  const { executor, remoteRunDir } = options;
  const stop = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;

  const withRetries = async <T>(action: () => Promise<T>): Promise<T> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await action();
      } catch (error) {
        if (!(error instanceof ExecError && error.kind === 'connection') || attempt >= attempts) {
          throw error;
        }
        await clock.sleep(options.retryDelayMs ?? 1_000, signal);
      }
    }
  };
  const execScript = (script: string, onTry?: () => void): Promise<ExecResult> =>
    withRetries(() => {
      onTry?.();
      return executor.exec(script, { signal, maxOutputBytes: MANIFEST_MAX_BYTES });
    });
  const outputOf = (result: ExecResult, what: string): Buffer => {
    if (result.code === EXIT_NO_RUN_DIR) {
      throw new RetrievalError(
        'run_dir_missing',
        `the run directory ${remoteRunDir} does not exist on the target: there is nothing to retrieve`,
      );
    }
    if (result.code !== 0) {
      throw new RetrievalError(
        'manifest_failed',
        `${what} the results on the target failed (exit ${result.code ?? result.signal}): ${excerpt(result.stderr)}; retry the retrieval`,
      );
    }
    if (result.truncated) {
      throw new ManifestError('too_many', '', `is longer than ${MANIFEST_MAX_BYTES} bytes`);
    }
    return result.stdout;
  };
  const runScript = async (script: string, what: string): Promise<Buffer> =>
    outputOf(await execScript(script), what);
  // Made on the pod before it hashes anything; see changedScript.
  const marker = randomBytes(8).toString('hex');
  /** Files the pod says were written since the marker; none when it could not make one. */
  const changedSince = async (): Promise<Set<string>> => {
    let tries = 0;
    const result = await execScript(
      changedScript(remoteRunDir, entries, excludes, marker),
      () => tries++,
    );
    if (result.code === EXIT_NO_MARKER) {
      // A try that ran removed the marker: a later try that finds none cannot tell.
      if (tries > 1) {
        throw new RetrievalError(
          'manifest_failed',
          'the connection dropped while checking whether the results changed during the retrieval; retry the retrieval',
        );
      }
      return new Set();
    }
    const out = outputOf(result, 'checking for changes in');
    return new Set(parseListing(out, { entries, excludes }));
  };

  options.onProgress?.({ phase: 'listing', filesDone: 0, filesTotal: 0, bytesDone: 0 });
  // The pod hashes while the files already travel; a refused manifest stops the transfer.
  const manifestDone = runScript(
    manifestScript(remoteRunDir, entries, excludes, marker),
    'hashing',
  ).then((out) => parseManifest(out, { entries, excludes }));
  manifestDone.catch(() => stop.abort());
  let listed: string[];
  try {
    listed = parseListing(
      await runScript(listingScript(remoteRunDir, entries, excludes), 'listing'),
      { entries, excludes },
    );
  } catch (error) {
    stop.abort();
    const manifestError = await manifestDone.then(
      () => undefined,
      (caught: unknown) => caught,
    );
    // Stopped because the manifest failed first: its error is the one that explains.
    const ours = error instanceof ExecError && error.kind === 'aborted' && !options.signal?.aborted;
    throw ours && manifestError ? manifestError : error;
  }

  await mkdir(options.localRunDir, { recursive: true });
  const staging = join(options.localRunDir, STAGING_DIR);
  await ensureOwnDir(staging);
  const doneDir = join(staging, 'files');
  const partDir = join(staging, 'partial');
  const checkLength = (path: string): void => {
    if (Buffer.byteLength(join(doneDir, path)) > MANIFEST_MAX_PATH_BYTES) {
      throw new ManifestError('too_long', `./${path}`, 'would make a local path that is too long');
    }
  };
  listed.forEach(checkLength);

  // Resume: hash what an earlier call staged; drop what the pod no longer lists.
  const listedSet = new Set(listed);
  const local = new Map<string, DownloadedFile>();
  const staged = await listFiles(doneDir);
  let checked = 0;
  for (const path of staged) {
    const full = join(doneDir, path);
    if (listedSet.has(path) && (await lstat(full)).isFile()) {
      options.onProgress?.({
        phase: 'checking',
        filesDone: checked++,
        filesTotal: staged.size,
        bytesDone: 0,
        file: path,
      });
      const hashed = await sha256File(full);
      local.set(path, { file: path, ...hashed, resumedBytes: hashed.bytes });
    } else {
      await rm(full, { recursive: true, force: true });
    }
  }
  for (const path of await listFiles(partDir)) {
    if (!listedSet.has(path)) await rm(join(partDir, path), { recursive: true, force: true });
  }

  let lastReportMs = -Infinity;
  const inFlight = new Map<string, number>();
  let settledBytes = 0;
  for (const file of local.values()) if (!file.missing) settledBytes += file.bytes;
  let filesTotal = listed.length;
  const report = (file: string | undefined, force: boolean): void => {
    if (!options.onProgress) return;
    const now = clock.nowMs();
    if (!force && now - lastReportMs < progressEveryMs) return;
    lastReportMs = now;
    let partial = 0;
    for (const value of inFlight.values()) partial += value;
    options.onProgress({
      phase: 'downloading',
      filesDone: local.size,
      filesTotal,
      bytesDone: settledBytes + partial,
      file,
    });
  };
  const downloadAll = (files: readonly string[]): Promise<void> =>
    withRetries(async () => {
      const todo = files.filter((path) => !local.has(path));
      if (todo.length === 0) return;
      await executor.download(remoteRunDir, doneDir, todo, {
        signal,
        partDir,
        onProgress: (p) => {
          inFlight.set(p.file, p.bytesDone);
          report(p.file, false);
        },
        onFile: (done) => {
          inFlight.delete(done.file);
          local.set(done.file, done);
          if (!done.missing) settledBytes += done.bytes;
          report(done.file, true);
        },
      });
    });

  let downloadError: unknown;
  await downloadAll(listed).catch((error: unknown) => (downloadError = error));
  let manifest: ManifestEntry[];
  try {
    manifest = await manifestDone;
  } catch (error) {
    if (error instanceof ManifestError) {
      // The pod is not to be trusted: keep nothing it sent.
      await rm(staging, { recursive: true, force: true });
    }
    throw error;
  }
  if (downloadError) throw downloadError;
  const expected = new Map(manifest.map((entry) => [entry.path, entry.sha256]));
  // Files that appeared between the listing and the hashing, and files staged by an
  // earlier call that no longer match (the pod's copy changed since): fetched now.
  const late = manifest.map((entry) => entry.path).filter((path) => !listedSet.has(path));
  for (const path of staged) {
    const file = local.get(path);
    if (file && !file.missing && expected.has(path) && file.sha256 !== expected.get(path)) {
      local.delete(path);
      settledBytes -= file.bytes;
      await rm(join(doneDir, path), { force: true });
      late.push(path);
    }
  }
  if (late.length > 0) {
    late.forEach(checkLength);
    filesTotal = listed.length + late.filter((path) => !listedSet.has(path)).length;
    await downloadAll(late);
  }

  // Files written on the pod since hashing began: still being written, so whatever bytes
  // were read (the hash and the download can read the same torn bytes), none is taken.
  let changed: Set<string>;
  try {
    changed = await changedSince();
  } catch (error) {
    if (error instanceof ManifestError) await rm(staging, { recursive: true, force: true });
    throw error;
  }

  const mismatches: Mismatch[] = [];
  let bytes = 0;
  let reusedBytes = 0;
  let transferredBytes = 0;
  for (const [path, file] of local) {
    const want = expected.get(path);
    if (want === undefined) {
      // Listed, then gone before it was hashed: not a result.
      if (!file.missing) await rm(join(doneDir, path), { force: true });
      continue;
    }
    if (changed.has(path)) {
      mismatches.push({
        file: path,
        reason: 'changed',
        expectedSha256: want,
        ...(file.missing ? {} : { actualSha256: file.sha256 }),
      });
      // Not kept: the next retrieval downloads it again.
      if (!file.missing) await rm(join(doneDir, path), { force: true });
      continue;
    }
    if (file.missing) {
      mismatches.push({ file: path, reason: 'missing', expectedSha256: want });
      continue;
    }
    reusedBytes += file.resumedBytes;
    transferredBytes += file.bytes - file.resumedBytes;
    if (file.sha256 === want) {
      bytes += file.bytes;
    } else {
      mismatches.push({
        file: path,
        reason: 'hash',
        expectedSha256: want,
        actualSha256: file.sha256,
      });
      // Not kept: the next retrieval downloads it again.
      await rm(join(doneDir, path), { force: true });
    }
  }
  for (const { path, sha256 } of manifest) {
    if (!local.has(path)) {
      const reason = changed.has(path) ? 'changed' : 'missing';
      mismatches.push({ file: path, reason, expectedSha256: sha256 });
    }
  }
  // Appeared after the pod listed its files: something there still writes results.
  for (const path of changed) {
    if (!expected.has(path)) mismatches.push({ file: path, reason: 'changed' });
  }

  const verified = mismatches.length === 0;
  if (verified) {
    options.onProgress?.({
      phase: 'moving',
      filesDone: manifest.length,
      filesTotal: manifest.length,
      bytesDone: bytes,
    });
    if (manifest.length > 0) await moveInto(doneDir, options.localRunDir);
    await rm(staging, { recursive: true, force: true });
  }
  return {
    verified,
    files: manifest.length,
    bytes,
    transferredBytes,
    reusedBytes,
    mismatches,
    manifest,
  };
}

/** The staging dir exists as a real directory of ours (a link there is removed, not followed). */
async function ensureOwnDir(path: string): Promise<void> {
  try {
    const stats = await lstat(path);
    if (stats.isDirectory()) return;
    await unlink(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  await mkdir(path);
}

/**
 * Moves the staged tree into the run directory: a whole subtree in one rename
 * where nothing is there yet, file by file where it is. Checked first, moved
 * after, so a conflict (a local symlink, a file where a directory goes) moves
 * nothing.
 */
async function moveInto(from: string, to: string): Promise<void> {
  const moves: [string, string][] = [];
  const plan = async (relative: string): Promise<void> => {
    const dir = relative ? join(from, relative) : from;
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = relative ? `${relative}/${entry.name}` : entry.name;
      const target = join(to, path);
      let stats;
      try {
        stats = await lstat(target);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        moves.push([join(from, path), target]);
        continue;
      }
      if (stats.isSymbolicLink()) {
        throw new RetrievalError(
          'local_conflict',
          `${target} is a symlink: refusing to write through it. Nothing was moved; the verified files wait in ${join(to, STAGING_DIR)}. Remove the link and retrieve again.`,
        );
      }
      if (entry.isDirectory() && stats.isDirectory()) {
        await plan(path);
      } else if (entry.isFile() && stats.isFile()) {
        moves.push([join(from, path), target]);
      } else {
        throw new RetrievalError(
          'local_conflict',
          `${target} is ${stats.isDirectory() ? 'a directory' : 'not a regular file'} where the pod has ${entry.isDirectory() ? 'a directory' : 'a file'}. Nothing was moved; move it away and retrieve again.`,
        );
      }
    }
  };
  await plan('');
  for (const [source, target] of moves) await rename(source, target);
}
