/**
 * The Sweeps view's rows, as pure data (no vscode): each sweep of runs/sweeps/ (its state, trials
 * against its limit, its best value, what it spent against its budget), and under it each trial
 * (its number, state, value, spend, run). Money from the records only: spent is what ended trials
 * cost, committed what running trials' caps hold back.
 */
import { bestTrial, sweepMoney, type SweepRecord, type TrialRecord } from '../../core/flow';
import type { CoreEvent } from '../../core/events';
import { formatUsd as usd } from '../runs/runsView';

export interface SweepRowView {
  kind: 'sweep';
  id: string;
  name: string;
  label: string;
  description: string;
  tooltip: string;
  /** `running` (Stop and Attach apply) or `ended`. */
  state: SweepRecord['state'];
  /** The tree item's context value (the manifest's menus key on it). */
  contextValue: 'sweepRunning' | 'sweepEnded';
  trials: TrialRowView[];
}

export interface TrialRowView {
  kind: 'trial';
  id: string;
  sweep: string;
  label: string;
  description: string;
  tooltip: string;
  state: TrialRecord['state'];
  runId: string | null;
}

export type SweepsNode = SweepRowView | TrialRowView;

const value = (v: number | null): string => (v === null ? '-' : String(Number(v.toPrecision(6))));

export function sweepRow(record: SweepRecord): SweepRowView {
  const { spentUsd, committedUsd } = sweepMoney(record);
  const best = bestTrial(record);
  const state = record.state === 'ended' ? `ended (${record.end ?? '?'})` : 'running';
  return {
    kind: 'sweep',
    id: `sweep-${record.name}`,
    name: record.name,
    label: record.name,
    description: `${state} · ${record.trials.length}/${record.trials_max} trials · best ${record.metric} ${value(best?.objective ?? null)} · ${usd(spentUsd)} of ${usd(record.budget_usd)}`,
    tooltip: [
      `${record.direction} ${record.metric}; ${record.parallel} at once`,
      `budget ${usd(record.budget_usd)}: spent ${usd(spentUsd)}, committed ${usd(committedUsd)}, left ${usd(Math.max(0, record.budget_usd - spentUsd - committedUsd))}`,
      best === null
        ? 'best: none yet'
        : `best: trial ${best.number}, ${JSON.stringify(best.params)}`,
      ...(record.message ? [record.message] : []),
    ].join('\n'),
    state: record.state,
    contextValue: record.state === 'running' ? 'sweepRunning' : 'sweepEnded',
    trials: record.trials.map((t) => trialRow(record, t)),
  };
}

function trialRow(record: SweepRecord, t: TrialRecord): TrialRowView {
  return {
    kind: 'trial',
    id: `sweep-${record.name}-trial-${t.number}`,
    sweep: record.name,
    label: `#${t.number} ${t.state.toUpperCase()}`,
    description: `${record.metric} ${value(t.objective)} · ${t.cost_usd === null ? `up to ${usd(t.cap_usd)}` : usd(t.cost_usd)}`,
    tooltip: [
      JSON.stringify(t.params),
      `run ${t.run_id ?? '-'}`,
      ...(t.message ? [t.message] : []),
    ].join('\n'),
    state: t.state,
    runId: t.run_id,
  };
}

/** Whether `event` may change what the view shows (a trial's run, or the sweep's own words). */
export function refreshesSweeps(event: CoreEvent): boolean {
  return (
    event.type === 'runState' ||
    (event.type === 'log' && event.message.startsWith('sweep ')) ||
    (event.type === 'warning' && event.code === 'sweep_budget')
  );
}

/**
 * The notification of a sweep's end (null while it runs): how it ended, its best trial and what
 * it spent; a warning when its budget stopped it (trials were left that it could not pay for).
 */
export function sweepEndNotice(
  record: SweepRecord,
): { severity: 'info' | 'warning'; message: string } | null {
  if (record.state !== 'ended') return null;
  const best = bestTrial(record);
  const { spentUsd } = sweepMoney(record);
  const how = record.end === 'budget' ? 'stopped at its budget' : 'ended';
  const bestWords =
    best === null
      ? 'no trial completed'
      : `best ${record.metric} ${value(best.objective)} (trial ${best.number}, ${JSON.stringify(best.params)})`;
  return {
    severity: record.end === 'budget' ? 'warning' : 'info',
    message: `Overbrainer: sweep ${record.name} ${how}: ${record.message ?? record.end ?? ''}; ${bestWords}; spent ${usd(spentUsd)} of ${usd(record.budget_usd)}`,
  };
}
