/**
 * Sweeps on the emulator with the real Optuna (/usr/bin/python3, Debian's python3-optuna): each
 * trial an ordinary train run on its own emulated pod, examples/sweep/train.py as the job (its
 * eval_loss a known function of learning_rate and lora_r), its params reaching it as `{name}`
 * placeholders and params.json.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sweep } from '../../src/core/flow/sweep';
import { ROOT } from '../helpers/cli';
import { Lab } from '../helpers/lifecycle';
import {
  assertTrialResult,
  openTrialGates,
  PYTHON,
  sweepChild,
  sweepJson,
  sweepLab,
  sweepLabPerTest,
  sweepToml,
  trialRuns,
  trialsRunning,
} from '../helpers/sweepLab';

describe('sweep: an Optuna study run as train runs on emulated pods under a hard budget', function () {
  this.timeout(600_000);
  const labs = sweepLabPerTest();

  it('runs 4 trials 2 at once and ends with the best params; each trial an ordinary run', async () => {
    const lab = labs.use(await sweepLab('trials = 4\nparallel = 2\nbudget_usd = 5'));
    let most = 0;
    const live = new Set<string>();
    lab.bus.on((e) => {
      if (e.type !== 'runState') return;
      if (e.state === 'running') live.add(e.runId);
      else live.delete(e.runId);
      most = Math.max(most, live.size);
    });
    const result = await lab.track(sweep(lab.deps, lab.config, lab.workspace, { python: PYTHON }));
    const record = sweepJson(lab);
    assert.equal(record.state, 'ended', lab.transcript());
    assert.equal(record.end, 'trials');
    assert.deepEqual(
      record.trials.map((t) => t.state),
      ['complete', 'complete', 'complete', 'complete'],
      JSON.stringify(record.trials, null, 1),
    );
    const runs = trialRuns(lab);
    assert.deepEqual(
      runs.map((r) => [r.trial, r.state]),
      [0, 1, 2, 3].map((n) => [n, 'succeeded']),
    );
    assert.ok(most <= 2, `at most 2 trials at once, saw ${most}`);
    for (const t of record.trials) {
      const run = runs.find((r) => r.trial === t.number)!;
      assert.equal(t.run_id, run.id);
      // The job read its params: its result holds them and the objective the sweep recorded.
      const out = assertTrialResult(lab, t);
      assert.ok(Math.abs(out.learning_rate - (t.params.learning_rate as number)) < 1e-12);
      assert.deepEqual(
        JSON.parse(fs.readFileSync(path.join(lab.runDir(run.id), 'params.json'), 'utf8')),
        t.params,
      );
      assert.ok(t.cost_usd !== null && t.cost_usd > 0 && t.cost_usd <= t.cap_usd);
    }
    const best = Math.min(...record.trials.map((t) => t.objective!));
    assert.equal(result.best?.objective, best);
    assert.deepEqual(result.best?.params, record.trials.find((t) => t.objective === best)!.params);
    assert.match(lab.transcript(), /sweep lr-rank ended: all 4 trials ran.*best trial/);
  });

  it("Optuna's pruner stops trials on their pods: the job cancelled, its results home, its pod deleted", async () => {
    // Jobs of 40 steps of 0.3 s, an eval_loss every 2 steps: a trial behind the median of the
    // ones before it at the same step is stopped well before its end (at 0.1 s a step, 4 s, a
    // loaded CI once saw a pruned trial's job end before its cancel arrived).
    const lab = labs.use(
      await Lab.start({
        command:
          'python3 train.py --steps 40 --step-seconds 0.3 --eval-every 2 --learning-rate {learning_rate} --lora-r {lora_r}',
        targetExtra: sweepToml('trials = 8\nparallel = 2\nbudget_usd = 10').replace(
          'pruner = "none"',
          'pruner = "median"',
        ),
      }),
    );
    fs.copyFileSync(
      path.join(ROOT, 'examples', 'sweep', 'train.py'),
      path.join(lab.workspace, 'train.py'),
    );
    const result = await lab.track(sweep(lab.deps, lab.config, lab.workspace, { python: PYTHON }));
    assert.equal(result.record.end, 'trials', lab.transcript());
    const pruned = result.record.trials.filter((t) => t.state === 'pruned');
    assert.ok(pruned.length > 0, JSON.stringify(result.record.trials, null, 1));
    const said = lab.transcript();
    for (const t of pruned) {
      // The pruner cut it, and the cancel stopped its job (a prune that comes after the job's end
      // makes the trial complete: sweepScheduler.integration). Any step will do, the last too: a
      // trial behind the median only at its last report is pruned by Optuna's rule, and a CI saw
      // its cancel reach the job before the job's exit.
      const cut = new RegExp(`trial ${t.number}: the pruner stops it at step (\\d+)`).exec(said);
      assert.ok(cut !== null, `trial ${t.number}'s prune:\n${said}`);
      const run = lab.store.loadRun(t.run_id!);
      assert.equal(run.state, 'cancelled', `trial ${t.number}: ${run.message ?? ''}`);
      // What it wrote came home: its metrics up to the prune, and its objective from them.
      const steps = fs
        .readFileSync(path.join(lab.runDir(run.id), 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { step?: number }).step ?? 0);
      assert.ok(Math.max(...steps) >= Number(cut[1]), `trial ${t.number}'s metrics came home`);
      assert.notEqual(t.objective, null);
      for (const pod of lab.podsOfRun(run.id)) assert.equal(pod.billing, false);
    }
    assert.ok(result.record.trials.some((t) => t.state === 'complete'));
    // Each pruned job was cancelled over the connection its follow held: no look-up of its pod
    // and no new SSH connection while it billed.
    assert.doesNotMatch(said, /was not cancelled over its follow's connection/);
  });

  it('a client killed mid-sweep is resumed from its records: no trial twice, none lost', async () => {
    // Jobs held at their gates, so that both trials are seen running their jobs before the
    // kill (jobs of 10 s did so only while the machine kept up); let end once resumed.
    const l = labs.use(
      await sweepLab('trials = 4\nparallel = 2\nbudget_usd = 5', 0.05, 20, { gated: true }),
    );
    const other = sweepChild(l);
    // Killed once two trials run their jobs.
    await trialsRunning(l, 2);
    other.child.kill('SIGKILL');
    await other.exited;
    const before = sweepJson(l);
    assert.equal(before.state, 'running', other.stderr());
    const gates = openTrialGates(l);
    const result = await l
      .track(sweep(l.deps, l.config, l.workspace, { python: PYTHON }))
      .finally(() => gates.stop());
    assert.equal(result.record.end, 'trials', l.transcript());
    const runs = trialRuns(l);
    const trials = result.record.trials;
    assert.equal(trials.length, 4, JSON.stringify(trials, null, 1));
    // Every trial that had a run has exactly that one run; no run serves two trials.
    const numbers = runs.map((r) => r.trial);
    assert.equal(new Set(numbers).size, numbers.length, `a trial ran twice: ${numbers.join(',')}`);
    for (const t of trials) {
      assert.ok(['complete', 'fail'].includes(t.state), JSON.stringify(t));
      if (t.run_id !== null) assert.equal(runs.find((r) => r.trial === t.number)?.id, t.run_id);
    }
    for (const t of before.trials.filter((x) => x.run_id !== null)) {
      const after = trials.find((x) => x.number === t.number)!;
      assert.equal(after.run_id, t.run_id, 'a trial recorded before the kill kept its run');
      assert.equal(after.state, 'complete', JSON.stringify(after));
    }
  });
});
