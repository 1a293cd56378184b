/**
 * The Sweeps view's rows from sweep.json records: a sweep's state, trials against its limit, its
 * best value and its spend against its budget; each trial's number, state, value and spend (a
 * running trial's cap while it runs); the events that refresh the view.
 */
import assert from 'node:assert/strict';
import type { SweepRecord } from '../../src/core/flow';
import { notificationFor } from '../../src/ui/runs/notifyModel';
import { refreshesSweeps, sweepEndNotice, sweepRow } from '../../src/ui/sweeps/sweepsModel';

const record: SweepRecord = {
  version: 1,
  name: 'lr-rank',
  metric: 'eval_loss',
  direction: 'minimize',
  trials_max: 24,
  parallel: 2,
  budget_usd: 15,
  created: '2026-12-07T00:00:00.000Z',
  state: 'running',
  end: null,
  message: null,
  trials: [
    {
      number: 0,
      params: { learning_rate: 0.001, lora_r: 8 },
      run_id: 'tiny_1',
      state: 'complete',
      objective: 0.25,
      cap_usd: 0.52,
      cost_usd: 0.1,
      message: null,
    },
    {
      number: 1,
      params: { learning_rate: 0.01, lora_r: 32 },
      run_id: 'tiny_2',
      state: 'pruned',
      objective: 0.9,
      cap_usd: 0.52,
      cost_usd: 0.05,
      message: null,
    },
    {
      number: 2,
      params: { learning_rate: 0.0001, lora_r: 16 },
      run_id: 'tiny_3',
      state: 'running',
      objective: null,
      cap_usd: 0.52,
      cost_usd: null,
      message: null,
    },
  ],
};

describe('ui: the Sweeps view', () => {
  it('a sweep row: state, trials, best value, spent of its budget; its trials under it', () => {
    const row = sweepRow(record);
    assert.equal(row.label, 'lr-rank');
    assert.equal(row.state, 'running');
    assert.equal(row.description, 'running · 3/24 trials · best eval_loss 0.25 · $0.15 of $15.00');
    assert.match(row.tooltip, /spent \$0\.15, committed \$0\.52, left \$14\.33/);
    assert.match(row.tooltip, /best: trial 0, \{"learning_rate":0\.001,"lora_r":8\}/);
    assert.deepEqual(
      row.trials.map((t) => [t.label, t.description, t.runId]),
      [
        ['#0 COMPLETE', 'eval_loss 0.25 · $0.10', 'tiny_1'],
        ['#1 PRUNED', 'eval_loss 0.9 · $0.05', 'tiny_2'],
        ['#2 RUNNING', 'eval_loss - · up to $0.52', 'tiny_3'],
      ],
    );
    const ended = sweepRow({
      ...record,
      state: 'ended',
      end: 'stopped',
      message: 'stopped on request',
    });
    assert.match(ended.description, /^ended \(stopped\) · /);
    assert.match(ended.tooltip, /stopped on request$/);
  });

  it("refreshes on a run's state and on the sweep's own lines only", () => {
    assert.ok(refreshesSweeps({ type: 'runState', runId: 'tiny_1', state: 'running' } as never));
    assert.ok(
      refreshesSweeps({ type: 'log', level: 'info', message: 'sweep lr-rank: trial 3 starts' }),
    );
    assert.ok(!refreshesSweeps({ type: 'log', level: 'info', message: 'Runpod GET /pods' }));
    assert.ok(
      refreshesSweeps({
        type: 'warning',
        runId: null,
        code: 'sweep_budget',
        message: 'sweep x: …',
      }),
    );
  });

  it("a sweep's end is a notification: a warning when its budget stopped it, with the best trial", () => {
    const ended = (end: SweepRecord['end'], message: string): SweepRecord => ({
      ...record,
      state: 'ended',
      end,
      message,
      trials: record.trials.filter((t) => t.state !== 'running'),
    });
    assert.deepEqual(sweepEndNotice(ended('trials', 'all 24 trials ran')), {
      severity: 'info',
      message:
        'Overbrainer: sweep lr-rank ended: all 24 trials ran; best eval_loss 0.25 (trial 0, {"learning_rate":0.001,"lora_r":8}); spent $0.15 of $15.00',
    });
    const budget = sweepEndNotice(ended('budget', "the budget's $0.10 left cannot hold another"));
    assert.equal(budget?.severity, 'warning');
    assert.match(
      budget?.message ?? '',
      /^Overbrainer: sweep lr-rank stopped at its budget: the budget's/,
    );
    assert.equal(sweepEndNotice({ ...record, trials: [] }), null, 'a running sweep: none');
    const none = sweepEndNotice({ ...ended('stopped', 'stopped on request'), trials: [] });
    assert.equal(
      none?.message,
      'Overbrainer: sweep lr-rank ended: stopped on request; no trial completed; spent $0.00 of $15.00',
    );
  });

  it("the budget's stop, as it happens, is a warning notification", () => {
    const n = notificationFor({
      type: 'warning',
      runId: null,
      code: 'sweep_budget',
      message: "sweep lr-rank: the budget's $0.10 left cannot hold another trial's worst case",
    });
    assert.equal(n?.severity, 'warning');
    assert.match(n?.message ?? '', /^sweep lr-rank: the budget's/);
  });
});
