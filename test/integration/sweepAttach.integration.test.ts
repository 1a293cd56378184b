/**
 * `sweep attach` and `sweep stop` across clients, on the emulator with the real Optuna: a sweep
 * run by a client process (test/helpers/sweepChild.ts) is refused to a second client while the
 * first lives and taken over once it was SIGKILLed, its live trials followed to their end and
 * new ones started; a stop asked of the client running the sweep, or carried out by the asking
 * client when none runs it, starts no new trial, stops the running ones (their results home,
 * their pods deleted) and ends the record `stopped`.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sweepAttach, sweepStop, SweepError } from '../../src/core/flow/sweep';
import { openGate } from '../helpers/gatedJob';
import type { Lab } from '../helpers/lifecycle';
import {
  assertTrialResult,
  PYTHON,
  SWEEP,
  sweepChild,
  sweepJson,
  sweepLab,
  sweepLabPerTest,
  trialRuns,
  trialsRunning,
} from '../helpers/sweepLab';

/** Steps of a job the stop cuts: 30 s, so that a loaded machine's stop comes well before its end. */
/** The steps of a stopped trial's job, which then waits at its gate until the stop. */
const GATED_STEPS = 20;

/** The stopped trials: FAIL saying so, their runs cancelled before their last step, pods gone. */
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

describe('sweep attach and sweep stop across clients, on emulated pods and the real Optuna', function () {
  this.timeout(600_000);
  const labs = sweepLabPerTest();

  it('attach is refused while the client running the sweep lives, and takes it over once it was killed', async () => {
    // Jobs of 10 s, so that both trials are seen running their jobs before the kill.
    const l = labs.use(await sweepLab('trials = 3\nparallel = 2\nbudget_usd = 5', 0.5));
    const other = sweepChild(l);
    await trialsRunning(l, 2);
    const holder = `sweep child`;
    await assert.rejects(
      sweepAttach(l.otherDeps(), l.config, l.workspace, SWEEP, { python: PYTHON }),
      (error: unknown) =>
        error instanceof SweepError &&
        error.kind === 'busy' &&
        error.message.includes(`pid ${other.child.pid}, ${holder}`) &&
        /sweep stop lr-rank/.test(error.hint ?? ''),
    );
    other.child.kill('SIGKILL');
    await other.exited;
    const before = sweepJson(l);
    assert.equal(before.state, 'running', other.stderr());
    const result = await l.track(
      sweepAttach(l.otherDeps(), l.config, l.workspace, SWEEP, { python: PYTHON }),
    );
    assert.equal(result.record.end, 'trials', l.transcript());
    const trials = result.record.trials;
    assert.deepEqual(
      trials.map((t) => [t.number, t.state]),
      [0, 1, 2].map((n) => [n, 'complete']),
      JSON.stringify(trials, null, 1),
    );
    // The two trials of the killed client kept their runs; the third was started by attach.
    for (const t of before.trials) assert.equal(trials[t.number]?.run_id, t.run_id);
    assert.deepEqual(
      trialRuns(l).map((r) => [r.trial, r.state]),
      [0, 1, 2].map((n) => [n, 'succeeded']),
    );
    // Attaching to an ended sweep shows it as it is.
    const again = await sweepAttach(l.deps, l.config, l.workspace, SWEEP, { python: PYTHON });
    assert.deepEqual(again.record, result.record);
  });

  it('a trial followed again by attach whose pod dies goes on on a new pod with its own params', async () => {
    // One trial whose job waits at a gate (../helpers/gatedJob.ts) after its steps; its client
    // killed, attach follows it, then its pod dies while its job runs: the recovery starts the
    // trial's job again, its {placeholders} replaced (the sweep's raw command has
    // `--lora-r {lora_r}`, which the job refuses). Gated, not long: a job of 30 s had ended on
    // a loaded machine before the death landed, and the trial failed its retrieval instead.
    const l = labs.use(
      await sweepLab('trials = 1\nparallel = 1\nbudget_usd = 5', 0.05, 20, { gated: true }),
    );
    const other = sweepChild(l);
    await trialsRunning(l, 1);
    other.child.kill('SIGKILL');
    await other.exited;
    // Followed again: a metric of its job arrives through this client.
    let followed = false;
    l.bus.on((e) => {
      if (e.type === 'metric') followed = true;
    });
    const attached = l.track(
      sweepAttach(l.otherDeps(), l.config, l.workspace, SWEEP, { python: PYTHON }),
    );
    await l.waitFor('trial 0 followed again', () => followed, 120_000);
    const runId = sweepJson(l).trials[0]!.run_id!;
    const firstPod = String(l.podJson(runId).pod_id);
    await l.emulator.faults.podDies(firstPod);
    // The job on the new pod is let end once its bootstrap claimed the run dir there.
    let newPod = '';
    await l.waitFor(
      "a new pod claimed trial 0's run dir",
      () => {
        for (const p of l.podsOfRun(runId)) {
          const dirs = p.id === firstPod ? undefined : l.emulator.pod(p.id)?.dirs;
          if (dirs && fs.existsSync(path.join(dirs.workspace, 'overbrainer', runId, '.claim')))
            newPod = p.id;
        }
        return newPod !== '';
      },
      240_000,
    );
    openGate(l.emulator, newPod, runId);
    const result = await attached;
    const trial = result.record.trials[0]!;
    assert.equal(trial.state, 'complete', `${JSON.stringify(trial)}\n${l.transcript()}`);
    assert.ok(l.podsOfRun(runId).length >= 2, 'the trial went on on a new pod');
    assertTrialResult(l, trial);
  });

  it('stop asks the client running the sweep: no new trial, running ones stopped, results home, pods deleted', async () => {
    const l = labs.use(
      await sweepLab('trials = 4\nparallel = 2\nbudget_usd = 5', 0.05, GATED_STEPS, {
        gated: true,
      }),
    );
    const other = sweepChild(l);
    await trialsRunning(l, 2);
    await trialsAtGate(l, 2);
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
    const l = labs.use(
      await sweepLab('trials = 4\nparallel = 2\nbudget_usd = 5', 0.05, GATED_STEPS, {
        gated: true,
      }),
    );
    const other = sweepChild(l);
    await trialsRunning(l, 2);
    await trialsAtGate(l, 2);
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
