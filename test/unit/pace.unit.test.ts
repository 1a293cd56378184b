import assert from 'node:assert/strict';
import type { TrainMetric } from '../../src/core/events';
import { Pace, projectSpendUsd, spendUsd } from '../../src/core/train/pace';

function metric(time: number, step: number, extra: Partial<TrainMetric> = {}): TrainMetric {
  return {
    time,
    step,
    epoch: null,
    maxSteps: 7300,
    loss: 1.0,
    evalLoss: null,
    learningRate: null,
    gradNorm: null,
    ...extra,
  };
}

/** A slow pace: 1 step per 10 s at step 100 of 7300. */
function slowPace(): Pace {
  const pace = new Pace();
  for (const [time, step] of [
    [0.0, 90],
    [100.0, 100],
  ] as const) {
    pace.add(metric(time, step));
  }
  return pace;
}

describe('Pace', () => {
  it('slow_pace: 1 step per 10 s at step 100 of 7300 leaves 20.0 hours', () => {
    const eta = slowPace().eta();
    assert.equal(eta, 72_000_000);
    assert.equal(((eta ?? 0) / 3_600_000).toFixed(1), '20.0');
    assert.equal(slowPace().rateStepsPerS(), 0.1);
  });

  it('adds the work the job does after its last step (after_s: a LoRA merge), even at max_steps', () => {
    const pace = slowPace();
    pace.add(metric(110, 101, { afterS: 300 }));
    assert.equal(pace.eta(), (7199 / (11 / 110) + 300) * 1000);
    pace.add(metric(7300 * 10, 7300, { afterS: 300 }));
    assert.equal(pace.eta(), 300_000);
  });

  it('has no ETA without a pace (Pace::default)', () => {
    assert.equal(new Pace().eta(), null);
  });

  it('has no ETA from a single point, or two points at the same step or time', () => {
    const one = new Pace();
    one.add(metric(0, 90));
    assert.equal(one.eta(), null);
    const sameStep = new Pace();
    sameStep.add(metric(0, 90));
    sameStep.add(metric(10, 90));
    assert.equal(sameStep.eta(), null);
    const sameTime = new Pace();
    sameTime.add(metric(5, 90));
    sameTime.add(metric(5, 95));
    assert.equal(sameTime.eta(), null);
  });

  it('has no ETA without max_steps', () => {
    const pace = new Pace();
    pace.add(metric(0, 90, { maxSteps: null }));
    pace.add(metric(100, 100, { maxSteps: undefined }));
    assert.equal(pace.rateStepsPerS(), 0.1);
    assert.equal(pace.eta(), null);
  });

  it('counts only logs with a loss (evaluations and summaries are not steps of the pace)', () => {
    const pace = new Pace();
    pace.add(metric(0, 90, { loss: null, evalLoss: 2 }));
    pace.add(metric(50, 95, { loss: undefined }));
    pace.add(metric(60, 90));
    pace.add(metric(160, 100));
    // First counted point is (60, 90), not (0, 90).
    assert.equal(pace.eta(), 72_000_000);
  });

  it('measures from the first to the latest point, not between the last two', () => {
    const pace = new Pace();
    pace.add(metric(0, 0));
    pace.add(metric(10, 100)); // fast start
    pace.add(metric(1000, 200)); // then slow
    // 200 steps in 1000 s = 0.2 step/s; 7100 left = 35,500 s.
    assert.equal(pace.eta(), 35_500_000);
  });

  it('counts from the latest log: ETA 0 once max_steps is reached or passed', () => {
    const pace = new Pace();
    pace.add(metric(0, 7000));
    pace.add(metric(100, 7400));
    assert.equal(pace.eta(), 0);
  });

  it('uses the latest max_steps given', () => {
    const pace = new Pace();
    pace.add(metric(0, 0, { maxSteps: 100 }));
    pace.add(metric(10, 10, { maxSteps: 200 }));
    assert.equal(pace.eta(), 190_000);
    assert.deepEqual(pace.progress(), { step: 10, maxSteps: 200 });
  });

  it('starts measuring again when the steps go backwards (a restarted trainer)', () => {
    const pace = new Pace();
    pace.add(metric(0, 500));
    pace.add(metric(100, 600));
    pace.add(metric(200, 10));
    assert.equal(pace.eta(), null);
    pace.add(metric(300, 20));
    assert.equal(pace.rateStepsPerS(), 0.1);
  });
});

describe('spend', () => {
  it('spendUsd: rate times hours', () => {
    assert.equal(spendUsd(0.64, 3_600_000), 0.64);
    assert.equal(spendUsd(1.2, 30 * 60_000), 0.6);
    assert.equal(spendUsd(1, -5), 0);
    assert.throws(() => spendUsd(Number.NaN, 1), RangeError);
    assert.throws(() => spendUsd(-1, 1), RangeError);
  });

  it('projectSpendUsd: spent so far plus the rest at the ETA', () => {
    const eta = slowPace().eta();
    const projection = projectSpendUsd(0.5, 2 * 3_600_000, eta);
    assert.equal(projection.spentUsd, 1);
    assert.equal(projection.projectedUsd, 11);
    assert.deepEqual(projectSpendUsd(0.5, 3_600_000, null), { spentUsd: 0.5, projectedUsd: null });
  });
});
