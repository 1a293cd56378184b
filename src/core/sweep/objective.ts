/**
 * A trial's objective: the values of the sweep's `metric`, any numeric key the job writes on its
 * metrics stream (`loss`, `eval_loss`, or its own: `accuracy`, `bleu`). Each value is an
 * intermediate value of the trial at its step (what Optuna's pruner judges); the last one is the
 * trial's result. A trial that never writes the key fails, saying so.
 */
import type { TrainMetric } from '../events';

/** The protocol's own keys, as {@link TrainMetric} holds them under their camelCase names. */
const KNOWN: Readonly<Record<string, keyof TrainMetric>> = {
  loss: 'loss',
  eval_loss: 'evalLoss',
  learning_rate: 'learningRate',
  grad_norm: 'gradNorm',
  epoch: 'epoch',
};

/** The value of `key` (as the job writes it) in one metric line; null when the line has none. */
export function metricValue(metric: TrainMetric, key: string): number | null {
  const known = Object.hasOwn(KNOWN, key) ? KNOWN[key] : undefined;
  const value =
    known !== undefined
      ? metric[known]
      : metric.values !== undefined && Object.hasOwn(metric.values, key)
        ? metric.values[key]
        : null;
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** The intermediate values of one trial, by step, as they arrive. */
export class Objective {
  private readonly byStep = new Map<number, number>();
  private lastStep = -1;

  constructor(readonly key: string) {}

  /** Takes one metric line; returns the (step, value) it adds, or null when it adds none. */
  take(metric: TrainMetric): { step: number; value: number } | null {
    const value = metricValue(metric, this.key);
    if (value === null) return null;
    this.byStep.set(metric.step, value);
    if (metric.step >= this.lastStep) this.lastStep = metric.step;
    return { step: metric.step, value };
  }

  /** The trial's result: the value at its last step with one; null when it never wrote the key. */
  final(): number | null {
    return this.lastStep < 0 ? null : (this.byStep.get(this.lastStep) ?? null);
  }

  /** How many values it holds. */
  get count(): number {
    return this.byStep.size;
  }
}

/** Why a trial whose job never wrote its objective failed. */
export function noObjectiveMessage(key: string): string {
  return `the job never wrote "${key}" on its metrics stream (metrics.jsonl): the sweep's objective has no value for this trial`;
}
