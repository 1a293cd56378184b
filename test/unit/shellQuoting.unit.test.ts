/**
 * docs/SECURITY.md, "the smaller holes": every value put into a shell command is quoted with the
 * one quoting helper (src/core/exec/shell.ts), the run directory in the scripts' error messages
 * included. The local target's run directory is a path of the user's workspace, which may hold
 * any character: each script that names it is run by a real /bin/sh on a directory that does not
 * exist and whose name is a command substitution.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { shQuote } from '../../src/core/exec/shell';
import { sampleScript } from '../../src/core/train/disk';
import * as job from '../../src/core/train/job';
import { manifestScript } from '../../src/core/train/retrievalScripts';
import { requestScript } from '../../src/core/train/snapshot';

describe('security: shell quoting', function () {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(tmpdir(), 'ob-quote-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('there is one quoting helper: the job scripts use src/core/exec/shell.ts', function () {
    assert.equal(job.shQuote, shQuote);
  });

  it('a run directory named like a command is only ever printed, never run, by every script that names it', function () {
    const evil = (n: number) =>
      `${dir}/gone/$(touch ${dir}/ran${n})\`touch ${dir}/ticked${n}\`"; touch ${dir}/semi${n}; "`;
    const scripts: [string, (runDir: string) => string][] = [
      [
        'the launcher',
        (runDir) => job.launcherScript({ runDir, script: 'true', env: {}, secretNames: [] }),
      ],
      ['the cancel script', (runDir) => job.cancelScript(runDir)],
      ['the snapshot request', (runDir) => requestScript(runDir, 'requested')],
      ['the disk sample', (runDir) => sampleScript(runDir, null)],
      ['the retrieval manifest', (runDir) => manifestScript(runDir, ['output/'], [])],
      [
        "the job's env file",
        (runDir) =>
          job.jobScript(
            { trainer: 'command', command: 'true' },
            { runDir: '/tmp', jobEnvFile: runDir },
          ),
      ],
    ];
    scripts.forEach(([what, script], n) => {
      const runDir = evil(n);
      const ran = spawnSync('/bin/sh', ['-c', script(runDir)], { cwd: dir, encoding: 'utf8' });
      const left = fs.readdirSync(dir);
      assert.deepEqual(left, [], `${what} ran part of the directory's name: ${left.join(', ')}`);
      assert.notEqual(ran.status, 0, `${what} did not fail`);
      assert.ok(
        ran.stderr.includes(runDir),
        `${what}'s error does not name the directory as it is: ${ran.stderr}`,
      );
    });
  });
});
