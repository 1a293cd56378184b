import { podSpendUsd } from '../../core/flow/spend';
import {
  displayState,
  podMayBill,
  resumable,
  TOP_LEVEL_RUNS,
  type PodRecordState,
  type PodSummary,
  type OlderRuns,
  type RunDisplayState,
  type RunLive,
  type RunSummary,
} from './runsModel';

/**
 * How the Runs view shows a run, free of `vscode`: its row (icon and colour by display state,
 * what it cost, how long it has left, its ETA when followed) and its Markdown tooltip, and the
 * figures (durations, dollars, losses) the other views and pages format the same way.
 */

/**
 * A tree row without the vscode types, as the models' `present*` functions build it: ids of
 * codicons and theme colours.
 */
export interface ItemView {
  id: string;
  label: string;
  description: string;
  /** Markdown. */
  tooltip: string;
  /** A codicon id, e.g. `pass`, `loading~spin`. */
  iconId: string;
  /** A theme colour id, e.g. `testing.iconPassed`. */
  colorId: string;
  /** `run.<display state>`, `pod.<role>`…: package.json menus key on it. */
  contextValue: string;
  /** What a click runs, if anything (message rows: the next action). */
  command?: { id: string; title: string } | null;
}

/** A run's row. */
export type RunItemView = ItemView;

/** A row's icon, its colour and the word for its state. */
export interface RowIcon {
  iconId: string;
  colorId: string;
  label: string;
}

/** A run, or a pod, whose results wait to be brought home (the Runs and the Pods views). */
export const AWAITING_ICON: RowIcon = {
  iconId: 'cloud-download',
  colorId: 'list.warningForeground',
  label: 'awaiting retrieval',
};

/** A pod kept past its job (`--keep-pod`): one pin in the Pods view and on its run's row. */
export const KEPT_ICON: RowIcon = { iconId: 'pinned', colorId: 'charts.purple', label: 'kept' };

const ICONS: Record<RunDisplayState, RowIcon> = {
  preparing: { iconId: 'loading~spin', colorId: 'charts.yellow', label: 'preparing' },
  running: { iconId: 'play-circle', colorId: 'charts.blue', label: 'running' },
  awaiting: AWAITING_ICON,
  kept: { ...KEPT_ICON, label: 'pod kept' },
  succeeded: { iconId: 'pass', colorId: 'testing.iconPassed', label: 'succeeded' },
  failed: { iconId: 'error', colorId: 'testing.iconFailed', label: 'failed' },
  cancelled: { iconId: 'circle-slash', colorId: 'descriptionForeground', label: 'cancelled' },
  stopped: { iconId: 'debug-stop', colorId: 'charts.orange', label: 'stopped' },
  unreadable: { iconId: 'bracket-error', colorId: 'list.errorForeground', label: 'unreadable' },
};

/** The icon of a run whose pod.json is damaged: the run's state is known, its pod is not. */
const DAMAGED_POD_ICON = ICONS.unreadable;

/** `3h 05m`, `12m`, `45s`: a duration for the description line. */
export function formatDurationS(totalS: number): string {
  const s = Math.max(0, Math.floor(totalS));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h > 0) return `${h}h ${String(m).padStart(2, '0')}m`;
  if (m > 0) return `${m}m`;
  return `${s}s`;
}

export function formatUsd(amountUsd: number): string {
  return `$${amountUsd.toFixed(2)}`;
}

export function podStateLabel(state: PodRecordState): string {
  return state === 'awaiting_retrieval' ? 'awaiting retrieval' : state;
}

/**
 * Maps a run to the tree's row. `nowUnixS` comes from the caller's clock, so the time left is
 * testable; `live` is what the model saw of the run's metrics (the ETA).
 */
export function presentRun(run: RunSummary, nowUnixS: number, live?: RunLive | null): RunItemView {
  const state = displayState(run);
  let { iconId, colorId } = ICONS[state];
  const stateLabel = ICONS[state].label;
  const parts: string[] = [];
  if (state === 'unreadable') {
    parts.push(run.problem ?? 'run.json unreadable');
  } else {
    if (run.problem !== null) {
      // The run's state is known but its pod record is not: say so first, with an error colour.
      ({ iconId, colorId } = DAMAGED_POD_ICON);
      parts.push(run.problem);
    }
    parts.push(stateLabel);
    if (run.target !== null) parts.push(run.target);
    const pod = run.pod;
    if (pod !== null) {
      if (podMayBill(pod)) {
        if (state !== 'kept' && state !== 'awaiting') parts.push(`pod ${podStateLabel(pod.state)}`);
        if (pod.costPerHourUsd !== null) parts.push(`${formatUsd(pod.costPerHourUsd)}/h`);
        const rate = pod.costPerHourUsd;
        if (rate !== null && pod.createdUnixS !== null && pod.createdUnixS !== undefined) {
          const soFar = (rate * Math.max(0, nowUnixS - pod.createdUnixS)) / 3600;
          const eta = state === 'running' ? (live?.etaMs ?? null) : null;
          parts.push(`${formatUsd(soFar)} so far`);
          if (eta !== null)
            parts.push(`about ${formatUsd(soFar + (rate * eta) / 3_600_000)} at the ETA`);
        }
        if (pod.deadlineUnixS !== null) {
          const leftS = pod.deadlineUnixS - nowUnixS;
          parts.push(leftS > 0 ? `${formatDurationS(leftS)} left` : 'deadline passed');
        }
      } else if (pod.estimatedSpendUsd !== null) {
        parts.push(`about ${formatUsd(pod.estimatedSpendUsd)}`);
      }
    }
    if (state === 'running' && live?.etaMs !== null && live?.etaMs !== undefined) {
      parts.push(`ETA ${formatDurationS(live.etaMs / 1000)}`);
    }
  }
  return {
    id: run.dir,
    label: run.id,
    description: parts.join(' · '),
    tooltip: runTooltip(run, state, nowUnixS, live ?? null),
    iconId,
    colorId,
    // `.snapshot`: Resume Run applies (package.json menus key on it).
    contextValue: `run.${state}${resumable(run) ? '.snapshot' : ''}`,
  };
}

/**
 * `9,900`: a count with thousands separators, as `toLocaleString('en')` writes it, without ICU:
 * the extension host's first call into Intl loads its number formats, 23 ms here (85 ms in a
 * profile of a loaded machine), and the "older runs" row was that first call, on the path of
 * the Runs view's first answer.
 */
export function groupThousands(count: number): string {
  return String(Math.trunc(count)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** The row under which the runs older than the top level's are listed. */
export function presentOlderRuns(older: OlderRuns): ItemView {
  const runs = older.count === 1 ? 'run' : 'runs';
  return {
    id: 'runs#older',
    label: `${groupThousands(older.count)} older ${runs}`,
    description: `before the newest ${TOP_LEVEL_RUNS}`,
    tooltip: `The ${runs} created before the newest ${TOP_LEVEL_RUNS}, newest first: expand to list them (the view's filter finds them once listed).`,
    iconId: 'history',
    colorId: 'descriptionForeground',
    contextValue: 'runs.older',
  };
}

/** Escapes text for a MarkdownString so run ids or messages cannot inject links or markup. */
export function escapeMarkdown(text: string): string {
  return text.replace(/[\\`*_{}[\]()#+\-.!|<>~]/g, (c) => `\\${c}`);
}

function runTooltip(
  run: RunSummary,
  state: RunDisplayState,
  nowUnixS: number,
  live: RunLive | null,
): string {
  const lines = [`**${escapeMarkdown(run.id)}** — ${escapeMarkdown(ICONS[state].label)}`];
  const row = (name: string, value: string | null | undefined): void => {
    if (value !== null && value !== undefined && value !== '') {
      lines.push(`${name}: ${escapeMarkdown(value)}`);
    }
  };
  row('Problem', run.problem);
  row('Next', run.problemHint);
  row('Target', run.target);
  if (run.createdUnixS !== null) row('Created', new Date(run.createdUnixS * 1000).toISOString());
  row('Message', run.message);
  if (run.snapshot) {
    row(
      'Snapshot',
      `step ${run.snapshot.step} (${run.snapshot.reason}), ${run.snapshot.checkpoint}${resumable(run) ? ': Resume Run continues from it' : ''}`,
    );
  }
  row('Resumed from', run.resumedFrom);
  const pod = run.pod;
  if (pod !== null) {
    row(
      'Pod',
      pod.podId === null ? podStateLabel(pod.state) : `${pod.podId} (${podStateLabel(pod.state)})`,
    );
    row('GPU', pod.gpuType);
    if (pod.costPerHourUsd !== null) row('Rate', `${formatUsd(pod.costPerHourUsd)}/h`);
    const spentUsd = spendSoFarUsd(pod, nowUnixS);
    if (spentUsd !== null) row('Spent so far', `about ${formatUsd(spentUsd)}`);
    if (pod.deadlineUnixS !== null) {
      const leftS = pod.deadlineUnixS - nowUnixS;
      row(
        'Deadline',
        `${new Date(pod.deadlineUnixS * 1000).toISOString()} (${leftS > 0 ? `${formatDurationS(leftS)} left` : 'passed'})`,
      );
    } else if (pod.keep && podMayBill(pod)) {
      row('Deadline', 'none: the pod is kept; only Remove Pod deletes it');
    }
    if (pod.estimatedSpendUsd !== null) row('Estimated spend', formatUsd(pod.estimatedSpendUsd));
    row('Deleted by', pod.deletedBy);
    if (pod.strayPodIds.length > 0) row('Stray pods', pod.strayPodIds.join(', '));
  }
  if (live !== null && state === 'running') {
    if (live.step !== null) {
      row('Step', live.maxSteps === null ? `${live.step}` : `${live.step} / ${live.maxSteps}`);
    }
    if (live.loss !== null) row('Loss', formatLoss(live.loss));
    if (live.etaMs !== null) row('ETA', formatDurationS(live.etaMs / 1000));
  }
  row('Folder', run.dir);
  // Two trailing spaces: a Markdown line break, so each detail gets its own line.
  return lines.join('  \n');
}

/** The spend so far while the pod may bill, by the pod record's rule; null when unknown. */
export function spendSoFarUsd(pod: PodSummary, nowUnixS: number): number | null {
  return podMayBill(pod) ? podSpendUsd(pod, nowUnixS * 1000) : null;
}

/** A loss as the tree shows it: four significant digits. */
export function formatLoss(loss: number): string {
  return Number.isFinite(loss) ? String(Number(loss.toPrecision(4))) : String(loss);
}
