import assert from 'node:assert/strict';
import { FakeClock } from '../helpers/fakeClock';
import type { TrainMetric } from '../../src/core/events';
import { jobOutcome, PLUGIN_NOT_LOADED } from '../../src/core/train/outcome';
import { formatExp2, MetricLineThrottle, renderMetric } from '../../src/core/train/render';

describe('jobOutcome', () => {
  const id = 'proj_20260929-120000';

  it('Exited(0) with at least one metric: succeeded', () => {
    assert.deepEqual(jobOutcome({ kind: 'exited', code: 0 }, 1, id), {
      state: 'succeeded',
      message: null,
    });
  });

  it('Exited(0) without metrics: failed, plugin not loaded, saying what to do', () => {
    const outcome = jobOutcome({ kind: 'exited', code: 0 }, 0, id);
    assert.equal(outcome?.state, 'failed');
    assert.ok(outcome?.message?.startsWith(`${PLUGIN_NOT_LOADED}: `));
    assert.match(outcome?.message ?? '', /overbrainer_metrics\.OverbrainerMetricsPlugin/);
    assert.match(outcome?.message ?? '', /OverbrainerMetricsCallback/);
    assert.match(outcome?.message ?? '', new RegExp(`runs/${id}/job\\.log`));
  });

  it('Exited(n): failed with the code and where the log is', () => {
    assert.deepEqual(jobOutcome({ kind: 'exited', code: 3 }, 12, id), {
      state: 'failed',
      message: `exited with code 3 (see runs/${id}/job.log)`,
    });
  });

  it('Cancelled: cancelled; Lost: failed without an exit code; running: none yet', () => {
    assert.deepEqual(jobOutcome({ kind: 'cancelled' }, 0, id), {
      state: 'cancelled',
      message: null,
    });
    assert.deepEqual(jobOutcome({ kind: 'lost' }, 5, id), {
      state: 'failed',
      message: 'stopped without an exit code',
    });
    assert.equal(jobOutcome({ kind: 'running' }, 5, id), null);
  });
});

function metric(extra: Partial<TrainMetric>): TrainMetric {
  return {
    time: 0,
    step: 12,
    epoch: 0.5,
    maxSteps: 40,
    loss: 1.23456,
    learningRate: 0.0002,
    ...extra,
  };
}

describe('renderMetric', () => {
  it('renders the CLI metric line', () => {
    assert.equal(renderMetric(metric({})), 'step 12/40 (30%), epoch 0.50, loss 1.2346, lr 2.00e-4');
  });

  it('leaves out what is unknown and shows evaluations', () => {
    assert.equal(
      renderMetric({ time: 0, step: 7, maxSteps: null, loss: null, evalLoss: 0.98765 }),
      'step 7, eval_loss 0.9877',
    );
    assert.equal(
      renderMetric(metric({ step: 13, maxSteps: 40 })).slice(0, 17),
      'step 13/40 (32%),',
    );
  });

  it('formats like Rust {:.2e}', () => {
    assert.equal(formatExp2(0.0002), '2.00e-4');
    assert.equal(formatExp2(1000), '1.00e3');
    assert.equal(formatExp2(1.5e-10), '1.50e-10');
  });
});

describe('MetricLineThrottle', () => {
  it('shows the first line, then one per 10 s, evaluations always, and flushes the last held', async () => {
    const clock = new FakeClock();
    const throttle = new MetricLineThrottle(clock);
    assert.ok(throttle.line(metric({ step: 1 })));
    await clock.advanceMs(5_000);
    assert.equal(throttle.line(metric({ step: 2 })), null);
    assert.match(throttle.line(metric({ step: 2, loss: null, evalLoss: 1 })) ?? '', /eval_loss/);
    await clock.advanceMs(4_999);
    assert.equal(throttle.line(metric({ step: 3 })), null);
    await clock.advanceMs(5_001);
    assert.match(throttle.line(metric({ step: 4 })) ?? '', /^step 4\/40/);
    await clock.advanceMs(1_000);
    assert.equal(throttle.line(metric({ step: 5 })), null);
    assert.match(throttle.flush() ?? '', /^step 5\/40/);
    assert.equal(throttle.flush(), null);
  });
});
