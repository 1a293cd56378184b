/**
 * Automatic recovery on a new pod when a run's pod dies mid-job (issue 19, second part), against
 * the emulator's real pods: examples/tiny/train.py saves output/checkpoint-<step>/ every few steps,
 * the client streams each home verified, and when the pod dies while the job runs — Runpod
 * deletes it (404), it dies (EXITED) — the run goes on by itself on a new pod from the newest
 * checkpoint home that hashes to the pod's list, within what is left of max_hours, up to
 * max_recoveries times. run.json records the attempts; the metrics file continues the curve; no
 * pod is left billing. A host that stops answering: reliability.recoveryHost. Timings:
 * production / 60.
 */
import assert from 'node:assert/strict';
import { attach } from '../../src/core/flow';
import { spawnLifecycleChild, startCli } from '../helpers/lifecycle';
import { recordFault, recordResult } from '../helpers/reliability';
import { EVERY, recoverySuite, STEPS } from '../helpers/recovery';

describe('automatic recovery on a new pod when the pod dies mid-job', function () {
  this.timeout(300_000);
  const {
    gate: newGate,
    start,
    run,
    latestStep,
    attempts,
    modelStep,
    nothingBills,
    recovers,
  } = recoverySuite();

  it('the pod is deleted behind the client (404): the run goes on on a new pod from the newest verified checkpoint and succeeds with one continuous curve', async function () {
    await recovers(
      this,
      (l, pod) => l.emulator.faults.podVanishes(pod),
      'recovery.pod-vanishes',
      'pod_deleted',
    );
  });

  it('the pod dies (EXITED, its container killed): the client deletes it (its disk bills) and the run goes on on a new pod', async function () {
    await recovers(
      this,
      (l, pod) => l.emulator.faults.podDies(pod),
      'recovery.pod-dies',
      'pod_exited',
    );
  });

  it('max_recoveries = 0: the run fails as before, saying recovery is off, with the checkpoint home kept', async function () {
    const gate = newGate(7);
    const l = await start({ targetExtra: 'max_recoveries = 0', command: gate.command() });
    let id: string | null = null;
    const flow = run(l, (r) => (id = r));
    await l.jobRunning(() => id);
    const runId = id!;
    await l.waitFor('a checkpoint home', () => latestStep(l, runId) >= 5);
    await l.emulator.faults.podVanishes(String(l.podJson(runId).pod_id));
    recordFault(this, 'recovery.off');
    const o = await flow;
    assert.notEqual(o.error, null);
    const saved = l.runJson(runId);
    assert.equal(saved.state, 'failed');
    assert.match(String(saved.message), /no longer exists/);
    assert.match(String(saved.message), /max_recoveries = 0/);
    assert.equal((saved.end as { cause: string }).cause, 'pod_gone');
    assert.equal(l.podsOfRun(runId).length, 1, 'no second pod');
    assert.ok(latestStep(l, runId) >= 5, 'the checkpoint home stays');
    nothingBills(l);
    recordResult(this, { verified: 0, lost: 0 });
  });

  it('recovery exhausted: with max_recoveries = 1 the second pod dies too, and the run fails naming both deaths', async function () {
    // Both pods hold at step 7 (the second resumes from step 5): each dies while its job runs.
    const gate = newGate(7);
    const l = await start({ targetExtra: 'max_recoveries = 1', command: gate.command() });
    let id: string | null = null;
    const flow = run(l, (r) => (id = r));
    await l.jobRunning(() => id);
    const runId = id!;
    await l.waitFor('a checkpoint home', () => latestStep(l, runId) >= 5);
    const first = String(l.podJson(runId).pod_id);
    await l.emulator.faults.podVanishes(first);
    await l.waitFor(
      'the second pod running its job',
      () => String(l.podJson(runId).pod_id) !== first && l.podJson(runId).state === 'running',
    );
    const second = String(l.podJson(runId).pod_id);
    await l.emulator.faults.podVanishes(second);
    recordFault(this, 'recovery.exhausted', 2);
    const o = await flow;
    assert.notEqual(o.error, null);
    const saved = l.runJson(runId);
    assert.equal(saved.state, 'failed');
    assert.match(String(saved.message), /max_recoveries = 1, and it was used/);
    const got = attempts(l, runId);
    assert.deepEqual(
      got.map((a) => [a.pod_id, a.reason]),
      [
        [first, 'pod_deleted'],
        [second, 'pod_deleted'],
      ],
    );
    assert.equal(l.podsOfRun(runId).length, 2, 'no third pod');
    nothingBills(l);
    recordResult(this, { verified: 0, lost: 0 });
  });

  it('the time left is too small to recover: refused with the figures, the pod deleted, the checkpoint home kept', async function () {
    // max_hours of 0.01 h (36 s); recovery needs 10 s (production 10 min / 60) left.
    const l = await start({
      maxHours: 0.01,
      command: `python3 train.py --steps 400 --step-seconds 0.1 --save-every ${EVERY}`,
    });
    let id: string | null = null;
    const flow = run(l, (r) => (id = r));
    await l.jobRunning(() => id);
    const runId = id!;
    const created = Date.parse(String(l.podJson(runId).created_at));
    await l.waitFor(
      'less than 10 s of max_hours left',
      () => Date.now() > created + 27_000,
      40_000,
    );
    const pod = String(l.podJson(runId).pod_id);
    await l.emulator.faults.podDies(pod);
    recordFault(this, 'recovery.budget-too-small');
    const o = await flow;
    assert.notEqual(o.error, null);
    const saved = l.runJson(runId);
    assert.equal(saved.state, 'failed', l.transcript());
    assert.match(
      String(saved.message),
      /not recovered: [\d.]+ s of max_hours left, under the [\d.]+ s a new pod needs/,
    );
    assert.equal((saved.end as { cause: string }).cause, 'recovery_failed');
    assert.equal(l.ledgerOf(pod).billing, false, 'the EXITED pod is deleted');
    assert.equal(l.podsOfRun(runId).length, 1);
    assert.ok(latestStep(l, runId) >= 5, 'the checkpoint home stays');
    nothingBills(l);
    recordResult(this, { verified: 0, lost: 0 });
  });

  it('attach: a client that attaches to a run whose pod died (its first client killed) carries on on a new pod', async function () {
    const gate = newGate(12);
    const l = await start({ command: gate.command() });
    const child = spawnLifecycleChild(l);
    const runId = await l
      .waitFor('the child to start the job', () => {
        const started = child.events.find((e) => e.type === 'runState' && e.state === 'running');
        return started !== undefined;
      })
      .then(() => l.onlyRunId());
    await l.waitFor('a checkpoint home', () => latestStep(l, runId) >= 10);
    await child.kill();
    const pod = String(l.podJson(runId).pod_id);
    await l.emulator.faults.podVanishes(pod);
    recordFault(this, 'recovery.attach');
    gate.open();
    const result = await l.track(attach(l.deps, l.config, runId));
    assert.equal(result.run.state, 'succeeded', l.transcript());
    const got = attempts(l, runId);
    assert.equal(got.length, 2);
    assert.equal(got[0]!.reason, 'pod_deleted');
    assert.ok((got[1]!.resumed_from_step ?? 0) >= 10);
    assert.equal(modelStep(l, runId), STEPS);
    nothingBills(l);
    recordResult(this, { verified: 1, lost: 0 });
  });

  it('the CLI `train`: the pod deleted before any checkpoint came home; the run starts over on a new pod from step 0, says so, and succeeds', async function () {
    const gate = newGate(3);
    const l = await start({
      command: gate.command('python3 train.py --steps 30 --step-seconds 0.1'),
    });
    const cli = startCli(l, ['train']);
    await l.waitFor('the job running', () => {
      try {
        const id = l.onlyRunId();
        return l.store.loadRun(id).state === 'running';
      } catch {
        return false;
      }
    });
    const runId = l.onlyRunId();
    await l.emulator.faults.podVanishes(String(l.podJson(runId).pod_id));
    recordFault(this, 'recovery.cli');
    gate.open();
    const ran = await cli.done;
    assert.equal(ran.code, 0, `${ran.stdout}\n${ran.stderr}`);
    const out = `${ran.stdout}\n${ran.stderr}`;
    assert.match(
      out,
      /died .*attempt 2 of 3 on a new pod from step 0 \(no verified checkpoint is home\)/,
    );
    assert.match(out, /succeeded/);
    assert.equal(attempts(l, runId).length, 2);
    assert.equal(attempts(l, runId)[1]!.resumed_from_step, null);
    nothingBills(l);
    recordResult(this, { verified: 1, lost: 0 });
  });
});
