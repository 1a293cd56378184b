/**
 * Reliability matrix: limits that come while a job trains, on the emulator's real pods (real
 * bootstrap, watchdog and sshd). The pod's own watchdog asks the job for a snapshot before a limit
 * ends it: `disk` when its quota is nearly full while a client follows, `deadline` before
 * max_hours when nobody follows; a pod whose job stopped so waits past its deadline until
 * `train attach` brings the checkpoint home.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FlowError, attach, train } from '../../src/core/flow';
import { matrixLabs } from '../helpers/lifecycle';
import { recordFault, recordResult } from '../helpers/reliability';

const IS_ROOT = process.getuid?.() === 0;

describe('reliability: limits while a job trains (the watchdog asks for a snapshot)', function () {
  this.timeout(120_000);
  const lab = matrixLabs();

  it('a job filling its pod disk quota while a client follows: the watchdog asks for a `disk` snapshot (>= 97 %), the job reads the request', async function () {
    if (!IS_ROOT)
      assert.fail(
        'this case fills a pod disk quota (a tmpfs) and needs root: run the tests as root',
      );
    const quotaBytes = 16 * 1024 * 1024;
    // About 15869 KiB of 16384: with the run dir's other files at least 97 % of the quota, and
    // room left for the request and the job's own writes. The job waits (bounded) for the request.
    const l = await lab({
      command:
        'python3 train.py --steps 3 --step-seconds 0.05 && head -c 16250000 /dev/zero > output/fill.bin' +
        ' && i=0 && while [ ! -e snapshot.request ] && [ $i -lt 300 ]; do sleep 0.2; i=$((i+1)); done;' +
        ' df -P . > output/df.txt; cp snapshot.request output/reason.txt',
      emulator: { workspaceQuotaBytes: quotaBytes },
    });
    recordFault(this, 'pod.disk-nearly-full');
    let runId: string | null = null;
    await l.track(train(l.deps, l.config, l.workspace, { onRun: (r) => (runId = r.id) }));
    const id = runId!;
    const runJson = l.runJson(id);
    const dir = path.join(l.runDir(id), 'output');
    const df = fs.existsSync(path.join(dir, 'df.txt'))
      ? fs.readFileSync(path.join(dir, 'df.txt'), 'utf8')
      : '';
    assert.equal(runJson.state, 'succeeded', `${String(runJson.message)}\n${df}`);
    assert.equal(fs.readFileSync(path.join(dir, 'reason.txt'), 'utf8'), 'disk\n');
    // Asked for by whichever saw the quota first: the pod's watchdog (its tick) or the following
    // client's disk policy (the pushed disk samples reach it within a second).
    const podId = String(l.podJson(id).pod_id);
    const podLog = l.emulator.podLog(podId);
    const byClient = l
      .warnings()
      .filter((w) => w.code === 'disk_snapshot')
      .map((w) => w.message);
    if (byClient.length === 0) {
      assert.match(podLog, /disk (9[7-9]|100)% used: \S+ \(df\)/);
      assert.match(podLog, /snapshot requested reason=disk/);
    } else {
      assert.match(
        byClient.join('\n'),
        /disk is about to fill: it is (9[7-9]|100) % full .*reason disk/,
      );
    }
    assert.equal(l.podJson(id).state, 'deleted');
    assert.deepEqual(
      l.billing().map((p) => p.id),
      [],
    );
    recordResult(this, { verified: 1, lost: 0 });
  });

  it('max_hours with nobody following: the watchdog asks for a `deadline` snapshot, the trainer saves and stops, the pod stays past its deadline until train attach brings the snapshot home', async function () {
    // max_hours 0.008 h (28.8 s); the job would take 60 s. The lease lapses 15 s (the TTL / 60)
    // after the client stops following; the lead is 15 s, the retrieve grace 10 min.
    const l = await lab({
      steps: 600,
      stepSeconds: 0.1,
      maxHours: 0.008,
      retrieveGraceMinutes: 10,
    });
    recordFault(this, 'max_hours, nobody following');
    let runId: string | null = null;
    const quit = new AbortController();
    const training = l.track(
      train(l.deps, l.config, l.workspace, {
        onRun: (r) => (runId = r.id),
        signal: quit.signal,
      }),
    );
    const id = await l.jobRunning(() => runId);
    quit.abort();
    await assert.rejects(training, (error: unknown) => {
      assert.ok(error instanceof FlowError && /^stopped following/.test(error.message));
      return true;
    });
    const podId = String(l.podJson(id).pod_id);
    const deadlineMs = Number(l.podJson(id).deadline_unix) * 1000;
    await l.waitFor(
      'the watchdog to hold the pod for the snapshot past its deadline',
      () =>
        /the job ended with a snapshot: kept for its retrieval until/.test(
          l.emulator.podLog(podId),
        ),
      90_000,
    );
    const podLog = l.emulator.podLog(podId);
    assert.match(podLog, /snapshot requested reason=deadline/);
    assert.ok(Date.now() >= deadlineMs);
    assert.equal(l.ledgerOf(podId).billing, true, 'the pod waits for its retrieval');

    const attached = await attach(l.otherDeps('the CLI'), l.config, id);
    assert.equal(attached.run.state, 'stopped', l.transcript());
    const runJson = l.runJson(id);
    const snapshot = runJson.snapshot as { checkpoint: string; step: number; reason: string };
    assert.equal(snapshot.reason, 'deadline');
    assert.ok(snapshot.step > 0 && snapshot.step < 600, String(snapshot.step));
    const checkpoint = path.join(l.runDir(id), snapshot.checkpoint, 'model.json');
    const saved = JSON.parse(fs.readFileSync(checkpoint, 'utf8')) as { step: number };
    assert.equal(saved.step, snapshot.step, 'the checkpoint is home');
    assert.equal(l.podJson(id).state, 'deleted');
    assert.equal(l.ledgerOf(podId).billing, false);
    recordResult(this, { verified: 1, lost: 0 });
  });
});
