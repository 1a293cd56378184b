/**
 * The CLI's metric line: `step 12/40 (30%), epoch 0.50, loss 1.2346,
 * lr 2.00e-4`, throttled to one line per 10 s except evaluations, which are
 * always shown.
 */
import type { Clock } from '../clock';
import type { TrainMetric } from '../events';

/** One line per this long at most, evaluations aside. */
export const METRIC_LINE_INTERVAL_MS = 10_000;

/** Rust's `{:.2e}`: `2.00e-4`, `1.00e3` (no `+`, no zero padding). */
export function formatExp2(value: number): string {
  return value.toExponential(2).replace('e+', 'e');
}

export function renderMetric(metric: TrainMetric): string {
  const parts: string[] = [];
  const max = metric.maxSteps;
  if (max !== null && max !== undefined && max > 0) {
    const percent = Math.floor((metric.step * 100) / max);
    parts.push(`step ${metric.step}/${max} (${percent}%)`);
  } else {
    parts.push(`step ${metric.step}`);
  }
  if (metric.epoch !== null && metric.epoch !== undefined)
    parts.push(`epoch ${metric.epoch.toFixed(2)}`);
  if (metric.loss !== null && metric.loss !== undefined)
    parts.push(`loss ${metric.loss.toFixed(4)}`);
  if (metric.evalLoss !== null && metric.evalLoss !== undefined) {
    parts.push(`eval_loss ${metric.evalLoss.toFixed(4)}`);
  }
  if (metric.learningRate !== null && metric.learningRate !== undefined) {
    parts.push(`lr ${formatExp2(metric.learningRate)}`);
  }
  return parts.join(', ');
}

/**
 * Decides which metrics get a line: the first, each evaluation, and then one
 * per {@link METRIC_LINE_INTERVAL_MS}. `flush` gives the latest line held back,
 * so the last step is shown when the job ends.
 */
export class MetricLineThrottle {
  private lastShownMs: number | null = null;
  private held: TrainMetric | null = null;

  constructor(
    private readonly clock: Clock,
    private readonly intervalMs = METRIC_LINE_INTERVAL_MS,
  ) {}

  /** The line to print for `metric` now, or null when it is held back. */
  line(metric: TrainMetric): string | null {
    const now = this.clock.nowMs();
    const isEval = metric.evalLoss !== null && metric.evalLoss !== undefined;
    if (isEval || this.lastShownMs === null || now - this.lastShownMs >= this.intervalMs) {
      this.lastShownMs = now;
      this.held = null;
      return renderMetric(metric);
    }
    this.held = metric;
    return null;
  }

  /** The latest held-back line, once. */
  flush(): string | null {
    const held = this.held;
    this.held = null;
    return held === null ? null : renderMetric(held);
  }
}
