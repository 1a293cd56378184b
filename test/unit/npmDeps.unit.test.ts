/**
 * scripts/lib/npmDeps.sh (what `npm test` installs the extension's packages with): a fresh clone
 * on a warm machine copies the node_modules kept for its lockfile instead of running npm ci, and
 * runs npm ci (keeping its result) when nothing matching is kept.
 *
 * The clones are temp folders holding a package-lock.json; `npm` is a stand-in first on the PATH
 * that logs each call and installs what the lockfile pins (the hidden lockfile npm writes, and a
 * file per package), so the test sees when npm ci ran and when it did not. node is the real one.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

/** The stand-in `npm`: `npm ci` installs each package of package-lock.json under node_modules. */
const FAKE_NPM = `#!/bin/sh
echo "$*" >> "$NPM_CALLS"
[ "$1" = ci ] || exit 2
rm -rf node_modules
node -e '
  const fs = require("fs");
  const lock = JSON.parse(fs.readFileSync("package-lock.json", "utf8"));
  fs.mkdirSync("node_modules", { recursive: true });
  fs.writeFileSync("node_modules/.package-lock.json", JSON.stringify(lock));
  for (const [name, entry] of Object.entries(lock.packages)) {
    if (name === "") continue;
    fs.mkdirSync(name, { recursive: true });
    fs.writeFileSync(name + "/index.js", "module.exports = " + JSON.stringify(entry.version));
  }
'
`;

function lockfile(version: string): string {
  return JSON.stringify({
    name: 'clone',
    lockfileVersion: 3,
    packages: { '': { name: 'clone' }, 'node_modules/dep': { version } },
  });
}

describe('scripts/lib/npmDeps.sh: a warm machine copies node_modules instead of npm ci', function () {
  this.timeout(60_000);
  let dir: string;
  let env: NodeJS.ProcessEnv;

  beforeEach(function () {
    dir = mkdtempSync(path.join(tmpdir(), 'npm-deps-'));
    mkdirSync(path.join(dir, 'bin'));
    writeFileSync(path.join(dir, 'bin', 'npm'), FAKE_NPM);
    chmodSync(path.join(dir, 'bin', 'npm'), 0o755);
    env = {
      ...process.env,
      PATH: `${path.join(dir, 'bin')}:${process.env.PATH ?? ''}`,
      NPM_CALLS: path.join(dir, 'npm-calls'),
      OVERBRAINER_TEST_CACHE: path.join(dir, 'cache'),
    };
  });

  afterEach(function () {
    rmSync(dir, { recursive: true, force: true });
  });

  function clone(name: string, version: string): string {
    const at = path.join(dir, name);
    mkdirSync(at);
    writeFileSync(path.join(at, 'package-lock.json'), lockfile(version));
    return at;
  }

  function ensure(at: string): string {
    const ran = spawnSync(
      'bash',
      ['-c', `set -euo pipefail; source ${ROOT}/scripts/lib/npmDeps.sh; ensure_npm_deps`],
      { cwd: at, env, encoding: 'utf8' },
    );
    assert.equal(ran.status, 0, `ensure_npm_deps failed:\n${ran.stdout}\n${ran.stderr}`);
    return ran.stdout;
  }

  function npmCalls(): string[] {
    const file = path.join(dir, 'npm-calls');
    return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : [];
  }

  function installed(at: string): string {
    return readFileSync(path.join(at, 'node_modules', 'dep', 'index.js'), 'utf8');
  }

  it('npm ci once per lockfile; later clones get a copy of their own', function () {
    const first = clone('first', '1.0.0');
    assert.match(ensure(first), /npm ci[\s\S]*node_modules kept in /);
    assert.deepEqual(npmCalls(), ['ci --no-audit --no-fund --prefer-offline']);

    const second = clone('second', '1.0.0');
    assert.match(ensure(second), /copying the one kept in /);
    assert.equal(npmCalls().length, 1, 'the second clone ran npm');
    assert.equal(installed(second), 'module.exports = "1.0.0"');
    // Its own files: what the clone writes into its node_modules stays out of the kept copy.
    writeFileSync(path.join(second, 'node_modules', 'dep', 'index.js'), 'changed');
    const third = clone('third', '1.0.0');
    ensure(third);
    assert.equal(installed(third), 'module.exports = "1.0.0"');
    assert.equal(npmCalls().length, 1);

    // Current already: nothing at all.
    assert.equal(ensure(third), '');

    // Another lockfile: npm ci again, never the copy kept for the first.
    const other = clone('other', '2.0.0');
    assert.match(ensure(other), /npm ci/);
    assert.equal(npmCalls().length, 2);
    assert.equal(installed(other), 'module.exports = "2.0.0"');
  });

  it('a kept copy that does not match its lockfile is replaced by npm ci', function () {
    const first = clone('first', '1.0.0');
    ensure(first);
    const cacheRoot = path.join(dir, 'cache');
    const keptDirs = readdirSync(cacheRoot).filter((name) => /^node_modules-[0-9a-f]+$/.test(name));
    assert.equal(keptDirs.length, 1, `one node_modules kept in ${cacheRoot}`);
    const kept = path.join(cacheRoot, keptDirs[0]!, 'node_modules');
    // A kept copy gone stale (its hidden lockfile naming another version).
    writeFileSync(path.join(kept, '.package-lock.json'), lockfile('0.9.0'));

    const second = clone('second', '1.0.0');
    assert.match(ensure(second), /does not match package-lock.json: npm ci/);
    assert.equal(npmCalls().length, 2);
    assert.equal(installed(second), 'module.exports = "1.0.0"');
    // Kept again from that npm ci: the next clone copies it.
    const third = clone('third', '1.0.0');
    assert.match(ensure(third), /copying the one kept in /);
    assert.equal(npmCalls().length, 2);
    assert.equal(installed(third), 'module.exports = "1.0.0"');
  });

  it('keeps the three newest copies, one per lockfile', function () {
    for (const version of ['1.0.0', '2.0.0', '3.0.0', '4.0.0'])
      ensure(clone(`v${version}`, version));
    assert.equal(npmCalls().length, 4);
    const kept = readdirSync(path.join(dir, 'cache')).filter((name) =>
      /^node_modules-[0-9a-f]+$/.test(name),
    );
    assert.equal(kept.length, 3, kept.join(', '));
    // The oldest (1.0.0) went: its clone's lockfile runs npm ci again; the newest is copied.
    ensure(clone('again-1', '1.0.0'));
    assert.equal(npmCalls().length, 5);
    assert.match(ensure(clone('again-4', '4.0.0')), /copying the one kept in /);
    assert.equal(npmCalls().length, 5);
  });
});
