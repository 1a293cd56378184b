/**
 * The sweep page's model, free of `vscode`: from a sweep's record (sweep.json) and each trial's
 * metrics as they came home (its run's metrics.jsonl), the best value so far over the trials, the
 * value against each parameter, every trial's intermediate curve of the objective (where a pruned
 * trial was cut) and the budget (spent, committed, left). ./sweepPageHtml.ts draws it.
 */
import {
  bestTrial,
  metricValue,
  sweepMoney,
  type SweepRecord,
  type TrialRecord,
} from '../../core/flow';
import type { TrainMetric } from '../../core/events';

export interface Point {
  x: number;
  y: number;
}

/** One parameter's chart: each trial with a value, at its param (a choice's index for a category). */
export interface ParamChart {
  param: string;
  /** A choice's values in their order (x is the index); null: x is the value itself. */
  categories: string[] | null;
  /** Log-scaled when every value is above 0 and they span more than two decades. */
  log: boolean;
  points: (Point & { trial: number })[];
}

export interface TrialCurve {
  trial: number;
  state: TrialRecord['state'];
  /** The objective's values by step, as the job wrote them. */
  points: Point[];
}

export interface SweepPageModel {
  name: string;
  metric: string;
  direction: SweepRecord['direction'];
  /** `running`, or `ended (<how>)`, and the record's message. */
  status: string;
  trials: { total: number; max: number; byState: Record<TrialRecord['state'], number> };
  best: { trial: number; value: number; params: TrialRecord['params'] } | null;
  budget: { budgetUsd: number; spentUsd: number; committedUsd: number; leftUsd: number };
  /** After each complete trial (in trial order), the best value so far. */
  bestSoFar: Point[];
  byParam: ParamChart[];
  curves: TrialCurve[];
}

/** A trial's metric lines as they came home (its run's metrics.jsonl), or none. */
export type TrialMetrics = (runId: string) => readonly TrainMetric[];

/** The objective's values of one trial's metric lines, by step. */
export function curveOf(metric: string, lines: readonly TrainMetric[]): Point[] {
  const points: Point[] = [];
  for (const line of lines) {
    const y = metricValue(line, metric);
    if (y !== null) points.push({ x: line.step, y });
  }
  return points;
}

export function sweepPageModel(record: SweepRecord, metricsOf: TrialMetrics): SweepPageModel {
  const { spentUsd, committedUsd } = sweepMoney(record);
  const best = bestTrial(record);
  const byState: Record<TrialRecord['state'], number> = {
    starting: 0,
    running: 0,
    complete: 0,
    pruned: 0,
    fail: 0,
  };
  for (const t of record.trials) byState[t.state]++;
  const ordered = [...record.trials].sort((a, b) => a.number - b.number);
  const better = (a: number, b: number): boolean =>
    record.direction === 'minimize' ? a < b : a > b;
  const bestSoFar: Point[] = [];
  let so: number | null = null;
  for (const t of ordered) {
    if (t.state !== 'complete' || t.objective === null) continue;
    if (so === null || better(t.objective, so)) so = t.objective;
    bestSoFar.push({ x: t.number, y: so });
  }
  const ended = record.state === 'ended' ? `ended (${record.end ?? '?'})` : 'running';
  return {
    name: record.name,
    metric: record.metric,
    direction: record.direction,
    status: record.message ? `${ended}: ${record.message}` : ended,
    trials: { total: record.trials.length, max: record.trials_max, byState },
    best:
      best === null || best.objective === null
        ? null
        : { trial: best.number, value: best.objective, params: best.params },
    budget: {
      budgetUsd: record.budget_usd,
      spentUsd,
      committedUsd,
      leftUsd: Math.max(0, record.budget_usd - spentUsd - committedUsd),
    },
    bestSoFar,
    byParam: paramCharts(ordered),
    curves: ordered
      .filter((t) => t.run_id !== null)
      .map((t) => ({
        trial: t.number,
        state: t.state,
        points: curveOf(record.metric, metricsOf(t.run_id!)),
      })),
  };
}

/** Each parameter against the trials' values (complete and pruned trials with a value). */
function paramCharts(trials: readonly TrialRecord[]): ParamChart[] {
  const valued = trials.filter((t) => t.objective !== null);
  const names = [...new Set(trials.flatMap((t) => Object.keys(t.params)))].sort();
  return names.map((param) => {
    const values = valued.map((t) => t.params[param]).filter((v) => v !== undefined);
    const numeric = values.every((v) => typeof v === 'number');
    const categories = numeric ? null : [...new Set(values.map(String))];
    const points = valued
      .filter((t) => t.params[param] !== undefined)
      .map((t) => {
        const v = t.params[param]!;
        const x = categories === null ? (v as number) : categories.indexOf(String(v));
        return { x, y: t.objective!, trial: t.number };
      });
    const xs = points.map((p) => p.x);
    const log =
      categories === null &&
      xs.length > 1 &&
      xs.every((x) => x > 0) &&
      Math.max(...xs) / Math.min(...xs) > 100;
    return { param, categories, log, points };
  });
}
