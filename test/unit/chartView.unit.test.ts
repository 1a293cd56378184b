/**
 * The run page chart's reading of a run (media/chartView.ts): TensorBoard's debiased EMA, the raw
 * line beside the smoothed one, the log scale's refusal of values ≤ 0, x by step or by wall time,
 * appends that continue the smoothing where the series left it, and the prefs' checks.
 */
import assert from 'node:assert/strict';
import { Ema, elapsedLabel, RunTransform, smooth } from '../../media/chartView';
import {
  DEFAULT_CHART_PREFS,
  parseChartPrefs,
  parsePageMessage,
  type SeriesColumns,
} from '../../src/ui/panel/webviewProtocol';

function columns(losses: (number | null)[], times?: (number | null)[]): SeriesColumns {
  return {
    step: losses.map((_, i) => i + 1),
    loss: losses,
    evalLoss: losses.map(() => null),
    learningRate: losses.map(() => 1e-4),
    ...(times === undefined ? {} : { time: times }),
  };
}

describe('the chart: smoothing, log scale and x (media/chartView.ts)', () => {
  it('smooths as TensorBoard does: debiased, so the curve starts at the first value', () => {
    const out = smooth([2, 4, 4, 4], 0.6);
    assert.equal(out[0], 2);
    // last = 0.6·0.8 + 0.4·4 = 2.08, debiased by 1 − 0.36: 3.25
    assert.ok(Math.abs((out[1] as number) - 3.25) < 1e-12, String(out[1]));
    assert.ok((out[3] as number) > (out[2] as number) && (out[3] as number) < 4);
    assert.deepEqual(smooth([1, 5, 2], 0), [1, 5, 2], 'no smoothing: the raw values');
    const ema = new Ema(0.9);
    assert.equal(ema.push(null), null, 'a missing value keeps the state');
    assert.equal(ema.push(3), 3);
  });

  it('draws the raw loss faint beside the smoothed one; without smoothing, one line', () => {
    const rows = new RunTransform({ ...DEFAULT_CHART_PREFS, smoothing: 0.5 }).rows(
      columns([4, 2, null, 2]),
    );
    assert.deepEqual(rows.x, [1, 2, 3, 4]);
    assert.deepEqual(rows.raw, [4, 2, null, 2]);
    assert.equal(rows.smoothed[0], 4);
    assert.equal(rows.smoothed[2], null);
    const plain = new RunTransform({ ...DEFAULT_CHART_PREFS, smoothing: 0 }).rows(columns([4, 2]));
    assert.deepEqual(plain.raw, [null, null]);
    assert.deepEqual(plain.smoothed, [4, 2]);
  });

  it('appends continue the smoothing; a repeated step (its eval loss filled in) adds nothing', () => {
    const whole = new RunTransform(DEFAULT_CHART_PREFS).rows(columns([3, 2.5, 2, 1.8]));
    const t = new RunTransform(DEFAULT_CHART_PREFS);
    const first = t.rows(columns([3, 2.5]));
    // The host resends the last point it sent (it may have been filled in), then the new ones.
    const next = t.rows({
      step: [2, 3, 4],
      loss: [2.5, 2, 1.8],
      evalLoss: [2.7, null, null],
      learningRate: [1e-4, 1e-4, 1e-4],
    });
    assert.deepEqual(next.x, [2, 3, 4]);
    assert.equal(next.smoothed[0], null, 'the repeated step keeps its smoothed value');
    assert.equal(next.evalLoss[0], 2.7, 'its eval loss fills in');
    assert.deepEqual([...first.smoothed, ...next.smoothed.slice(1)], whole.smoothed);
  });

  it('on a log scale, a loss of 0 or less is no point', () => {
    const rows = new RunTransform({ ...DEFAULT_CHART_PREFS, logLoss: true, smoothing: 0 }).rows(
      columns([1, 0, -1, 0.5]),
    );
    assert.deepEqual(rows.smoothed, [1, null, null, 0.5]);
  });

  it('x by wall time: seconds since the first point, never going back', () => {
    const t = new RunTransform({ ...DEFAULT_CHART_PREFS, x: 'time' });
    const rows = t.rows(columns([3, 2, 1, 1], [1_000.5, 1_010.5, 1_009, null]));
    assert.deepEqual(rows.x, [0, 10, 10, 10]);
    const more = t.rows({
      step: [5],
      loss: [0.9],
      evalLoss: [null],
      learningRate: [null],
      time: [1_070.5],
    });
    assert.deepEqual(more.x, [70]);
    assert.equal(elapsedLabel(70), '1m 10s');
    assert.equal(elapsedLabel(3_900), '1h 05m');
    assert.equal(elapsedLabel(45), '45s');
    assert.equal(elapsedLabel(120), '2m');
  });

  it("the prefs: each field checked, a bad one its default; the page's message parsed", () => {
    assert.deepEqual(parseChartPrefs(undefined), DEFAULT_CHART_PREFS);
    assert.deepEqual(parseChartPrefs({ smoothing: 5, logLoss: 'yes', x: 'epoch' }), {
      smoothing: 0.99,
      logLoss: false,
      x: 'step',
    });
    assert.deepEqual(parseChartPrefs({ smoothing: 0.333, logLoss: true, x: 'time' }), {
      smoothing: 0.33,
      logLoss: true,
      x: 'time',
    });
    assert.deepEqual(
      parsePageMessage({ type: 'chartPrefs', prefs: { smoothing: 0.9, logLoss: true, x: 'time' } }),
      { type: 'chartPrefs', prefs: { smoothing: 0.9, logLoss: true, x: 'time' } },
    );
    assert.equal(parsePageMessage({ type: 'chartPrefs', prefs: 'x' }), null);
  });
});
