/**
 * The pod's file list for a retrieval, checked before anything is written: a
 * NUL-framed SHA-256 manifest (`<64 hex>  ./<path>\0`) or listing
 * (`./<path>\0`). A hostile list — `..`, absolute paths, duplicates, names
 * outside the requested entries or matching an exclude — is refused as a
 * whole, never a part.
 */
import { nameProblem, unsafeRelativePath } from '../exec/pathRules';
import { HintedError } from '../errors';

/** The staging directory inside a local run directory (never a result name). */
export const STAGING_DIR = '.retrieving';
/** Most files a manifest may list. */
export const MANIFEST_MAX_ENTRIES = 200_000;
/** Longest path (bytes) a manifest may name, and longest single name. */
export const MANIFEST_MAX_PATH_BYTES = 4_000;
export const MANIFEST_MAX_NAME_BYTES = 255;
/** Most manifest output read from the pod. */
export const MANIFEST_MAX_BYTES = 64 * 1024 * 1024;

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
  | 'too_many'
  /** A name another platform reads differently (a backslash, a colon, `NUL`…). */
  | 'unportable';

/** The pod's file list was refused; nothing was downloaded. */
export class ManifestError extends HintedError<ManifestErrorKind> {
  constructor(
    kind: ManifestErrorKind,
    /** The offending name as the pod gave it (escaped for display in the message). */
    readonly file: string,
    reason: string,
  ) {
    super(
      kind,
      `refusing the pod's file list: ${display(file)} ${reason}. Nothing was downloaded and ` +
        `nothing was written outside the run directory; ` +
        (kind === 'unportable' || kind === 'conflict'
          ? `rename or remove that file on the pod (or have the job write names every platform reads alike), then retrieve again.`
          : `the pod's run directory holds unexpected files, so inspect it before retrieving again.`),
      kind === 'unportable' || kind === 'conflict'
        ? "Retrieve again then: `overbrainer train attach` with the run's ID."
        : "Look at it over `overbrainer runs ssh` with the run's ID (the pod stays until its retrieve grace ends).",
    );
    this.name = 'ManifestError';
  }
}

export type RetrievalErrorKind = 'run_dir_missing' | 'manifest_failed' | 'local_conflict';

const RETRIEVAL_HINTS: Record<RetrievalErrorKind, string> = {
  run_dir_missing:
    "Look at the pod over `overbrainer runs ssh` with the run's ID: its run directory is not where the run recorded it.",
  manifest_failed:
    "Fix the [training] artifacts in overbrainer.toml if the message names one, else retrieve again (`overbrainer train attach` with the run's ID).",
  local_conflict:
    "Move away what stands in the way in the run's output folder, then retrieve again (`overbrainer train attach` with the run's ID).",
};

/** Retrieval could not run or finish (not a verification failure: those are in the result). */
export class RetrievalError extends HintedError<RetrievalErrorKind> {
  constructor(kind: RetrievalErrorKind, message: string, options?: { cause?: unknown }) {
    super(kind, message, RETRIEVAL_HINTS[kind], options);
    this.name = 'RetrievalError';
  }
}

/** A name for a message: quoted, control characters escaped, cut at 200 characters. */
export function display(name: string): string {
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
export function normalizeEntries(entries: readonly string[]): string[] {
  const paths = [...new Set(entries.map(normalizeEntry))].sort();
  return paths.filter(
    (path) => !paths.some((other) => other !== path && path.startsWith(`${other}/`)),
  );
}

/**
 * Excludes are name globs left out at any depth (`checkpoint-*`); one that starts with `!` is a
 * path kept all the same, as in a .gitignore (`!output/checkpoint-12`: a stopped run's snapshot).
 */
export function splitExcludes(excludes: readonly string[]): { globs: string[]; kept: string[] } {
  const globs: string[] = [];
  const kept: string[] = [];
  for (const exclude of excludes) {
    if (exclude.startsWith('!')) kept.push(normalizeEntry(exclude.slice(1)));
    else globs.push(exclude);
  }
  return { globs, kept };
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

/** A path as Windows and macOS compare names: case and Unicode composition folded. */
function fold(path: string): string {
  return path.normalize('NFC').toLowerCase();
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
  /** Names and directories as Windows and macOS compare them (see {@link fold}). */
  private readonly folded = new Map<string, string>();
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
    const problem = nameProblem(path);
    if (problem !== undefined) {
      const kind: ManifestErrorKind =
        problem.kind === 'empty'
          ? 'empty_name'
          : problem.kind === 'traversal'
            ? 'traversal'
            : problem.kind;
      const reason =
        problem.kind === 'traversal'
          ? 'climbs out with `..`'
          : problem.kind === 'malformed'
            ? 'has an empty or `.` path segment'
            : problem.kind === 'unportable'
              ? `${problem.reason}: refused on every platform`
              : problem.reason;
      throw new ManifestError(kind, name, reason);
    }
    const segments = path.split('/');
    const kept = this.kept.some((keep) => path === keep || path.startsWith(`${keep}/`));
    for (const segment of segments) {
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
    // Windows and macOS do not tell case (nor composed and decomposed Unicode) apart: two names
    // that fold to one would be one file there, each overwriting the other.
    const folded = fold(path);
    const same = this.folded.get(folded);
    if (same !== undefined) {
      throw new ManifestError(
        'conflict',
        name,
        `is the same file as ./${same} on Windows and macOS (they do not tell case apart)`,
      );
    }
    if (this.parents.has(folded)) {
      throw new ManifestError('conflict', name, 'is listed as a file and as a directory');
    }
    let prefix = '';
    for (const segment of segments.slice(0, -1)) {
      prefix = prefix ? `${prefix}/${segment}` : segment;
      if (this.folded.has(fold(prefix))) {
        throw new ManifestError('conflict', name, 'lies below a name listed as a file');
      }
      this.parents.add(fold(prefix));
    }
    this.folded.set(folded, path);
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
