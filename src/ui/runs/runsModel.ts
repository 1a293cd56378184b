import { systemClock, type Clock } from '../../core/clock';
import type { Disposable } from '../../core/disposable';
import type { RunState, TrainMetric } from '../../core/events';
import type { PodState } from '../../core/runs/podRecord';
import { podSpendUsd } from '../../core/runs/spend';
import type { RunAttempt, RunSnapshot } from '../../core/runs/runRecord';
import { Pace } from '../../core/train/pace';
import { Emitter } from '../emitter';
import { LazyList } from '../lazyList';

/**
 * The Runs view's model: what the tree shows, free of the `vscode` module so it is unit-tested in
 * plain Node. The provider (runsTree.ts) only maps `presentRun()` / `presentRunChild()` to
 * TreeItems. The loader (runsSource.ts) reads `runs/<id>/run.json` and `pod.json` through the
 * core's record codecs, leniently: a damaged record becomes an item saying what is wrong.
 */

/** The pod states of `pod.json`, snake_case as stored. */
export type PodRecordState = PodState;

export { RUN_STATES } from '../../core/runs/runRecord';

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
  /** Pods of this run found by marker and not deleted by it (pod.json `stray_pods`). */
  strayPodIds: readonly string[];
  /** When the current pod was created (for the spend so far); absent in older summaries. */
  createdUnixS?: number | null;
  /** When its billing began: its create call's sending (ms); absent in older records. */
  billedFromMs?: number | null;
  /** Who removed the pod, once deleted. */
  deletedBy?: string | null;
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
  /** What to do about `problem` (the core's hint). */
  problemHint?: string | null;
  /** Which record `problem` is about: a damaged pod.json leaves the run's state readable. */
  problemFile?: 'run.json' | 'pod.json' | null;
  /** The snapshot the run saved (a stopped run's, or one kept by a run that failed after it). */
  snapshot?: RunSnapshot | null;
  /** The run this one resumed from. */
  resumedFrom?: string | null;
  /** The pods the run went through when one died mid-job (run.json `attempts`). */
  attempts?: RunAttempt[];
}

/** Whether Resume Run applies: an ended run with a snapshot. */
export function resumable(run: RunSummary): boolean {
  return (
    run.snapshot !== null &&
    run.snapshot !== undefined &&
    (run.state === 'stopped' || run.state === 'failed' || run.state === 'cancelled')
  );
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

const ICONS: Record<RunDisplayState, RowIcon> = {
  preparing: { iconId: 'loading~spin', colorId: 'charts.yellow', label: 'preparing' },
  running: { iconId: 'play-circle', colorId: 'charts.blue', label: 'running' },
  awaiting: AWAITING_ICON,
  kept: { iconId: 'pinned', colorId: 'charts.purple', label: 'pod kept' },
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

/** True while the pod may exist and bill: the rate matters more than a spend estimate. */
export function podMayBill(pod: PodSummary): boolean {
  return pod.state !== 'deleted';
}

export function podStateLabel(state: PodRecordState): string {
  return state === 'awaiting_retrieval' ? 'awaiting retrieval' : state;
}

/** What this window knows live of a followed run (from its metric events), for the description. */
export interface RunLive {
  /** Time the job still needs from now at its current pace; null while unknown. */
  etaMs: number | null;
  step: number | null;
  maxSteps: number | null;
  loss: number | null;
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

/** Newest first: by creation time, then by id (ids embed their creation time). */
export function compareRunsNewestFirst(a: RunSummary, b: RunSummary): number {
  const ac = a.createdUnixS ?? -Infinity;
  const bc = b.createdUnixS ?? -Infinity;
  if (ac !== bc) return bc - ac;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/** How often at most a followed run's row is redrawn for its metrics. */
export const LIVE_REDRAW_MS = 1_000;

interface LiveRun {
  pace: Pace;
  lastMetricMs: number;
  step: number | null;
  maxSteps: number | null;
  loss: number | null;
  redrawPending: boolean;
}

/**
 * The runs, newest first, loaded lazily from the given loader (runsSource.ts). It also keeps the
 * pace of the runs whose metrics this window sees (`noteMetric`, wired to the core's events), so
 * a running run's row shows its ETA; such a row is redrawn at most once per LIVE_REDRAW_MS.
 */
export class RunsModel extends LazyList<RunSummary> {
  private readonly liveRuns = new Map<string, LiveRun>();
  private readonly runChanged = new Emitter<RunSummary>();
  private readonly abort = new AbortController();
  private readonly clock: Clock;
  /** Fires with a run whose live data (ETA, step) changed: only its row needs redrawing. */
  readonly onDidChangeRun = this.runChanged.event;

  constructor(loader: () => Promise<readonly RunSummary[]>, options: { clock?: Clock } = {}) {
    super(async () => [...(await loader())].sort(compareRunsNewestFirst));
    this.clock = options.clock ?? systemClock;
  }

  find(dir: string): RunSummary | undefined {
    return this.all.find((run) => run.dir === dir);
  }

  findById(runId: string): RunSummary | undefined {
    return this.all.find((run) => run.id === runId);
  }

  /** Takes a metric of run `runId` into its pace (the core's `metric` event). */
  noteMetric(runId: string, metric: TrainMetric): void {
    let live = this.liveRuns.get(runId);
    if (live === undefined) {
      live = {
        pace: new Pace(),
        lastMetricMs: 0,
        step: null,
        maxSteps: null,
        loss: null,
        redrawPending: false,
      };
      this.liveRuns.set(runId, live);
    }
    live.pace.add(metric);
    live.lastMetricMs = this.clock.nowMs();
    live.step = metric.step;
    if (metric.maxSteps !== null && metric.maxSteps !== undefined) live.maxSteps = metric.maxSteps;
    if (metric.loss !== null && metric.loss !== undefined) live.loss = metric.loss;
    if (live.redrawPending) return;
    live.redrawPending = true;
    const entry = live;
    this.clock.sleep(LIVE_REDRAW_MS, this.abort.signal).then(
      () => {
        entry.redrawPending = false;
        const run = this.findById(runId);
        if (run !== undefined) this.runChanged.fire(run);
      },
      () => undefined, // disposed
    );
  }

  /** Forgets the live data of a run (it ended, or this window stopped following it). */
  forgetLive(runId: string): void {
    this.liveRuns.delete(runId);
  }

  /** What this window saw live of the run; null when it saw no metric of it. */
  live(runId: string): RunLive | null {
    const live = this.liveRuns.get(runId);
    if (live === undefined) return null;
    const paceEtaMs = live.pace.eta();
    const sinceMs = Math.max(0, this.clock.nowMs() - live.lastMetricMs);
    return {
      etaMs: paceEtaMs === null ? null : Math.max(0, paceEtaMs - sinceMs),
      step: live.step,
      maxSteps: live.maxSteps,
      loss: live.loss,
    };
  }

  /** Follows the core's events: metrics feed the pace; a run's end forgets it. */
  observe(events: {
    on(listener: (event: import('../../core/events').CoreEvent) => void): Disposable;
  }): Disposable {
    return events.on((event) => {
      if (event.type === 'metric') this.noteMetric(event.runId, event.metric);
      if (event.type === 'runState' && event.state !== 'running' && event.state !== 'preparing') {
        this.forgetLive(event.runId);
      }
    });
  }

  override dispose(): void {
    this.abort.abort();
    this.runChanged.dispose();
    super.dispose();
  }
}

// ------------------------------------------------------------------ children (on expand)

/** The metrics summary of a run: the last training log of `<run dir>/metrics.jsonl`. */
export interface MetricsSummary {
  step: number | null;
  maxSteps: number | null;
  epoch: number | null;
  /** The last training loss (logs without one, e.g. evaluations, keep the previous). */
  loss: number | null;
  evalLoss: number | null;
  learningRate: number | null;
  /** The trainer wrote its `end` line. */
  ended: boolean;
  /** Lines skipped as malformed within what was read. */
  skippedLines: number;
  /** Only the file's tail was read (it is larger than the bound). */
  partial: boolean;
}

interface ChildBase {
  /** The run's directory, as commands read it (`dir`/`runDir` of a tree item). */
  runDir: string;
  run: RunSummary;
}

/** A child row of a run, read when the run is expanded. */
export type RunChild =
  | (ChildBase & { kind: 'pod' })
  | (ChildBase & { kind: 'metrics'; metrics: MetricsSummary })
  | (ChildBase & { kind: 'file'; path: string; name: string; isDir: boolean })
  | (ChildBase & { kind: 'more'; parent: string; count: number })
  | (ChildBase & { kind: 'attempt'; attempt: RunAttempt; index: number })
  | (ChildBase & { kind: 'problem'; text: string; hint: string | null; path: string | null });

export type RunsNode = RunSummary | RunChild;

export function isRunChild(node: RunsNode): node is RunChild {
  return 'kind' in node && 'runDir' in node;
}
