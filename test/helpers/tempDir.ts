/**
 * A test's own temp directory: made fresh under the OS temp dir with a prefix naming the test,
 * removed whole (links not followed) when the test is done with it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function makeTempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function removeTempDir(dir: string | undefined): void {
  if (dir) rmSync(dir, { recursive: true, force: true });
}
