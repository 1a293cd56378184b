import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

/**
 * `node esbuild.mjs --production` in a temp copy of the build's inputs (src, media, python and
 * node_modules linked), so the shared dist/ that other tests and the e2e windows use is never
 * touched. Returns the copy's dir (its dist/ holds the bundles and meta.json); the caller
 * removes it.
 */
export function productionBuild(prefix = 'ob-prod-'): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  cpSync(path.join(ROOT, 'esbuild.mjs'), path.join(dir, 'esbuild.mjs'));
  cpSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
  for (const name of ['src', 'media', 'python', 'node_modules', 'tsconfig.json']) {
    if (existsSync(path.join(ROOT, name))) {
      symlinkSync(path.join(ROOT, name), path.join(dir, name));
    }
  }
  execFileSync(process.execPath, [path.join(dir, 'esbuild.mjs'), '--production'], {
    cwd: dir,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return dir;
}
