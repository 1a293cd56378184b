import type { RunState } from '../core/events';
import { LazyList } from './lazyList';

/**
 * The Runs view's model: what the tree shows, free of the `vscode` module so it is unit-tested in
 * plain Node. The provider (runsTree.ts) only maps `presentRun()` to TreeItems. Today the loader
 * reads `runs/<id>/run.json` and `pod.json` from disk (runsSource.ts); the core's run store can
 * feed the same model later without the view changing.
 */

/** The pod states of `pod.json` (spec §1.5), snake_case as stored. */
export type PodRecordState =
  | 'creating'
  | 'provisioning'
  | 'ready'
  | 'running'
  | 'awaiting_retrieval'
  | 'kept'
  | 'deleting'
  | 'deleted';

export const POD_RECORD_STATES: readonly PodRecordState[] = [
  'creating',
  'provisioning',
  'ready',
  'running',
  'awaiting_retrieval',
  'kept',
  'deleting',
  'deleted',
];

export const RUN_STATES: readonly RunState[] = [
  'preparing',
  'running',
  'succeeded',
  'failed',
  'cancelled',
  'stopped',
];

/** What a run's pod record says, as far as the tree needs it. */
export interface PodSummary {
  podId: string | null;
  state: PodRecordState;
  gpuType: string | null;
  costPerHourUsd: number | null;
  /** Null when the pod is kept (kept pods have no deadline). */
  deadlineUnixS: number | null;
  estimatedSpendUsd: number | null;
  keep: boolean;
  /** Pods of this run found by marker and not deleted by it (spec: `stray_pods`). */
  strayPodIds: readonly string[];
}

/** One run directory as the tree sees it. */
export interface RunSummary {
  id: string;
  /** Absolute path of `runs/<id>/`. */
  dir: string;
  /** The workspace folder's name, shown when several folders hold runs. */
  workspaceName: string;
  target: string | null;
  createdUnixS: number | null;
  /** Null when run.json could not be read (see `problem`). */
  state: RunState | null;
  message: string | null;
  pod: PodSummary | null;
  /** Why the record could not be read (position only, never the file's content). */
  problem: string | null;
}

/**
 * What the user sees of a run: the run state, refined by the pod's. A kept pod or one awaiting
 * retrieval needs the user's action, so it wins over the run's own state.
 */
export type RunDisplayState =
  | 'preparing'
  | 'running'
  | 'awaiting'
  | 'kept'
  | 'succeeded'
  | 'failed'
  | 'cancelled'
  | 'stopped'
  | 'unreadable';

export function displayState(run: RunSummary): RunDisplayState {
  if (run.state === null) return 'unreadable';
  if (run.pod?.state === 'kept') return 'kept';
  if (run.pod?.state === 'awaiting_retrieval') return 'awaiting';
  return run.state;
}

/** A TreeItem's content without the vscode types: ids of codicons and theme colours. */
export interface RunItemView {
  id: string;
  label: string;
  description: string;
  /** Markdown. */
  tooltip: string;
  /** A codicon id, e.g. `pass`, `loading~spin`. */
  iconId: string;
  /** A theme colour id, e.g. `testing.iconPassed`. */
  colorId: string;
  /** `run.<display state>`: package.json menus key on it. */
  contextValue: string;
}

const ICONS: Record<RunDisplayState, { iconId: string; colorId: string; label: string }> = {
  preparing: { iconId: 'loading~spin', colorId: 'charts.yellow', label: 'preparing' },
  running: { iconId: 'play-circle', colorId: 'charts.blue', label: 'running' },
  awaiting: {
    iconId: 'cloud-download',
    colorId: 'list.warningForeground',
    label: 'awaiting retrieval',
  },
  kept: { iconId: 'pinned', colorId: 'charts.purple', label: 'pod kept' },
  succeeded: { iconId: 'pass', colorId: 'testing.iconPassed', label: 'succeeded' },
  failed: { iconId: 'error', colorId: 'testing.iconFailed', label: 'failed' },
  cancelled: { iconId: 'circle-slash', colorId: 'descriptionForeground', label: 'cancelled' },
  stopped: { iconId: 'debug-stop', colorId: 'charts.orange', label: 'stopped' },
  unreadable: {
    iconId: 'warning',
    colorId: 'problemsWarningIcon.foreground',
    label: 'unreadable',
  },
};

export function stateIcon(state: RunDisplayState): { iconId: string; colorId: string } {
  const { iconId, colorId } = ICONS[state];
  return { iconId, colorId };
}

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

/** True while the pod may exist and bill: the rate matters more than a spend estimate. */
function podMayBill(pod: PodSummary): boolean {
  return pod.state !== 'deleted';
}

function podStateLabel(state: PodRecordState): string {
  return state === 'awaiting_retrieval' ? 'awaiting retrieval' : state;
}

/**
 * Maps a run to the tree's row. `nowUnixS` comes from the caller's clock, so the time left is
 * testable.
 */
export function presentRun(run: RunSummary, nowUnixS: number): RunItemView {
  const state = displayState(run);
  const { iconId, colorId, label: stateLabel } = ICONS[state];
  const parts: string[] = [];
  if (state === 'unreadable') {
    parts.push(run.problem ?? 'run.json unreadable');
  } else {
    parts.push(stateLabel);
    if (run.target !== null) parts.push(run.target);
    const pod = run.pod;
    if (pod !== null) {
      if (podMayBill(pod)) {
        if (state !== 'kept' && state !== 'awaiting') parts.push(`pod ${podStateLabel(pod.state)}`);
        if (pod.costPerHourUsd !== null) parts.push(`${formatUsd(pod.costPerHourUsd)}/h`);
        if (pod.deadlineUnixS !== null) {
          const leftS = pod.deadlineUnixS - nowUnixS;
          parts.push(leftS > 0 ? `${formatDurationS(leftS)} left` : 'deadline passed');
        }
      } else if (pod.estimatedSpendUsd !== null) {
        parts.push(`about ${formatUsd(pod.estimatedSpendUsd)}`);
      }
    }
  }
  return {
    id: run.dir,
    label: run.id,
    description: parts.join(' · '),
    tooltip: runTooltip(run, state),
    iconId,
    colorId,
    contextValue: `run.${state}`,
  };
}

/** Escapes text for a MarkdownString so run ids or messages cannot inject links or markup. */
export function escapeMarkdown(text: string): string {
  return text.replace(/[\\`*_{}[\]()#+\-.!|<>~]/g, (c) => `\\${c}`);
}

function runTooltip(run: RunSummary, state: RunDisplayState): string {
  const lines = [`**${escapeMarkdown(run.id)}** — ${escapeMarkdown(ICONS[state].label)}`];
  const row = (name: string, value: string | null | undefined): void => {
    if (value !== null && value !== undefined && value !== '') {
      lines.push(`${name}: ${escapeMarkdown(value)}`);
    }
  };
  row('Problem', run.problem);
  row('Target', run.target);
  if (run.createdUnixS !== null) row('Created', new Date(run.createdUnixS * 1000).toISOString());
  row('Message', run.message);
  const pod = run.pod;
  if (pod !== null) {
    row(
      'Pod',
      pod.podId === null ? podStateLabel(pod.state) : `${pod.podId} (${podStateLabel(pod.state)})`,
    );
    row('GPU', pod.gpuType);
    if (pod.costPerHourUsd !== null) row('Rate', `${formatUsd(pod.costPerHourUsd)}/h`);
    if (pod.deadlineUnixS !== null)
      row('Deadline', new Date(pod.deadlineUnixS * 1000).toISOString());
    if (pod.estimatedSpendUsd !== null) row('Estimated spend', formatUsd(pod.estimatedSpendUsd));
    if (pod.strayPodIds.length > 0) row('Stray pods', pod.strayPodIds.join(', '));
  }
  row('Folder', run.dir);
  // Two trailing spaces: a Markdown line break, so each detail gets its own line.
  return lines.join('  \n');
}

/** Newest first: by creation time, then by id (ids embed their creation time). */
export function compareRunsNewestFirst(a: RunSummary, b: RunSummary): number {
  const ac = a.createdUnixS ?? -Infinity;
  const bc = b.createdUnixS ?? -Infinity;
  if (ac !== bc) return bc - ac;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/** The runs, newest first, loaded lazily from the given loader (disk today, the run store later). */
export class RunsModel extends LazyList<RunSummary> {
  constructor(loader: () => Promise<readonly RunSummary[]>) {
    super(async () => [...(await loader())].sort(compareRunsNewestFirst));
  }

  find(dir: string): RunSummary | undefined {
    return this.all.find((run) => run.dir === dir);
  }
}
