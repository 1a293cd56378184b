/**
 * `[budget]` at train start, against the emulator and real pods: a run whose worst case would
 * pass what is left is refused before anything is created; with fit_runs_to_budget it is given a
 * max_cost_usd that fits, and that cap is what its pod's watchdog holds.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { BudgetError, train } from '../../src/core/flow';
import { type Lab, matrixLabs, runIdHolder } from '../helpers/lifecycle';
import { recordResult } from '../helpers/reliability';

const budget = (lines: string): string => `\n[budget]\n${lines}\n`;

describe('budget: the gate at train start', function () {
  this.timeout(300_000);
  const lab = matrixLabs();

  it('refuses a run whose worst case passes what is left, with the figures and the next action, creating nothing', async function () {
    // RTX 4090 at $0.69/h, max_hours 1, then (timing / 60) the 1 min retrieve grace (longer than
    // the lease's 15 s + a tick of 1 s + the snapshot wait's 15 s), a tick and 90 s of delete
    // calls: 3751 s, worst case $0.72 against $0.50.
    const l: Lab = await lab({ targetExtra: budget('max_usd_per_day = 0.5') });
    const run = runIdHolder();
    await assert.rejects(
      l.track(train(l.deps, l.config, l.workspace, { onRun: run.onRun })),
      (error: unknown) => {
        assert.ok(error instanceof BudgetError, String(error));
        assert.match(
          error.message,
          /worst case \$0\.72 would pass what is left of the budget, \$0\.50 today \(UTC\): \$0\.00 spent of \$0\.50/,
        );
        assert.match(
          error.hint ?? '',
          /max_cost_usd = 0\.48 .*fit_runs_to_budget = true .*max_usd_per_day/,
        );
        assert.deepEqual(error.figures, { worstUsd: 0.72, leftUsd: 0.5, period: 'day' });
        return true;
      },
    );
    assert.equal(run.id, null, 'no run was created');
    assert.equal(fs.existsSync(l.store.runsDir) ? fs.readdirSync(l.store.runsDir).length : 0, 0);
    assert.equal(l.emulator.ledger().totals.podsCreated, 0, 'no pod was created');
    recordResult(this, { verified: 1, lost: 0 });
  });

  it('with fit_runs_to_budget gives the run a max_cost_usd that fits, says so, and arms it on the pod', async function () {
    const l: Lab = await lab({
      targetExtra: budget('max_usd_per_day = 0.5\nfit_runs_to_budget = true'),
    });
    const run = runIdHolder();
    const result = await l.track(train(l.deps, l.config, l.workspace, { onRun: run.onRun }));
    assert.equal(result.run.state, 'succeeded', result.summary);
    // What is left ($0.50) less the watchdog's last tick and delete (91 s) at $0.69/h ($0.0174):
    // $0.48.
    assert.equal(l.podJson(run.id!).max_cost_usd, 0.48);
    const fitted = l.warnings().filter((w) => w.code === 'budget_fitted');
    assert.equal(fitted.length, 1);
    assert.match(fitted[0]!.message, /fit_runs_to_budget gives this run max_cost_usd = \$0\.48/);
    assert.ok(
      l.logs().some((line) => /max_cost_usd armed/.test(line)),
      'the cap was armed on the pod',
    );
    recordResult(this, { verified: 1, lost: 0 });
  });

  it('two trains started at the same moment never count the same dollars: one starts with what is left as its cap, the other is refused', async function () {
    // Each run's worst case is $0.72 against $1.00 left: the first to read the spend gets a cap
    // of $1.00 and holds it; the other then finds $0.00 left.
    const l: Lab = await lab({ targetExtra: budget('max_usd_per_day = 1') });
    const outcomes = await Promise.allSettled([
      l.track(train(l.deps, l.config, l.workspace)),
      l.track(train(l.otherDeps(), l.config, l.workspace)),
    ]);
    const started = outcomes.filter((o) => o.status === 'fulfilled');
    const refused = outcomes.filter((o) => o.status === 'rejected');
    assert.equal(
      started.length,
      1,
      `one run started: ${outcomes.map((o) => (o.status === 'fulfilled' ? o.value.summary : String(o.reason))).join(' | ')}`,
    );
    assert.equal(started[0]!.value.run.state, 'succeeded', started[0]!.value.summary);
    assert.equal(refused.length, 1);
    const error: unknown = refused[0]!.reason;
    assert.ok(error instanceof BudgetError, String(error));
    assert.match(error.message, /\$0\.00 today \(UTC\)/);
    assert.equal(l.emulator.ledger().totals.podsCreated, 1, 'one pod was created');
    assert.equal(l.podJson(started[0]!.value.run.id).max_cost_usd, 1);
    recordResult(this, { verified: 1, lost: 0 });
  });

  it('a run that fits gets what is left as its cost cap on the pod (min of max_cost_usd and what is left)', async function () {
    const l: Lab = await lab({
      maxHours: 0.5,
      targetExtra: `max_cost_usd = 5\n${budget('max_usd_per_day = 2')}`,
    });
    const run = runIdHolder();
    const result = await l.track(train(l.deps, l.config, l.workspace, { onRun: run.onRun }));
    assert.equal(result.run.state, 'succeeded', result.summary);
    assert.equal(l.podJson(run.id!).max_cost_usd, 2);
    recordResult(this, { verified: 1, lost: 0 });
  });
});
