/**
 * The labs and asserts of the automatic recovery files (reliability.recovery and
 * reliability.recoveryHost): a run of examples/tiny/train.py that saves a checkpoint every few
 * steps, held at a gate on the host so that its pod is killed while the job runs, and the checks
 * that a run recovered on a new pod (run.json's attempts, one model and one continuous curve, the
 * warning, nothing left billing). Timings: production / 60.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { train, type FlowResult } from '../../src/core/flow';
import { matrixLabs, type Lab, type LabOptions } from './lifecycle';
import { recordFault, recordResult } from './reliability';

export interface Outcome {
  result: FlowResult | null;
  error: unknown;
}

export interface AttemptJson {
  pod_id: string | null;
  started_at: string;
  ended_at: string | null;
  reason: string | null;
  resumed_from_step: number | null;
  resumed_from_checkpoint: string | null;
  cost_usd: number | null;
}

/**
 * The job's steps: it holds at step 12 (a checkpoint of step 10 home), and the new pod trains
 * from there to the last step, which 30 show as 60 did (one model, one curve without a gap).
 */
export const STEPS = 30;
export const EVERY = 5;
const TRAIN = `python3 train.py --steps ${STEPS} --step-seconds 0.1 --save-every ${EVERY}`;

/**
 * A gate on the host that every pod sees (a pod's mounts cover only its own directories): the
 * job holds after step `atStep` until the test opens it, so a pod is killed while its job runs
 * however slow the machine is (a job of a fixed length once ended before CI's loaded machine
 * brought its checkpoint home, and the run succeeded without a death to recover from).
 */
export class Gate {
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

/** Call in a describe's body: its labs (closed after each test) and its gates (removed). */
export function recoverySuite() {
  const lab = matrixLabs();
  const gates: Gate[] = [];
  afterEach(() => {
    for (const gate of gates.splice(0)) gate.remove();
  });

  const gate = (atStep: number): Gate => {
    const made = new Gate(atStep);
    gates.push(made);
    return made;
  };

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
    const held = gate(12);
    const l = await start({ command: held.command(), ...options });
    let id: string | null = null;
    const flow = run(l, (r) => (id = r));
    await l.jobRunning(() => id);
    const runId = id!;
    await l.waitFor('a checkpoint at step 10 home', () => latestStep(l, runId) >= 10);
    const firstPod = String(l.podJson(runId).pod_id);
    await kill(l, firstPod);
    recordFault(ctx, fault);
    // The new pod resumes from step 10 and goes past the gate.
    held.open();
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

  return { gate, start, run, latestStep, attempts, modelStep, nothingBills, recovers };
}
