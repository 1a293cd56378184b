/**
 * A retrieval's verdict: every staged file against the pod's manifest (its SHA-256), the files
 * still being written on the pod (`changed`) never taken; and the words for what went wrong.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { DownloadedFile } from '../exec/executor';
import type { ManifestEntry } from './manifest';

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

/** What the check against the manifest found. */
export interface Verdict {
  mismatches: Mismatch[];
  bytes: number;
  reusedBytes: number;
  transferredBytes: number;
}

/**
 * Every file against the manifest: a file changed on the pod, missing, or with another hash
 * is a mismatch and is not kept (the next retrieval downloads it again).
 */
export async function verifyStaged(
  local: ReadonlyMap<string, DownloadedFile>,
  doneDir: string,
  manifest: readonly ManifestEntry[],
  expected: ReadonlyMap<string, string>,
  changed: ReadonlySet<string>,
): Promise<Verdict> {
  const verdict: Verdict = { mismatches: [], bytes: 0, reusedBytes: 0, transferredBytes: 0 };
  const { mismatches } = verdict;
  const drop = (path: string): Promise<void> => rm(join(doneDir, path), { force: true });
  for (const [path, file] of local) {
    const want = expected.get(path);
    if (want === undefined) {
      // Listed, then gone before it was hashed: not a result.
      if (!file.missing) await drop(path);
      continue;
    }
    if (changed.has(path)) {
      mismatches.push({
        file: path,
        reason: 'changed',
        expectedSha256: want,
        ...(file.missing ? {} : { actualSha256: file.sha256 }),
      });
      if (!file.missing) await drop(path);
      continue;
    }
    if (file.missing) {
      mismatches.push({ file: path, reason: 'missing', expectedSha256: want });
      continue;
    }
    verdict.reusedBytes += file.resumedBytes;
    verdict.transferredBytes += file.bytes - file.resumedBytes;
    if (file.sha256 === want) {
      verdict.bytes += file.bytes;
    } else {
      mismatches.push({
        file: path,
        reason: 'hash',
        expectedSha256: want,
        actualSha256: file.sha256,
      });
      await drop(path);
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
  return verdict;
}
