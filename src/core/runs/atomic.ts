/**
 * Atomic replacement of a small file: a reader (another window, the CLI, this
 * process after a crash) sees the old content or the new one, never a mix.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ioError } from './runsError';

/**
 * Replaces `dir/name` with `content`: writes a temporary file of its own in
 * `dir` (`.<name>.<random>.tmp`, never shared with a concurrent save) with
 * `mode`, fsyncs it, renames it over `dir/name`, then fsyncs `dir` so the
 * rename survives a power cut. The temporary file is removed when a step
 * fails. Throws a `RunsError` `io`.
 */
export function writeFileAtomicSync(
  dir: string,
  name: string,
  content: string | Buffer,
  mode = 0o600,
): void {
  const tmp = path.join(dir, `.${name}.${randomBytes(8).toString('hex')}.tmp`);
  const target = path.join(dir, name);
  let fd: number | null = null;
  try {
    fd = fs.openSync(tmp, 'wx', mode);
    fs.writeFileSync(fd, content);
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fd = null;
    fs.renameSync(tmp, target);
  } catch (error) {
    if (fd !== null) {
      try {
        fs.closeSync(fd);
      } catch {
        // Already failing: the write's error is the one to report.
      }
    }
    try {
      fs.unlinkSync(tmp);
    } catch {
      // Never created, or already renamed.
    }
    throw ioError(target, error, 'write');
  }
  try {
    const dirFd = fs.openSync(dir, 'r');
    try {
      fs.fsyncSync(dirFd);
    } finally {
      fs.closeSync(dirFd);
    }
  } catch {
    // Some filesystems refuse to fsync a directory; the rename itself is done.
  }
}

/** Whether `name` is one of the temporary files {@link writeFileAtomicSync} makes. */
export function isAtomicTemp(name: string): boolean {
  return /^\..+\.[0-9a-f]{16}\.tmp$/.test(name);
}
