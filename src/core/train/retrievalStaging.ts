/**
 * The local staging directory of a retrieval: a real directory of ours inside
 * the run directory (a link there is removed, never followed), and the final
 * move of the verified files into place.
 */
import { lstat, mkdir, readdir, rename, rm, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { DownloadedFile } from '../exec/executor';
import { listFiles, sha256File } from '../exec/localFiles';
import { RetrievalError, STAGING_DIR } from './manifest';

/** The staging dir exists as a real directory of ours (a link there is removed, not followed). */
export async function ensureOwnDir(path: string): Promise<void> {
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
export async function moveInto(from: string, to: string): Promise<void> {
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

/**
 * Resume: hashes what an earlier call staged in `doneDir` and keeps what the pod still lists
 * (`onChecking` told of each file hashed); drops the rest, and partial files in `partDir` the
 * pod no longer lists. Returns the staged files kept, by path.
 */
export async function reuseStaged(
  doneDir: string,
  partDir: string,
  listed: ReadonlySet<string>,
  onChecking: (p: { filesDone: number; filesTotal: number; file: string }) => void,
): Promise<Map<string, DownloadedFile>> {
  const kept = new Map<string, DownloadedFile>();
  const staged = await listFiles(doneDir);
  let checked = 0;
  for (const path of staged) {
    const full = join(doneDir, path);
    if (listed.has(path) && (await lstat(full)).isFile()) {
      onChecking({ filesDone: checked++, filesTotal: staged.size, file: path });
      const hashed = await sha256File(full);
      kept.set(path, { file: path, ...hashed, resumedBytes: hashed.bytes });
    } else {
      await rm(full, { recursive: true, force: true });
    }
  }
  for (const path of await listFiles(partDir)) {
    if (!listed.has(path)) await rm(join(partDir, path), { recursive: true, force: true });
  }
  return kept;
}
