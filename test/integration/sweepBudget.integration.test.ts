/**
 * A sweep's hard budget on the emulator with the real Optuna (/usr/bin/python3, Debian's
 * python3-optuna): trials start only while the budget holds every live trial's worst case, and
 * what Runpod billed the sweep's pods stays within it. The sweep itself: sweep.
 */
import assert from 'node:assert/strict';
import type { OverbrainerConfig } from '../../src/core/config/types';
import { sweep, sweepQuote } from '../../src/core/flow/sweep';
import { PYTHON, sweepLab, sweepLabPerTest, trialRuns } from '../helpers/sweepLab';

describe("sweep: the budget holds every live trial's worst case, on emulated pods", function () {
  this.timeout(600_000);
  const labs = sweepLabPerTest();

  it('a budget of 3 worst cases starts 3 trials at once; a 4th only once an end gave room back', async () => {
    const lab = labs.use(await sweepLab('trials = 4\nparallel = 3\nbudget_usd = 5'));
    const quote = await sweepQuote(lab.deps, lab.config);
    const budgetUsd = 3 * quote.trialWorstUsd;
    const config: OverbrainerConfig = { ...lab.config, sweep: { ...lab.config.sweep!, budgetUsd } };
    const said: string[] = [];
    lab.bus.on((e) => {
      if (e.type === 'log' && e.message.startsWith('sweep lr-rank: ')) said.push(e.message);
    });
    const result = await lab.track(sweep(lab.deps, config, lab.workspace, { python: PYTHON }));
    assert.equal(result.record.end, 'trials', said.join('\n'));
    const firstEnd = said.findIndex((m) => /trial \d complete|trial \d fail/.test(m));
    const fourth = said.findIndex((m) => m.includes('trial 3 starts'));
    assert.ok(firstEnd >= 0 && fourth > firstEnd, said.join('\n'));
    assert.equal(said.filter((m) => / starts: /.test(m)).length, 4);
    // What Runpod billed the sweep's pods, all together, is within the budget.
    const billed = result.record.trials
      .flatMap((t) => lab.podsOfRun(t.run_id!))
      .reduce((sum, entry) => sum + entry.costUsd, 0);
    assert.ok(billed <= budgetUsd, `billed ${billed} of ${budgetUsd}`);
  });

  it("a budget below one trial's worst case starts none and says so", async () => {
    const lab = labs.use(await sweepLab('trials = 4\nparallel = 2\nbudget_usd = 5'));
    const quote = await sweepQuote(lab.deps, lab.config);
    const budgetUsd = quote.trialWorstUsd / 2;
    const config: OverbrainerConfig = { ...lab.config, sweep: { ...lab.config.sweep!, budgetUsd } };
    const result = await lab.track(sweep(lab.deps, config, lab.workspace, { python: PYTHON }));
    assert.equal(result.record.end, 'budget');
    assert.deepEqual(result.record.trials, []);
    assert.match(result.record.message ?? '', /cannot hold another trial's worst case .*after 0/);
    assert.deepEqual(trialRuns(lab), []);
  });
});
