/**
 * The pod's manifest script (the list of results with their SHA-256) under dash, bash and
 * busybox: odd names, excludes, planted links, a file that cannot be hashed, a missing run
 * directory.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  listingScript,
  ManifestError,
  manifestScript,
  parseListing,
  parseManifest,
  STAGING_DIR,
  changedScript,
} from '../../src/core/train/retrieval';

import { ENTRIES, EXCLUDES, makeRun, sha256, UNPORTABLE_NAMES } from '../helpers/retrievalRun';

describe('manifest script under real shells', function () {
  this.timeout(30_000);
  let dir: string;
  let busyboxBin: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ob-manifest-'));
    busyboxBin = join(dir, 'busybox-bin');
    mkdirSync(busyboxBin);
    execFileSync('busybox', ['--install', '-s', busyboxBin]);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const shells: [string, string, () => NodeJS.ProcessEnv][] = [
    ['dash + GNU tools', '/bin/dash', () => ({ PATH: '/usr/bin:/bin' })],
    ['bash + GNU tools', '/bin/bash', () => ({ PATH: '/usr/bin:/bin' })],
    ['busybox sh + busybox tools', 'busybox-sh', () => ({ PATH: busyboxBin })],
    ['dash + busybox tools', '/bin/dash', () => ({ PATH: busyboxBin })],
  ];
  for (const [label, shell, env] of shells) {
    it(`lists and hashes every regular file, any name, links and excludes left out (${label})`, () => {
      const run = join(dir, `run-${label.replace(/\W+/g, '-')}`);
      const files = makeRun(run);
      const [cmd, args] = shell === 'busybox-sh' ? ['/bin/busybox', ['sh', '-c']] : [shell, ['-c']];
      // stdin not a socket: bash would take itself for an rsh session and read ~/.bashrc.
      const out = execFileSync(cmd, [...args, manifestScript(run, ENTRIES, EXCLUDES)], {
        env: env(),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const entries = parseManifest(out, { entries: ENTRIES, excludes: EXCLUDES });
      assert.deepEqual(
        new Map(entries.map((entry) => [entry.path, entry.sha256])),
        new Map([...files].map(([name, data]) => [name, sha256(data)])),
      );
    });
  }

  for (const [label, shell, env] of shells) {
    it(`says which files were written after hashing began, and not the ones written just before (${label})`, () => {
      const run = join(dir, `run-changes-${label.replace(/\W+/g, '-')}`);
      makeRun(run);
      const marker = randomBytes(8).toString('hex');
      const [cmd, args] = shell === 'busybox-sh' ? ['/bin/busybox', ['sh', '-c']] : [shell, ['-c']];
      const sh = (script: string) =>
        spawnSync(cmd, [...args, script], { env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
      // metrics.jsonl was written a moment ago, right before the retrieval: not a change.
      writeFileSync(join(run, 'metrics.jsonl'), '{"event":"end"}\n');
      const hashed = sh(manifestScript(run, ENTRIES, EXCLUDES, marker));
      assert.equal(hashed.status, 0, hashed.stderr.toString());
      // Written after the pod began hashing: a file still being written, and a new one.
      writeFileSync(join(run, 'output', 'big.bin'), 'still writing');
      writeFileSync(join(run, 'output', 'new.txt'), 'appeared');
      const changed = sh(changedScript(run, ENTRIES, EXCLUDES, marker));
      assert.equal(changed.status, 0, changed.stderr.toString());
      assert.deepEqual(
        parseListing(changed.stdout, { entries: ENTRIES, excludes: EXCLUDES }).sort(),
        ['output/big.bin', 'output/new.txt'],
      );
      assert.equal(existsSync(join(run, STAGING_DIR)), false, 'the marker is removed');
      // A second look finds no marker: exit 5, so a lost marker is never read as "nothing changed".
      assert.equal(sh(changedScript(run, ENTRIES, EXCLUDES, marker)).status, 5);
    });
  }

  for (const [label, shell, env] of shells) {
    it(`frames a name Windows reads differently whole, so the list is refused naming it (${label})`, () => {
      for (const [i, name] of UNPORTABLE_NAMES.entries()) {
        const run = join(dir, `run-unportable-${i}-${label.replace(/\W+/g, '-')}`);
        makeRun(run);
        mkdirSync(join(run, name, '..'), { recursive: true });
        writeFileSync(join(run, name), 'hostile');
        const [cmd, args] =
          shell === 'busybox-sh' ? ['/bin/busybox', ['sh', '-c']] : [shell, ['-c']];
        for (const script of [
          manifestScript(run, ENTRIES, EXCLUDES),
          listingScript(run, ENTRIES, EXCLUDES),
        ]) {
          const out = execFileSync(cmd, [...args, script], {
            env: env(),
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          const parse = script.includes('sha256sum') ? parseManifest : parseListing;
          assert.throws(
            () => parse(out, { entries: ENTRIES, excludes: EXCLUDES }),
            (error: unknown) =>
              error instanceof ManifestError &&
              error.kind === 'unportable' &&
              error.file === `./${name}`,
            JSON.stringify(name),
          );
        }
      }
    });
  }

  it('fails instead of giving an incomplete list when a file cannot be hashed', () => {
    const run = join(dir, 'run-failing');
    makeRun(run);
    // sha256sum failing on the one big file, as an unreadable or vanished file would:
    // for the GNU batch path (names in argv) and the per-file path (content on stdin).
    const batch = join(dir, 'failing-batch');
    const perFile = join(dir, 'failing-per-file');
    mkdirSync(batch);
    mkdirSync(perFile);
    writeFileSync(
      join(batch, 'sha256sum'),
      `#!/bin/sh\nfor a do case "$a" in *big.bin) echo "cannot read" >&2; exit 1;; esac; done\n` +
        `exec /usr/bin/sha256sum "$@"\n`,
    );
    writeFileSync(
      join(perFile, 'sha256sum'),
      `#!/bin/sh\n[ "$#" -eq 0 ] || exit 1\nt=$(mktemp); cat > "$t"\n` +
        `if [ "$(wc -c < "$t")" -gt 1000000 ]; then rm -f "$t"; echo "cannot read" >&2; exit 1; fi\n` +
        `/usr/bin/sha256sum < "$t"; s=$?; rm -f "$t"; exit $s\n`,
    );
    // The faster hasher big files take where the pod has one (OpenSSL): failing the same way.
    writeFileSync(
      join(batch, 'openssl'),
      `#!/bin/sh\nt=$(mktemp); cat > "$t"\n` +
        `if [ "$(wc -c < "$t")" -gt 1000000 ]; then rm -f "$t"; echo "cannot read" >&2; exit 1; fi\n` +
        `/usr/bin/openssl "$@" < "$t"; s=$?; rm -f "$t"; exit $s\n`,
    );
    chmodSync(join(batch, 'openssl'), 0o755);
    chmodSync(join(batch, 'sha256sum'), 0o755);
    chmodSync(join(perFile, 'sha256sum'), 0o755);
    const cases: [string, string[], string][] = [
      ['/bin/dash', ['-c'], `${batch}:/usr/bin:/bin`],
      ['/bin/bash', ['-c'], `${batch}:/usr/bin:/bin`],
      ['/bin/dash', ['-c'], `${perFile}:${busyboxBin}`],
      ['/bin/busybox', ['sh', '-c'], `${perFile}:${busyboxBin}`],
    ];
    for (const [shell, args, path] of cases) {
      const result = spawnSync(shell, [...args, manifestScript(run, ENTRIES, EXCLUDES)], {
        env: { PATH: path },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      assert.equal(result.status, 4, `${shell} with ${path}: ${result.stderr.toString()}`);
      assert.match(result.stderr.toString(), /cannot read/);
    }
  });

  it('exits 3 when the run directory is missing', () => {
    const result = spawnSync('/bin/dash', ['-c', manifestScript(join(dir, 'nope'), ENTRIES)]);
    assert.equal(result.status, 3);
  });
});
