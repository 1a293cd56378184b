/**
 * The sweep page from a sweep's record and its trials' metrics: the best value so far over the
 * trials, the value against each parameter (a choice's values as categories, a wide range on a
 * log scale), each trial's intermediate curve of the objective, the budget; drawn as inline SVG
 * in a page that runs no script and escapes what the records say.
 */
import assert from 'node:assert/strict';
import type { TrainMetric } from '../../src/core/events';
import type { SweepRecord, TrialRecord } from '../../src/core/flow';
import { renderSweepPage } from '../../src/ui/sweeps/sweepPageHtml';
import { sweepPageModel } from '../../src/ui/sweeps/sweepPageModel';

const trial = (
  number: number,
  state: TrialRecord['state'],
  objective: number | null,
  params: TrialRecord['params'],
  cost: number | null = 0.1,
): TrialRecord => ({
  number,
  params,
  run_id: `run_${number}`,
  state,
  objective,
  cap_usd: 0.5,
  cost_usd: cost,
  message: null,
});

const record: SweepRecord = {
  version: 1,
  name: 'lr-<rank>',
  metric: 'eval_loss',
  direction: 'minimize',
  trials_max: 8,
  parallel: 2,
  budget_usd: 2,
  created: '2026-12-07T00:00:00.000Z',
  state: 'running',
  end: null,
  message: null,
  trials: [
    trial(0, 'complete', 0.5, { learning_rate: 1e-5, lora_r: 8, opt: 'adam' }),
    trial(1, 'complete', 0.7, { learning_rate: 1e-3, lora_r: 32, opt: 'sgd' }),
    trial(2, 'pruned', 0.9, { learning_rate: 1e-2, lora_r: 8, opt: 'adam' }),
    trial(3, 'complete', 0.3, { learning_rate: 1e-4, lora_r: 16, opt: 'sgd' }),
    trial(4, 'running', null, { learning_rate: 1e-4, lora_r: 4, opt: 'adam' }, null),
  ],
};

/** Each run's metric lines: an eval_loss every 5 steps, a plain loss between. */
function metrics(runId: string): TrainMetric[] {
  const n = Number(runId.split('_')[1]);
  const lines: TrainMetric[] = [];
  for (let step = 1; step <= (n === 2 ? 10 : 20); step++) {
    lines.push({
      time: step,
      step,
      loss: 1 / step,
      ...(step % 5 === 0 ? { evalLoss: n + 1 / step } : {}),
    });
  }
  return lines;
}

describe('ui: the sweep page', () => {
  it('the model: best so far by trial, each parameter against the value, every curve, the budget', () => {
    const m = sweepPageModel(record, metrics);
    assert.deepEqual(m.bestSoFar, [
      { x: 0, y: 0.5 },
      { x: 1, y: 0.5 },
      { x: 3, y: 0.3 },
    ]);
    assert.deepEqual(m.best, { trial: 3, value: 0.3, params: record.trials[3]!.params });
    assert.deepEqual(m.trials.byState, {
      starting: 0,
      running: 1,
      complete: 3,
      pruned: 1,
      fail: 0,
    });
    assert.deepEqual(m.budget, { budgetUsd: 2, spentUsd: 0.4, committedUsd: 0.5, leftUsd: 1.1 });
    const [lr, r, opt] = m.byParam;
    assert.deepEqual([lr!.param, lr!.log, lr!.categories], ['learning_rate', true, null]);
    // The running trial has no value: not on the parameter charts.
    assert.deepEqual(
      lr!.points.map((p) => p.trial),
      [0, 1, 2, 3],
    );
    assert.deepEqual([r!.param, r!.log], ['lora_r', false]);
    assert.deepEqual(opt!.categories, ['adam', 'sgd']);
    assert.deepEqual(
      opt!.points.map((p) => p.x),
      [0, 1, 0, 1],
    );
    // Each trial's eval_loss by step: the pruned one stops at step 10.
    assert.deepEqual(
      m.curves.map((c) => [c.trial, c.state, c.points.length]),
      [
        [0, 'complete', 4],
        [1, 'complete', 4],
        [2, 'pruned', 2],
        [3, 'complete', 4],
        [4, 'running', 4],
      ],
    );
    assert.deepEqual(m.curves[2]!.points, [
      { x: 5, y: 2.2 },
      { x: 10, y: 2.1 },
    ]);
    const max = sweepPageModel({ ...record, direction: 'maximize' }, metrics);
    assert.deepEqual(
      max.bestSoFar.map((p) => p.y),
      [0.5, 0.7, 0.7],
    );
  });

  it('the page: inline SVG charts, no script, what the records say escaped; an empty sweep says so', () => {
    const html = renderSweepPage(sweepPageModel(record, metrics));
    assert.match(html, /content="default-src 'none'; style-src 'unsafe-inline';"/);
    assert.doesNotMatch(html, /<script/i);
    assert.match(html, /<h1>Sweep lr-&lt;rank&gt;<\/h1>/);
    assert.match(html, /Budget \$2\.00: spent \$0\.40, committed \$0\.50 .*left \$1\.10/);
    assert.match(html, /Best eval_loss so far \(minimize\), by trial/);
    assert.match(html, /eval_loss against learning_rate \(log scale\)/);
    assert.match(
      html,
      /eval_loss against opt<\/figcaption>[\s\S]*?>adam<\/text>[\s\S]*?>sgd<\/text>/,
    );
    assert.equal((html.match(/class="line curve pruned"/g) ?? []).length, 1);
    assert.equal(
      (html.match(/class="dot best"/g) ?? []).length,
      3,
      'the best trial on each parameter chart',
    );
    assert.match(html, /Best: trial 3, eval_loss 0\.3/);
    const none = renderSweepPage(sweepPageModel({ ...record, trials: [] }, metrics));
    assert.match(none, /No trial has completed yet\./);
    assert.match(none, /No trial has reported a value yet\./);
  });
});
