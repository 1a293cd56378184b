/**
 * The POSIX sh scripts a retrieval runs on the pod (dash, bash or busybox sh;
 * GNU or busybox tools): the listing, the hashed manifest and the change check,
 * all walking the same entries with the same excludes.
 */
import { excerpt } from '../exec/failures';
import type { ExecResult } from '../exec/executor';
import { OPENSSL_SHA256, OPENSSL_SHA256_WORKS, shQuote } from '../exec/shell';
import {
  display,
  MANIFEST_MAX_BYTES,
  ManifestError,
  normalizeEntries,
  RetrievalError,
  splitExcludes,
  STAGING_DIR,
} from './manifest';

/** Files from this size on are hashed by the faster hasher when the pod has one. */
export const FAST_HASH_MIN_BYTES = 1024 * 1024;
/** Exit code of the manifest script when the run directory is missing. */
export const EXIT_NO_RUN_DIR = 3;
/** Exit code of the change check when there is no change marker (it could not be made). */
export const EXIT_NO_MARKER = 5;

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
  // The staging name is reserved at every depth: a retrieval of a subdirectory (the checkpoint
  // stream's copy of output/checkpoint-N) keeps its change marker there while it runs.
  const { globs, kept } = splitExcludes([...excludeGlobs, STAGING_DIR]);
  const keep = kept.map((path) => ` ! -path ${shQuote(`./${path}`)}`).join('');
  const prune =
    globs.length === 0
      ? ''
      : `\\( \\( ${globs.map((glob) => `-name ${shQuote(glob)}`).join(' -o ')} \\)${keep} \\) -prune -o `;
  return [
    `cd -- ${shQuote(runDir)} 2>/dev/null || { printf 'no run directory %s\\n' ${shQuote(runDir)} >&2; exit ${EXIT_NO_RUN_DIR}; }`,
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
 * directory: inside the reserved staging name, which no entry can be and no
 * walk enters, so it is never retrieved, by this retrieval or another.
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
  // `$1` is the hasher (`sha256sum` or `openssl dgst -sha256 -r`: both print `<hex> <name>`).
  const perFile = `h=$1; shift; for f do d=$($h < "$f") || exit 1; printf "%s  %s\\0" "\${d%% *}" "$f"; done`;
  const loop = `-exec sh -c ${shQuote(perFile)} sh`;
  return findScript(
    runDir,
    entries,
    excludeGlobs,
    (find) => [
      `if [ "$s" = 1 ]; then`,
      `  ${find} \\( -size -${FAST_HASH_MIN_BYTES}c -exec sha256sum -z -- {} + -o ${loop} "$hb" {} + \\) || exit 4`,
      `elif [ "$z" = 1 ]; then`,
      `  ${find} -exec sha256sum -z -- {} + || exit 4`,
      `else`,
      `  ${find} ${loop} sha256sum {} + || exit 4`,
      `fi`,
    ],
    [
      ...(changeMarker === undefined ? [] : changeMarkerLines(changeMarker)),
      `if printf '' | sha256sum -z >/dev/null 2>&1; then z=1; else z=0; fi`,
      ...fastHasherLines(),
    ],
  );
}

/**
 * `s=1` and `hb` the faster hasher for big files when the pod has one that passes the
 * self-test (OpenSSL's SHA-256 uses the CPU's SHA extensions: several times coreutils'
 * speed) and a `find` that can split one walk by size (GNU; busybox's `-exec +` inside
 * `-o` runs nothing, so it keeps the plain walk). One walk, so a file that grows while
 * it is hashed is listed once, never twice or not at all.
 */
function fastHasherLines(): string[] {
  return [
    `s=0`,
    `if [ "$z" = 1 ] && ${OPENSSL_SHA256_WORKS} &&`,
    `  [ "$(find /dev/null \\( -size -1c -exec echo s {} + -o -exec echo b {} + \\) 2>/dev/null)" = "s /dev/null" ]; then`,
    `  s=1; hb='${OPENSSL_SHA256}'`,
    `fi`,
  ];
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
 * still hashing on the pod; the manifest stays the authority. `withSizes`: each
 * entry's walk is followed by its files' sizes, `=<bytes>\0` each (no name can
 * start with `=`: every one starts with `./`), for a transfer's total, in the
 * same request; `stat -c` is GNU's and busybox's, and where it fails the sizes
 * are simply missing (see {@link splitSizes}).
 */
export function listingScript(
  runDir: string,
  entries: readonly string[],
  excludeGlobs: readonly string[] = [],
  withSizes = false,
): string {
  return findScript(runDir, entries, excludeGlobs, (find) => [
    `${find} -print0 || exit 4`,
    ...(withSizes ? [`{ ${find} -exec stat -c =%s -- {} + | tr '\\n' '\\000'; } 2>/dev/null`] : []),
  ]);
}

/**
 * A listing made `withSizes`, split: the names' records as {@link parseListing} takes them, and
 * the total of the sizes (null when the pod gave none for files it listed). The sizes only
 * serve the progress: a pod that lies about them lies to its own progress bar.
 */
export function splitSizes(buffer: Buffer): {
  listing: Buffer;
  sizes: { bytes: number; files: number } | null;
} {
  const names: Buffer[] = [];
  let bytes = 0;
  let files = 0;
  let start = 0;
  while (start < buffer.length) {
    let end = buffer.indexOf(0, start);
    if (end < 0) end = buffer.length - 1; // not NUL-terminated: parseListing says so
    const record = buffer.subarray(start, end + 1);
    const size = /^=(\d{1,16})\0$/.exec(record.toString('latin1'));
    if (size) {
      bytes += Number(size[1]);
      files++;
    } else {
      names.push(record);
    }
    start = end + 1;
  }
  const listing = Buffer.concat(names);
  return { listing, sizes: files === 0 && listing.length > 0 ? null : { bytes, files } };
}

/** A retrieval script's stdout, or the error its exit status means (`what`: `listing`…). */
export function scriptOutput(result: ExecResult, remoteRunDir: string, what: string): Buffer {
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
}
