/**
 * Automatic recovery on a new pod when a run's pod dies mid-job (issue 19, second part), against
 * the emulator's real pods: examples/tiny/train.py saves output/checkpoint-<step>/ every few steps,
 * the client streams each home verified, and when the pod dies while the job runs — Runpod
 * deletes it (404), it dies (EXITED), its host stops answering (SSH silent, then EXITED) — the run
 * goes on by itself on a new pod from the newest checkpoint home that hashes to the pod's list,
 * within what is left of max_hours, up to max_recoveries times. run.json records the attempts;
 * the metrics file continues the curve; no pod is left billing. Timings: production / 60.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { attach, train, type FlowResult } from '../../src/core/flow';
import {
  matrixLabs,
  spawnLifecycleChild,
  startCli,
  type Lab,
  type LabOptions,
} from '../helpers/lifecycle';
import { recordFault, recordResult } from '../helpers/reliability';

interface Outcome {
  result: FlowResult | null;
  error: unknown;
}

interface AttemptJson {
  pod_id: string | null;
  started_at: string;
  ended_at: string | null;
  reason: string | null;
  resumed_from_step: number | null;
  resumed_from_checkpoint: string | null;
  cost_usd: number | null;
}

const STEPS = 60;
const EVERY = 5;
const TRAIN = `python3 train.py --steps ${STEPS} --step-seconds 0.1 --save-every ${EVERY}`;

/**
 * A gate on the host that every pod sees (a pod's mounts cover only its own directories): the
 * job holds after step `atStep` until the test opens it, so a pod is killed while its job runs
 * however slow the machine is (a job of a fixed length once ended before CI's loaded machine
 * brought its checkpoint home, and the run succeeded without a death to recover from).
 */
class Gate {
  private static count = 0;
  readonly file = path.join(os.tmpdir(), `overbrainer-gate-${process.pid}-${Gate.count++}`);

  constructor(private readonly atStep: number) {
    fs.rmSync(this.file, { force: true });
  }

  /** The job's command, held at the gate. */
  command(base = TRAIN): string {
    return `${base} --hold-at ${this.atStep} --hold-file ${this.file}`;
  }

  open(): void {
    fs.writeFileSync(this.file, '');
  }

  remove(): void {
    fs.rmSync(this.file, { force: true });
  }
}

describe('automatic recovery on a new pod when the pod dies mid-job', function () {
  this.timeout(300_000);
  const lab = matrixLabs();
  const gates: Gate[] = [];
  afterEach(() => {
    for (const gate of gates.splice(0)) gate.remove();
  });

  const start = (options: LabOptions = {}): Promise<Lab> =>
    lab({
      command: TRAIN,
      ...options,
      timing: { checkpointPollMs: 200, ...options.timing },
    });

  function run(l: Lab, onRun: (id: string) => void): Promise<Outcome> {
    return l.track(train(l.deps, l.config, l.workspace, { onRun: (r) => onRun(r.id) })).then(
      (result) => ({ result, error: null }),
      (error: unknown) => ({ result: null, error }),
    );
  }

  const latestStep = (l: Lab, id: string): number => {
    try {
      const file = path.join(l.runDir(id), 'checkpoints', 'latest.json');
      return (JSON.parse(fs.readFileSync(file, 'utf8')) as { step: number }).step;
    } catch {
      return 0;
    }
  };
  const attempts = (l: Lab, id: string): AttemptJson[] =>
    (l.runJson(id).attempts as AttemptJson[] | undefined) ?? [];
  const modelStep = (l: Lab, id: string): number =>
    (
      JSON.parse(fs.readFileSync(path.join(l.runDir(id), 'output', 'model.json'), 'utf8')) as {
        step: number;
      }
    ).step;
  /** The loss lines' steps of the run's metrics.jsonl as it came home. */
  const lossSteps = (l: Lab, id: string): number[] =>
    fs
      .readFileSync(path.join(l.runDir(id), 'metrics.jsonl'), 'utf8')
      .split('\n')
      .filter((line) => line.includes('"loss"'))
      .map((line) => (JSON.parse(line) as { step: number }).step);
  const nothingBills = (l: Lab): void =>
    assert.deepEqual(
      l.billing().map((p) => p.id),
      [],
      'a pod was left billing',
    );
  const recoveryWarnings = (l: Lab, id: string): string[] =>
    l
      .warnings()
      .filter((w) => w.runId === id && w.code === 'recovering')
      .map((w) => w.message);

  /** Runs to a streamed checkpoint, kills the pod with `kill`, and checks the run recovered. */
  async function recovers(
    ctx: Mocha.Context,
    kill: (l: Lab, podId: string) => Promise<unknown>,
    fault: string,
    reason: string,
    options: LabOptions = {},
  ): Promise<void> {
    const gate = new Gate(12);
    gates.push(gate);
    const l = await start({ command: gate.command(), ...options });
    let id: string | null = null;
    const flow = run(l, (r) => (id = r));
    await l.jobRunning(() => id);
    const runId = id!;
    await l.waitFor('a checkpoint at step 10 home', () => latestStep(l, runId) >= 10);
    const firstPod = String(l.podJson(runId).pod_id);
    await kill(l, firstPod);
    recordFault(ctx, fault);
    // The new pod resumes from step 10 and goes past the gate.
    gate.open();
    const o = await flow;
    assert.equal(o.error, null, `${String(o.error)}\n${l.transcript()}`);
    assert.equal(l.runJson(runId).state, 'succeeded', l.transcript());
    const got = attempts(l, runId);
    assert.equal(got.length, 2, JSON.stringify(got));
    assert.equal(got[0]!.pod_id, firstPod);
    assert.equal(got[0]!.reason, reason);
    assert.equal(got[0]!.resumed_from_step, null);
    assert.ok(got[0]!.ended_at !== null);
    const second = got[1]!;
    assert.notEqual(second.pod_id, firstPod);
    assert.ok((second.resumed_from_step ?? 0) >= 10, JSON.stringify(second));
    assert.equal(
      second.resumed_from_checkpoint,
      `checkpoints/checkpoint-${second.resumed_from_step}`,
    );
    assert.equal(second.reason, null);
    assert.ok(second.ended_at !== null);
    for (const a of got) assert.ok(typeof a.cost_usd === 'number' && a.cost_usd >= 0);
    // The same run to its last step: one model, one curve without a gap or a repeat.
    assert.equal(modelStep(l, runId), STEPS);
    assert.deepEqual(
      lossSteps(l, runId),
      Array.from({ length: STEPS }, (_, i) => i + 1),
    );
    const said = recoveryWarnings(l, runId);
    assert.equal(said.length, 1, l.transcript());
    assert.match(said[0]!, new RegExp(`pod ${firstPod} `));
    assert.match(said[0]!, /attempt 2 of 3 on a new pod from checkpoint-\d+ \(step \d+\)/);
    assert.match(said[0]!, /lost ≤ [\d.]+ s of training; spent so far \$\d/);
    // The first pod is gone from the ledger (deleted, never left billing), the second too.
    assert.equal(l.ledgerOf(firstPod).billing, false);
    assert.equal(l.podsOfRun(runId).length, 2);
    nothingBills(l);
    recordResult(ctx, { verified: 1, lost: 0 });
  }

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

  it('the host stops answering (SSH silent while listed RUNNING, then EXITED): the run goes on on a new pod', async function () {
    await recovers(
      this,
      (l, pod) => l.emulator.faults.hostLost(pod, 1_000),
      'recovery.host-lost',
      'pod_exited',
      { timing: { requestTimeoutMs: 1_500, connectTimeoutMs: 1_500 } },
    );
  });

  it('the host stops answering and Runpod goes on listing it RUNNING: the client deletes the pod (its watchdog, on that host, cannot) and the run goes on on a new pod', async function () {
    await recovers(
      this,
      (l, pod) => l.emulator.faults.hostLost(pod),
      'recovery.host-silent',
      'host_lost',
      { timing: { requestTimeoutMs: 1_500, connectTimeoutMs: 1_500 } },
    );
  });

  it('the host stops answering, then its pod is deleted while the client asks the host again: the run goes on on a new pod, not left "lost"', async function () {
    await recovers(
      this,
      async (l, pod) => {
        await l.emulator.faults.hostLost(pod);
        await l.waitFor(
          'the client asking the silent host again',
          () =>
            l.events.some(
              ({ event }) =>
                event.type === 'log' && /gave no SSH answer again \(1 of/.test(event.message),
            ),
          120_000,
        );
        await l.emulator.faults.podVanishes(pod);
      },
      'recovery.host-silent-then-gone',
      'pod_deleted',
      { timing: { requestTimeoutMs: 1_500, connectTimeoutMs: 1_500 } },
    );
  });

  it('max_recoveries = 0: the run fails as before, saying recovery is off, with the checkpoint home kept', async function () {
    const gate = new Gate(7);
    gates.push(gate);
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
    const gate = new Gate(7);
    gates.push(gate);
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
    const gate = new Gate(12);
    gates.push(gate);
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
    const gate = new Gate(3);
    gates.push(gate);
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
