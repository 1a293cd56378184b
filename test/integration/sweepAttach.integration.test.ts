/**
 * `sweep attach` across clients, on the emulator with the real Optuna: a sweep run by a client
 * process (test/helpers/sweepChild.ts) is refused to a second client while the first lives and
 * taken over once it was SIGKILLed, its live trials followed to their end and new ones started;
 * a trial followed again whose pod dies goes on on a new pod. `sweep stop`: sweepStop.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sweepAttach, SweepError } from '../../src/core/flow/sweep';
import { openGate } from '../helpers/gatedJob';
import {
  assertTrialResult,
  openTrialGates,
  PYTHON,
  SWEEP,
  sweepChild,
  sweepJson,
  sweepLab,
  sweepLabPerTest,
  trialRuns,
  trialsRunning,
} from '../helpers/sweepLab';

describe('sweep attach across clients, on emulated pods and the real Optuna', function () {
  this.timeout(600_000);
  const labs = sweepLabPerTest();

  it('attach is refused while the client running the sweep lives, and takes it over once it was killed', async () => {
    // Jobs held at their gates, so that both trials are seen running their jobs before the
    // kill (jobs of 10 s did so only while the machine kept up); let end once taken over.
    const l = labs.use(
      await sweepLab('trials = 3\nparallel = 2\nbudget_usd = 5', 0.05, 20, { gated: true }),
    );
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
    const gates = openTrialGates(l);
    const result = await l
      .track(sweepAttach(l.otherDeps(), l.config, l.workspace, SWEEP, { python: PYTHON }))
      .finally(() => gates.stop());
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
});
