/**
 * A sweep's trial whose pod restarts while nobody follows it, on the emulator with the real
 * Optuna: its client SIGKILLed, the pod's container crashed and restarted without an SSH
 * endpoint for a while (the emulator's `sshd unpublished` fault, then a restart that publishes
 * it). `sweep attach` waits for the endpoint (as a followed pod's restart is waited for) and
 * follows the trial to its real end; a pod whose endpoint never comes back within the wait ends
 * the trial FAIL and is removed then, never left billing its disk.
 */
import assert from 'node:assert/strict';
import { sweepAttach } from '../../src/core/flow/sweep';
import type { Lab } from '../helpers/lifecycle';
import {
  PYTHON,
  SWEEP,
  sweepChild,
  sweepJson,
  sweepLab,
  sweepLabPerTest,
  trialsRunning,
} from '../helpers/sweepLab';

/** A job of 30 s: it is still running when its pod is crashed. */
const LONG_STEPS = 60;

/**
 * A one-trial sweep whose client is killed once the trial's job runs; then the trial's pod is
 * crashed and restarts RUNNING with no SSH endpoint (its sshd never published).
 */
async function restartingTrial(l: Lab): Promise<{ runId: string; podId: string }> {
  const other = sweepChild(l);
  await trialsRunning(l, 1);
  other.child.kill('SIGKILL');
  await other.exited;
  const runId = sweepJson(l).trials[0]!.run_id!;
  const podId = String(l.podJson(runId).pod_id);
  await l.emulator.faults.sshdNeverStarts('unpublished', podId);
  await l.emulator.faults.podCrash(podId);
  await l.waitFor('the pod restarted without an SSH endpoint', () => {
    const pod = l.emulator.pod(podId);
    return pod !== undefined && pod.containerStarts >= 2 && pod.status === 'RUNNING';
  });
  return { runId, podId };
}

/** How many times the API was asked for pod `podId` so far. */
function looksAt(l: Lab, podId: string): number {
  return l.emulator.requests().filter((r) => r.route === 'getPod' && r.path.includes(podId)).length;
}

/** No pod of the sweep's trials bills any more (the emulator's ledger). */
function noTrialPodBills(l: Lab): void {
  for (const t of sweepJson(l).trials) {
    const pods = l.podsOfRun(t.run_id!);
    assert.ok(pods.length > 0, `trial ${t.number} had a pod`);
    for (const pod of pods)
      assert.equal(pod.billing, false, `trial ${t.number}'s pod ${pod.id} bills`);
  }
}

describe('sweep attach to a trial whose pod is restarting, on emulated pods and the real Optuna', function () {
  this.timeout(600_000);
  const labs = sweepLabPerTest();

  it('attach waits while the pod restarts without an SSH endpoint and follows the trial to its end once it answers', async () => {
    const l = labs.use(await sweepLab('trials = 1\nparallel = 1\nbudget_usd = 5', 0.5, LONG_STEPS));
    const { runId, podId } = await restartingTrial(l);
    const before = looksAt(l, podId);
    let settled = false;
    const attached = l.track(
      sweepAttach(l.otherDeps(), l.config, l.workspace, SWEEP, { python: PYTHON }),
    );
    void attached.finally(() => (settled = true)).catch(() => undefined);
    // Attach found no endpoint and looks again (or, without the wait, gave the trial up).
    await l.waitFor(
      'attach to look at the restarting pod again',
      () => settled || looksAt(l, podId) >= before + 3,
      120_000,
    );
    assert.equal(
      settled,
      false,
      `attach gave the trial up on a restarting pod: ${JSON.stringify(sweepJson(l).trials)}\n${l.transcript()}`,
    );
    // The pod comes back with an endpoint (its restart killed the job: a container restart keeps
    // the disk, not the processes).
    l.emulator.faults.clear();
    await l.emulator.faults.podCrash(podId);
    const result = await attached;
    const trial = result.record.trials[0]!;
    assert.equal(result.record.end, 'trials', l.transcript());
    assert.doesNotMatch(trial.message ?? '', /no SSH endpoint/, JSON.stringify(trial));
    // Followed to the job's real end: its results came home and its run says how the job ended.
    const run = l.store.loadRun(runId);
    assert.equal(run.state, 'failed', `${run.message ?? ''}\n${l.transcript()}`);
    assert.match(run.message ?? '', /stopped without an exit code|exited with code/);
    assert.equal(trial.message, run.message);
    assert.equal(l.podJson(runId).state, 'deleted');
    assert.match(l.transcript(), /restarted and answers on|has no SSH endpoint/);
    noTrialPodBills(l);
  });

  it('a trial whose pod never gets an SSH endpoint back ends FAIL and its pod is removed, nothing left billing', async () => {
    const l = labs.use(await sweepLab('trials = 1\nparallel = 1\nbudget_usd = 5', 0.5, LONG_STEPS));
    const { runId } = await restartingTrial(l);
    // This client waits 5 s for the endpoint (production: readyTimeoutMs, 15 min).
    const deps = { ...l.otherDeps(), timing: { ...l.timing, readyTimeoutMs: 5_000 } };
    const result = await l.track(
      sweepAttach(deps, l.config, l.workspace, SWEEP, { python: PYTHON }),
    );
    const trial = result.record.trials[0]!;
    assert.equal(trial.state, 'fail', JSON.stringify(trial));
    assert.match(trial.message ?? '', /no SSH endpoint/, JSON.stringify(trial));
    assert.equal(l.podJson(runId).state, 'deleted', l.transcript());
    const run = l.store.loadRun(runId);
    assert.equal(run.state, 'failed', run.message ?? '');
    noTrialPodBills(l);
  });
});
