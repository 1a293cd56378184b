/**
 * The one set of rules for a file name that came from a target (a pod's result, a checkpoint
 * the pod's look named, a snapshot's checkpoint path): a relative, `/`-separated path is taken
 * only when every platform the extension runs on (Linux, macOS, Windows) reads it as the same
 * file below its base. Refused on every platform, whatever this machine is: `..`, `.` and empty
 * segments, absolute names, and what Windows reads differently (a backslash is a separator
 * there, a colon a drive letter or a stream, control characters, `<>"|?*`, the device names CON,
 * PRN, AUX, NUL, COM0–9, LPT0–9 with any extension and in any case, a trailing dot or space,
 * which Windows drops). {@link resolveInside} then checks that the resolved path stays under its
 * base with this platform's path rules (or the ones given: tests run Windows' on Linux).
 */
import path from 'node:path';
import { HintedError } from '../errors';

export type NameProblemKind = 'empty' | 'absolute' | 'traversal' | 'malformed' | 'unportable';

export interface NameProblem {
  kind: NameProblemKind;
  /** Why, as the end of a sentence that starts with the name: `holds a backslash, …`. */
  reason: string;
}

/** Device names Windows opens instead of a file, whatever the extension (`NUL.txt`). */
const WINDOWS_DEVICE = /^(CON|PRN|AUX|NUL|CONIN\$|CONOUT\$|COM[0-9¹²³]|LPT[0-9¹²³])$/i;
/** Characters Windows does not allow in a name (besides `\`, `:` and control characters). */
const WINDOWS_FORBIDDEN = /[<>"|?*]/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function codePoint(char: string): string {
  return `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** Why one segment (no `/`) would be read differently on some platform, or undefined. */
export function segmentProblem(segment: string): string | undefined {
  const control = CONTROL.exec(segment);
  if (control) {
    return control[0] === '\0'
      ? 'holds a NUL byte'
      : `holds a control character (${codePoint(control[0])})`;
  }
  if (segment.includes('\\')) {
    return 'holds a backslash, which Windows reads as a folder separator';
  }
  if (segment.includes(':')) {
    return 'holds a colon, which Windows reads as a drive letter or a stream name';
  }
  const forbidden = WINDOWS_FORBIDDEN.exec(segment);
  if (forbidden) return `holds ${forbidden[0]}, which Windows does not allow in a file name`;
  // Windows ignores trailing spaces before the extension too: `CON .txt` is the console.
  const stem = segment.split('.')[0]!.trimEnd();
  if (WINDOWS_DEVICE.test(stem)) {
    return `is named ${stem}, a device name on Windows (CON, PRN, AUX, NUL, COM0-9, LPT0-9 with any extension)`;
  }
  if (segment.endsWith('.') || segment.endsWith(' ')) {
    return 'ends with a dot or a space, which Windows drops from a name';
  }
  return undefined;
}

/**
 * What is wrong with a relative `/`-separated name below a base, or undefined when every
 * platform reads it as the same file there. Climbing out (`..`) is reported before anything
 * else in the name.
 */
export function nameProblem(name: string): NameProblem | undefined {
  if (name.length === 0) return { kind: 'empty', reason: 'is empty' };
  if (name.startsWith('/')) return { kind: 'absolute', reason: 'is absolute' };
  const segments = name.split('/');
  for (const segment of segments) {
    if (segment === '..') return { kind: 'traversal', reason: 'has a ".." segment' };
  }
  for (const segment of segments) {
    if (segment === '') return { kind: 'malformed', reason: 'has an empty segment' };
    if (segment === '.') return { kind: 'malformed', reason: 'has a "." segment' };
  }
  for (const segment of segments) {
    const reason = segmentProblem(segment);
    if (reason !== undefined) return { kind: 'unportable', reason };
  }
  return undefined;
}

/** Why a relative name is unsafe or not portable, or undefined when it is a plain path below its base. */
export function unsafeRelativePath(name: string): string | undefined {
  return nameProblem(name)?.reason;
}

/** A name refused, or a path that would resolve outside its base. */
export class PathEscapeError extends HintedError<'unsafe_name'> {
  constructor(
    readonly file: string,
    readonly reason: string,
  ) {
    super(
      'unsafe_name',
      `refusing the file name ${JSON.stringify(file)}: it ${reason}`,
      'Rename or remove that file where the job wrote it (plain names inside its folder), then run the command again.',
    );
    this.name = 'PathEscapeError';
  }
}

/** The parts of `node:path` (posix or win32) the containment check uses. */
export type PathFlavor = Pick<
  typeof path.posix,
  'join' | 'resolve' | 'relative' | 'isAbsolute' | 'sep'
>;

/** Whether `target` is `base` itself or below it, by `flavor`'s rules. */
export function isInside(base: string, target: string, flavor: PathFlavor = path): boolean {
  const relative = flavor.relative(flavor.resolve(base), flavor.resolve(target));
  if (relative === '') return true;
  if (flavor.isAbsolute(relative)) return false; // another drive on Windows
  return relative !== '..' && !relative.startsWith(`..${flavor.sep}`);
}

/** The last base {@link resolveInside} resolved, by flavor (a cwd-relative base is not kept). */
const lastBase = new WeakMap<PathFlavor, { base: string; resolved: string }>();

function resolvedBase(base: string, flavor: PathFlavor): string {
  const last = lastBase.get(flavor);
  if (last?.base === base) return last.resolved;
  const resolved = flavor.resolve(base);
  if (flavor.isAbsolute(base)) lastBase.set(flavor, { base, resolved });
  return resolved;
}

/**
 * The path of `name` (relative, `/`-separated, as a target gave it) below `base`: the rules
 * checked first, then that the resolved path stays strictly under `base` by `flavor`'s rules
 * (this platform's unless given). Throws {@link PathEscapeError} naming the file and why.
 * `rules: false` skips the name rules (a test of the last guard alone).
 */
export function resolveInside(
  base: string,
  name: string,
  flavor: PathFlavor = path,
  options: { rules?: boolean } = {},
): string {
  if (options.rules !== false) {
    const reason = unsafeRelativePath(name);
    if (reason !== undefined) throw new PathEscapeError(name, reason);
  }
  const full = flavor.join(base, ...name.split('/'));
  // isInside's test on the one relative path, the base resolved once for a run of names: it
  // resolved the base twice and the file's path twice per name (a download of 10,000 files
  // resolves each of them below the same base).
  const relative = flavor.relative(resolvedBase(base, flavor), flavor.resolve(full));
  if (
    relative === '' ||
    flavor.isAbsolute(relative) ||
    relative === '..' ||
    relative.startsWith(`..${flavor.sep}`)
  ) {
    throw new PathEscapeError(name, `would resolve to ${full}, outside ${base}`);
  }
  return full;
}
