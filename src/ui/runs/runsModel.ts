import { systemClock, type Clock } from '../../core/clock';
import type { Disposable } from '../../core/disposable';
import type { RunState, TrainMetric } from '../../core/events';
export { RUN_STATES } from '../../core/flow/records';
import {
  type ClusterNode,
  type PodState,
  type RunAttempt,
  type RunCluster,
  type RunSnapshot,
  Pace,
} from '../../core/flow/records';
import { Emitter } from '../emitter';
import { LazyList } from '../lazyList';

/**
 * The Runs view's model: what the tree shows, free of the `vscode` module so it is unit-tested in
 * plain Node. The provider (runsTree.ts) only maps `presentRun()` (runsView.ts) and the children to
 * TreeItems. The loader (runsSource.ts) reads `runs/<id>/run.json` and `pod.json` through the
 * core's record codecs, leniently: a damaged record becomes an item saying what is wrong.
 */

/** The pod states of `pod.json`, snake_case as stored. */
export type PodRecordState = PodState;

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
  /** The run's Instant Cluster (run.json `cluster`): its nodes are rows under the run. */
  cluster?: RunCluster | null;
}

/**
 * Whether a command on the run calls Runpod (so needs the API key): a run on a pod, or on a
 * cluster (it has no pod.json; its cluster is in run.json).
 */
export function onRunpod(run: RunSummary): boolean {
  return run.pod !== null || (run.cluster ?? null) !== null;
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

/** True while the pod may exist and bill: the rate matters more than a spend estimate. */
export function podMayBill(pod: PodSummary): boolean {
  return pod.state !== 'deleted';
}

/** What this window knows live of a followed run (from its metric events), for the description. */
export interface RunLive {
  /** Time the job still needs from now at its current pace; null while unknown. */
  etaMs: number | null;
  step: number | null;
  maxSteps: number | null;
  loss: number | null;
}

/** Newest first: by creation time, then by id (ids embed their creation time). */
export function compareRunsNewestFirst(a: RunSummary, b: RunSummary): number {
  const ac = a.createdUnixS ?? -Infinity;
  const bc = b.createdUnixS ?? -Infinity;
  if (ac !== bc) return bc - ac;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/** The newest runs of a listing and how many runs it holds in all (readNewestRuns). */
export interface NewestRuns {
  runs: RunSummary[];
  total: number;
}

/**
 * How many runs the Runs view lists at its top level, newest first; the older ones are under one
 * row (OlderRuns) that lists them when expanded. VS Code takes every row of a level from the
 * extension host before it shows the first one (80–116 ms for 1,000 rows, docs/BENCHMARKS.md),
 * and the first of those rows need only the newest records: a year of sweeps (10,000 runs) shows
 * as fast as a week's. Its price: the view's type-to-find sees the older runs once that row is
 * expanded.
 */
export const TOP_LEVEL_RUNS = 100;

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

  private readonly readNewest: ((count: number) => Promise<NewestRuns>) | null;
  private newestRead: { count: number; promise: Promise<NewestRuns> } | null = null;

  constructor(
    loader: () => Promise<readonly RunSummary[]>,
    options: {
      clock?: Clock;
      /** Reads the newest runs alone, before the whole list (readNewestRuns). */
      newest?: (count: number) => Promise<NewestRuns>;
    } = {},
  ) {
    super(async () => [...(await loader())].sort(compareRunsNewestFirst));
    this.clock = options.clock ?? systemClock;
    this.readNewest = options.newest ?? null;
    // Once a load has ended, the newest runs come from its list (or are read again after a failure).
    this.onDidSettle(() => (this.newestRead = null));
  }

  /**
   * The newest `count` runs and how many there are: from the list when it is loaded, else read
   * alone (one read shared by the callers meanwhile), without waiting for the whole list.
   */
  async newest(count: number): Promise<NewestRuns> {
    if (!this.isLoaded && this.readNewest !== null) {
      if (this.newestRead === null || this.newestRead.count < count) {
        const promise = this.readNewest(count);
        this.newestRead = { count, promise };
        promise.catch(() => {
          if (this.newestRead?.promise === promise) this.newestRead = null;
        });
      }
      const read = await this.newestRead.promise;
      // The whole list may have been loaded meanwhile: it wins, being the fuller read.
      if (!this.isLoaded) return { runs: read.runs.slice(0, count), total: read.total };
    }
    const all = this.isLoaded ? this.all : await this.latest();
    return { runs: all.slice(0, count), total: all.length };
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
  | (ChildBase & { kind: 'node'; node: ClusterNode; clusterId: string })
  | (ChildBase & { kind: 'problem'; text: string; hint: string | null; path: string | null });

/** The Runs view's last top-level row: the runs older than its first TOP_LEVEL_RUNS. */
export interface OlderRuns {
  kind: 'older';
  /** How many (as the listing that made the row counted them). */
  count: number;
}

export type RunsNode = RunSummary | RunChild | OlderRuns;

export function isRunChild(node: RunsNode): node is RunChild {
  return 'kind' in node && 'runDir' in node;
}

/** The Runs view's top level: the first TOP_LEVEL_RUNS of `runs`, then a row for the rest. */
export function topLevelNodes(runs: readonly RunSummary[], total: number): RunsNode[] {
  const top: RunsNode[] = runs.slice(0, TOP_LEVEL_RUNS);
  if (total > top.length) top.push({ kind: 'older', count: total - top.length });
  return top;
}

export function isOlderRuns(node: RunsNode): node is OlderRuns {
  return 'kind' in node && node.kind === 'older';
}
