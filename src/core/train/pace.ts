/**
 * The job's pace and ETA: only training logs (those with
 * a `loss`) count; the first and the latest (step, time) give a rate in steps
 * per second of the trainer's own clock, and the ETA is the steps left at that
 * rate. There is no ETA until two distinct points are known, nor without
 * `max_steps`. The ETA counts from the latest log, not from "now".
 */
import type { TrainMetric } from '../events';

interface Point {
  step: number;
  /** Trainer clock, seconds. */
  time: number;
}

export class Pace {
  private first: Point | null = null;
  private latest: Point | null = null;
  private maxSteps: number | null = null;
  /** Seconds of work after the last step (a LoRA merge), as the latest log said. */
  private afterS = 0;

  /** Takes a metric into account; lines without a loss (evaluations, summaries) are ignored. */
  add(metric: TrainMetric): void {
    if (metric.loss === null || metric.loss === undefined) return;
    const point = { step: metric.step, time: metric.time };
    // A step going backwards means the trainer started over (a resumed run
    // rewriting its steps): measure from there, not across the restart.
    if (this.first === null || (this.latest !== null && point.step < this.latest.step)) {
      this.first = point;
    }
    this.latest = point;
    if (metric.maxSteps !== null && metric.maxSteps !== undefined) this.maxSteps = metric.maxSteps;
    if (metric.afterS !== null && metric.afterS !== undefined) this.afterS = metric.afterS;
  }

  /** Steps per second, once two distinct points are known. */
  rateStepsPerS(): number | null {
    if (this.first === null || this.latest === null) return null;
    const steps = this.latest.step - this.first.step;
    const seconds = this.latest.time - this.first.time;
    if (!(steps > 0) || !(seconds > 0)) return null;
    return steps / seconds;
  }

  /**
   * Milliseconds until `max_steps` at the current rate, plus the work the job said follows its
   * last step (`after_s`: a LoRA merge), from the latest log; null while unknown.
   */
  eta(): number | null {
    const rate = this.rateStepsPerS();
    if (rate === null || this.maxSteps === null || this.latest === null) return null;
    const left = Math.max(0, this.maxSteps - this.latest.step);
    return (left / rate + this.afterS) * 1000;
  }

  /** The latest counted step and the total, for progress displays. */
  progress(): { step: number; maxSteps: number | null } | null {
    return this.latest === null ? null : { step: this.latest.step, maxSteps: this.maxSteps };
  }
}

const HOUR_MS = 3_600_000;

/** What a pod billed at `costPerHourUsd` has cost after `elapsedMs`. */
export function spendUsd(costPerHourUsd: number, elapsedMs: number): number {
  if (!Number.isFinite(costPerHourUsd) || costPerHourUsd < 0) {
    throw new RangeError(`cost per hour must be a non-negative number, got ${costPerHourUsd}`);
  }
  return (costPerHourUsd * Math.max(0, elapsedMs)) / HOUR_MS;
}

export interface SpendProjection {
  /** Spent so far. */
  spentUsd: number;
  /** Spent by the time the job ends at its current pace; null while the ETA is unknown. */
  projectedUsd: number | null;
}

/**
 * The UI's cost meter: spend so far after `elapsedMs` of billing, and the
 * projected spend once the job ends `etaMs` from now (the pod is billed until
 * then; retrieval time is not included).
 */
export function projectSpendUsd(
  costPerHourUsd: number,
  elapsedMs: number,
  etaMs: number | null,
): SpendProjection {
  const spentUsd = spendUsd(costPerHourUsd, elapsedMs);
  const projectedUsd =
    etaMs === null || !Number.isFinite(etaMs)
      ? null
      : spentUsd + spendUsd(costPerHourUsd, Math.max(0, etaMs));
  return { spentUsd, projectedUsd };
}
