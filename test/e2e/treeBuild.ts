/**
 * One build of the tree at a time among the e2e files, which `scripts/test.sh` runs two at a
 * time: the demo journey's `npm start` builds dist/ (a development build, with source maps) and
 * then copies it for its code-server; the package journey's `npm run package` makes a production
 * build and packs dist/ into the .vsix. Side by side, the one's build would publish its files
 * into the other's dist/ (a source map in the .vsix, a bundle gone from under a copy). Each holds
 * this lock for as long as it builds and reads dist/.
 *
 * The lock is a directory (mkdir is atomic) holding its owner's pid; one whose owner died is
 * taken over.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { pidAlive } from '../../src/core/runs/lock';
import { REPO_ROOT } from './harness';

const LOCK = path.join(REPO_ROOT, 'test-results', '.e2e-tree-build.lock');
const OWNER = path.join(LOCK, 'pid');
/** Another file's build (and packing, or code-server's start): about 20 s, more when loaded. */
const WAIT_MS = 150_000;

/** Takes the lock, waiting while another live process holds it; returns its release. */
export async function lockTreeBuild(what: string): Promise<() => void> {
  mkdirSync(path.dirname(LOCK), { recursive: true });
  const deadline = Date.now() + WAIT_MS;
  let said = false;
  for (;;) {
    try {
      mkdirSync(LOCK);
      writeFileSync(OWNER, String(process.pid));
      let released = false;
      return () => {
        if (released) return;
        released = true;
        rmSync(LOCK, { recursive: true, force: true });
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    let owner = Number.NaN;
    try {
      owner = Number(readFileSync(OWNER, 'utf8'));
    } catch {
      // Just made, its pid not written yet (or just released): look again.
    }
    if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && !pidAlive(owner)) {
      rmSync(LOCK, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new Error(`${what}: the tree's build lock ${LOCK} is still held by pid ${owner}`);
    }
    if (!said) {
      said = true;
      console.log(`      (${what}: waiting for another e2e file's build, pid ${owner})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
