/**
 * Snapshots: the request script under real shells (written once, never replaced, not after the
 * job ended), snapshot.json's checks, what a snapshot makes of a job's outcome, and when the cost
 * cap's snapshot is asked for.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { snapshotAtUnixS } from '../../src/core/pod/lease';
import { jobOutcome, withSnapshot } from '../../src/core/train/outcome';
import { parseSnapshotJson, requestScript } from '../../src/core/train/snapshot';

// Every shell a pod may have: one missing fails the file (`npm run test:unit` installs them).
const SHELLS = [['sh'], ['dash'], ['busybox', 'sh']];
for (const [cmd] of SHELLS) {
  if (spawnSync('sh', ['-c', `command -v ${cmd}`]).status !== 0) {
    throw new Error(`${cmd} is not on PATH: install it (apt-get install -y dash busybox)`);
  }
}

describe('snapshot: the request', function () {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ob-snapshot-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  for (const shell of SHELLS) {
    const run = (reason: 'requested' | 'cost'): string => {
      const r = spawnSync(shell[0]!, [...shell.slice(1), '-c', requestScript(dir, reason)]);
      assert.equal(r.status, 0, r.stderr.toString());
      return r.stdout.toString().trim();
    };
    it(`is written once with its reason and never replaced (${shell.join(' ')})`, () => {
      assert.equal(run('cost'), 'requested');
      assert.equal(readFileSync(join(dir, 'snapshot.request'), 'utf8'), 'cost\n');
      assert.equal(run('requested'), 'already cost');
      assert.equal(readFileSync(join(dir, 'snapshot.request'), 'utf8'), 'cost\n');
    });
    it(`is not written once the job has ended (${shell.join(' ')})`, () => {
      writeFileSync(join(dir, 'exit_code'), '0\n');
      assert.equal(run('requested'), 'ended');
      assert.throws(() => readFileSync(join(dir, 'snapshot.request')));
    });
  }
});

describe('snapshot: snapshot.json', () => {
  it('reads checkpoint, step and reason; an unknown reason is `requested`', () => {
    assert.deepEqual(
      parseSnapshotJson(
        '{"checkpoint":"./output/checkpoint-12/","step":12,"time":1,"reason":"cost"}',
      ),
      { checkpoint: 'output/checkpoint-12', step: 12, reason: 'cost' },
    );
    assert.equal(
      parseSnapshotJson('{"checkpoint":"output/checkpoint-3","step":3,"reason":"??"}').reason,
      'requested',
    );
  });
  it('refuses a checkpoint outside the run directory, and malformed files', () => {
    for (const checkpoint of ['/etc', '../x', 'output/../../x', 'a//b', '']) {
      assert.throws(() => parseSnapshotJson(JSON.stringify({ checkpoint, step: 1 })));
    }
    assert.throws(() => parseSnapshotJson('{'), /not JSON/);
    assert.throws(() => parseSnapshotJson('{"checkpoint":"c","step":-1}'), /whole number/);
  });
});

describe('snapshot: the outcome', () => {
  const snapshot = { checkpoint: 'output/checkpoint-7', step: 7, reason: 'requested' as const };
  it('a job that exited 0 after its snapshot is stopped, with where and why', () => {
    const outcome = withSnapshot(jobOutcome({ kind: 'exited', code: 0 }, 9, 'r')!, snapshot);
    assert.deepEqual(outcome, {
      state: 'stopped',
      message: 'stopped at step 7 (requested); snapshot output/checkpoint-7',
      snapshot,
    });
  });
  it('any other end keeps its state and the snapshot; none changes nothing', () => {
    const failed = withSnapshot(jobOutcome({ kind: 'exited', code: 2 }, 9, 'r')!, snapshot);
    assert.equal(failed.state, 'failed');
    assert.deepEqual(failed.snapshot, snapshot);
    const plain = jobOutcome({ kind: 'exited', code: 0 }, 9, 'r')!;
    assert.equal(withSnapshot(plain, null), plain);
  });
  it('a malformed snapshot.json fails a job that exited 0', () => {
    const outcome = withSnapshot(
      jobOutcome({ kind: 'exited', code: 0 }, 9, 'r')!,
      new Error('snapshot.json is not JSON'),
    );
    assert.equal(outcome.state, 'failed');
    assert.match(outcome.message ?? '', /snapshot\.json is not JSON/);
  });
});

describe('snapshot: the cost cap asks for one before it deletes', () => {
  const pod = { keep: false, costPerHourUsd: 2, createdUnixS: 1_000_000 };
  it('at the earlier of 95 % of the cap and the lead before it', () => {
    // $10 at $2/h: 5 h = 18000 s; 95 % is 17100 s, the lead of 900 s gives 17100 too.
    assert.equal(snapshotAtUnixS({ ...pod, costCapUsd: 10 }, 900), 1_017_100);
    // $40: 72000 s; 95 % = 68400, cap − 900 = 71100: the 95 % point.
    assert.equal(snapshotAtUnixS({ ...pod, costCapUsd: 40 }, 900), 1_068_400);
    // $1: 1800 s; 95 % = 1710, cap − 900 = 900: the lead.
    assert.equal(snapshotAtUnixS({ ...pod, costCapUsd: 1 }, 900), 1_000_900);
  });
  it('none for a kept pod, one without a cap or without a rate', () => {
    assert.equal(snapshotAtUnixS({ ...pod, costCapUsd: null }, 900), null);
    assert.equal(snapshotAtUnixS({ ...pod, keep: true, costCapUsd: 10 }, 900), null);
    assert.equal(snapshotAtUnixS({ ...pod, costPerHourUsd: null, costCapUsd: 10 }, 900), null);
  });
});
