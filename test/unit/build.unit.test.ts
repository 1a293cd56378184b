import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ROOT } from '../helpers/cli';

const CLI = path.join(ROOT, 'dist', 'cli.js');
/** The last line of a development build's bundle: a file that ends so is whole. */
const TRAILER = '//# sourceMappingURL=cli.js.map\n';

describe('npm run build (esbuild.mjs)', function () {
  this.timeout(120_000);

  it('never leaves dist/cli.js missing or half written while it builds', async function () {
    // The e2e journeys rebuild dist/ while the integration files start the built CLI.
    const build = (): ReturnType<typeof spawn> =>
      spawn(process.execPath, ['esbuild.mjs'], { cwd: ROOT, stdio: 'ignore' });
    const ended = (child: ReturnType<typeof spawn>): Promise<number | null> =>
      new Promise((resolve) => child.on('exit', (code) => resolve(code)));
    // A whole bundle to look at before the build under test: the one `npm test` (or a test
    // helper) built just before when it is there and whole, else a first build.
    const whole = (): boolean => {
      try {
        return fs.readFileSync(CLI, 'latin1').endsWith(TRAILER);
      } catch {
        return false;
      }
    };
    if (!whole()) assert.equal(await ended(build()), 0, 'a first build');
    assert.ok(whole(), 'dist/cli.js is whole before the build under test');

    const child = build();
    let running = true;
    const exited = ended(child).finally(() => (running = false));
    let looks = 0;
    const seen: string[] = [];
    while (running) {
      looks += 1;
      try {
        const text = fs.readFileSync(CLI, 'latin1');
        if (!text.endsWith(TRAILER)) seen.push(`half written (${text.length} bytes)`);
      } catch (error) {
        seen.push(String(error));
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal(await exited, 0, 'the build');
    assert.ok(looks > 5, `only ${looks} looks while it built`);
    assert.deepEqual([...new Set(seen)], [], `of ${looks} looks`);
  });
});
