/**
 * `sweep stop` across clients, on the emulator with the real Optuna: a stop asked of the client
 * running the sweep (test/helpers/sweepChild.ts), or carried out by the asking client when none
 * runs it (its client SIGKILLed), starts no new trial, stops the running ones (their results
 * home, their pods deleted) and ends the record `stopped`. `sweep attach`: sweepAttach.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sweepStop } from '../../src/core/flow/sweep';
import type { Lab } from '../helpers/lifecycle';
import {
  PYTHON,
  SWEEP,
  sweepChild,
  sweepJson,
  sweepLab,
  sweepLabPerTest,
  trialRuns,
  trialsRunning,
} from '../helpers/sweepLab';

/** The steps of a stopped trial's job, which then waits at its gate until the stop. */
const GATED_STEPS = 20;

/** The steps of the metric lines in `file` (a metrics.jsonl). */
function stepsIn(file: string): number[] {
  return fs
    .readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((line) => (JSON.parse(line) as { step?: number }).step ?? 0);
}

/** Waits until `n` trials' jobs wrote every step on their pods and wait at their gate. */
function trialsAtGate(lab: Lab, n: number): Promise<void> {
  const atGate = (id: string): boolean => {
    try {
      const podId = String(lab.podJson(id).pod_id);
      return Math.max(...stepsIn(lab.podFile(podId, id, 'metrics.jsonl'))) === GATED_STEPS;
    } catch {
      return false;
    }
  };
  return lab.waitFor(
    `${n} trials at their gate`,
    () => trialRuns(lab).filter((r) => atGate(r.id)).length === n,
    240_000,
  );
}

/** The stopped trials: FAIL saying so, their runs cancelled before their last step, pods gone. */
function assertStopped(lab: Lab, stoppedTrials: number): void {
  const record = sweepJson(lab);
  assert.equal(record.state, 'ended', lab.transcript());
  assert.equal(record.end, 'stopped');
  assert.match(record.message ?? '', /stopped on request .*no trial started after it/);
  assert.equal(record.trials.length, stoppedTrials, JSON.stringify(record.trials, null, 1));
  for (const t of record.trials) {
    assert.equal(t.state, 'fail', JSON.stringify(t));
    assert.match(t.message ?? '', /stopped with the sweep/);
    const run = lab.store.loadRun(t.run_id!);
    assert.equal(run.state, 'cancelled', `trial ${t.number}: ${run.message ?? ''}`);
    // Its results came home: every metric it wrote before the stop (its job held at its gate,
    // so the stop, not the job's end, ended it: the run is cancelled, above).
    assert.equal(
      Math.max(...stepsIn(path.join(lab.runDir(run.id), 'metrics.jsonl'))),
      GATED_STEPS,
      `trial ${t.number}'s metrics came home`,
    );
    assert.ok(t.cost_usd !== null && t.cost_usd > 0 && t.cost_usd <= t.cap_usd);
    const pods = lab.podsOfRun(run.id);
    assert.ok(pods.length > 0);
    for (const pod of pods) assert.equal(pod.billing, false, `trial ${t.number}'s pod bills`);
  }
  assert.deepEqual(
    trialRuns(lab).map((r) => r.trial),
    record.trials.map((t) => t.number),
    'no trial started after the stop',
  );
  assert.equal(fs.existsSync(path.join(lab.store.runsDir, 'sweeps', SWEEP, 'stop.json')), false);
}

describe('sweep stop across clients, on emulated pods and the real Optuna', function () {
  this.timeout(600_000);
  const labs = sweepLabPerTest();
  /** A sweep of 4 trials, 2 at a time, run by a child client: its first two trials at their gates. */
  async function childSweepAtGates() {
    const l = labs.use(
      await sweepLab('trials = 4\nparallel = 2\nbudget_usd = 5', 0.05, GATED_STEPS, {
        gated: true,
      }),
    );
    const other = sweepChild(l);
    await trialsRunning(l, 2);
    await trialsAtGate(l, 2);
    return { l, other };
  }

  it('stop asks the client running the sweep: no new trial, running ones stopped, results home, pods deleted', async () => {
    const { l, other } = await childSweepAtGates();
    let waitedOn = '';
    const result = await l.track(
      sweepStop(l.otherDeps(), l.config, l.workspace, SWEEP, {
        python: PYTHON,
        onWait: (holder) => (waitedOn = holder),
      }),
    );
    assert.equal(result.by, 'holder', l.transcript());
    assert.match(waitedOn, new RegExp(`pid ${other.child.pid}, sweep child`));
    assert.equal(await other.exited, 0, other.stderr());
    assertStopped(l, 2);
  });

  it('stop with no client running the sweep (its client killed) stops the trials itself', async () => {
    const { l, other } = await childSweepAtGates();
    other.child.kill('SIGKILL');
    await other.exited;
    const result = await l.track(
      sweepStop(l.otherDeps(), l.config, l.workspace, SWEEP, { python: PYTHON }),
    );
    assert.equal(result.by, 'here', l.transcript());
    assertStopped(l, 2);
    // Stopping an ended sweep changes nothing.
    const again = await sweepStop(l.deps, l.config, l.workspace, SWEEP, { python: PYTHON });
    assert.equal(again.by, 'ended');
    assert.deepEqual(again.record, result.record);
  });
});
