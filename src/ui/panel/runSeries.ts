import type { Clock } from '../../core/clock';
import type { TrainMetric } from '../../core/events';
import { gpuLine, overrun, Pace, projectSpendUsd, type GpuSummary } from '../../core/flow/records';
import { displayState, resumable, type RunSummary } from '../runs/runsModel';
import { formatDurationS, formatUsd } from '../runs/runsView';
import { etaFromNow } from '../runs/statusModel';
import {
  MAX_GPU_LINES,
  type RunAction,
  type RunStatusView,
  type SeriesColumns,
} from './webviewProtocol';
import { attemptsText } from '../runs/runAttempts';
import { clusterPodSummary } from '../runs/clusterSummary';

/**
 * The run webview's model, free of `vscode`: the host holds each run's points here (the page
 * keeps nothing it cannot rebuild from a snapshot), knows which points the page has not seen
 * yet, and computes the texts the page shows (progress, ETA, deadline, spend) from an injected
 * clock.
 */

/** What a new metric did to the series. */
export type SeriesChange =
  /** Nothing to draw (no loss, eval loss or learning rate in it). */
  | 'none'
  /** A point after the last one, or values filled into the last one. */
  | 'append'
  /** The step went backwards (a trainer restarted): later points were dropped; resend all. */
  | 'reset';

/** What a page still needs of a series. */
export type PendingUpdate =
  { kind: 'none' } | { kind: 'snapshot' } | { kind: 'append'; columns: SeriesColumns };

/**
 * What one page has seen of a series (several panels may show the same run): the series'
 * generation (a reset starts a new one) and revision, and how many points it has.
 */
export interface SeriesCursor {
  generation: number;
  revision: number;
  sent: number;
}

export function emptyColumns(): SeriesColumns {
  return { step: [], loss: [], evalLoss: [], learningRate: [], time: [] };
}

/**
 * One run's points, one per step (a training log and the eval log of the same step merge into
 * one point), steps ascending, plus its pace for the ETA. Points are only appended, or filled in
 * at the last step; a step going backwards starts a new generation (pages get a new snapshot).
 */
export class RunSeries {
  private readonly data: Required<SeriesColumns> = emptyColumns() as Required<SeriesColumns>;
  private readonly pace = new Pace();
  private latestEpoch: number | null = null;
  private latestStep: number | null = null;
  private maxSteps: number | null = null;
  /** Wall clock (ms) of the latest metric, for the ETA from now. */
  private lastMetricMs: number | null = null;
  private generation = 0;
  private revision = 0;

  constructor(readonly runId: string) {}

  get length(): number {
    return this.data.step.length;
  }

  /** Takes a metric in at wall time `nowMs`. */
  add(metric: TrainMetric, nowMs: number): SeriesChange {
    this.pace.add(metric);
    this.lastMetricMs = nowMs;
    if (metric.maxSteps !== null && metric.maxSteps !== undefined) this.maxSteps = metric.maxSteps;
    if (metric.epoch !== null && metric.epoch !== undefined) this.latestEpoch = metric.epoch;
    if (this.latestStep === null || metric.step >= this.latestStep) this.latestStep = metric.step;
    const loss = metric.loss ?? null;
    const evalLoss = metric.evalLoss ?? null;
    const lr = metric.learningRate ?? null;
    if (loss === null && evalLoss === null && lr === null) return 'none';
    const { step } = this.data;
    const lastStep = step[step.length - 1];
    let change: SeriesChange = 'append';
    if (lastStep !== undefined && metric.step < lastStep) {
      // A restarted trainer (or a replay from the start of the file) rewrites its steps: drop
      // what it rewrites, as the pace does.
      let keep = step.length - 1;
      while (keep >= 0 && (step[keep] as number) >= metric.step) keep--;
      this.truncate(keep + 1);
      this.latestStep = metric.step;
      this.generation++;
      change = 'reset';
    }
    const end = step.length - 1;
    if (end >= 0 && step[end] === metric.step) {
      if (loss !== null) this.data.loss[end] = loss;
      if (evalLoss !== null) this.data.evalLoss[end] = evalLoss;
      if (lr !== null) this.data.learningRate[end] = lr;
    } else {
      step.push(metric.step);
      this.data.loss.push(loss);
      this.data.evalLoss.push(evalLoss);
      this.data.learningRate.push(lr);
      this.data.time.push(Number.isFinite(metric.time) ? metric.time : null);
    }
    this.revision++;
    return change;
  }

  /**
   * Puts the points of the run this one resumed from (up to its snapshot's step) before this
   * run's own, so the chart continues the earlier curve; only steps below this run's first are
   * taken, so calling it twice changes nothing. The pace (and so the ETA) stays this run's own.
   * Pages get a new snapshot.
   */
  prefix(earlier: readonly TrainMetric[]): void {
    const first = this.data.step[0];
    const before = new RunSeries(this.runId);
    for (const metric of earlier) {
      if (first === undefined || metric.step < first) before.add(metric, 0);
    }
    if (before.length === 0) return;
    const { step, loss, evalLoss, learningRate, time } = before.data;
    this.data.step.unshift(...step);
    this.data.loss.unshift(...loss);
    this.data.evalLoss.unshift(...evalLoss);
    this.data.learningRate.unshift(...learningRate);
    this.data.time.unshift(...time);
    this.latestStep ??= before.latestStep;
    this.maxSteps ??= before.maxSteps;
    this.generation++;
    this.revision++;
  }

  private truncate(length: number): void {
    this.data.step.length = length;
    this.data.loss.length = length;
    this.data.evalLoss.length = length;
    this.data.learningRate.length = length;
    this.data.time.length = length;
  }

  /** A copy of every point (for a snapshot), and the cursor of a page that has seen them. */
  snapshot(): { columns: SeriesColumns; cursor: SeriesCursor } {
    return {
      columns: this.slice(0),
      cursor: { generation: this.generation, revision: this.revision, sent: this.length },
    };
  }

  /**
   * What a page at `cursor` still needs: nothing, a new snapshot, or the points from its last
   * seen one on (that one may have been filled in since: the chart merges a repeated step). An
   * append advances the cursor.
   */
  pending(cursor: SeriesCursor): PendingUpdate {
    if (cursor.generation !== this.generation) return { kind: 'snapshot' };
    if (cursor.revision === this.revision) return { kind: 'none' };
    const from = Math.max(0, Math.min(cursor.sent, this.length) - 1);
    cursor.revision = this.revision;
    cursor.sent = this.length;
    return { kind: 'append', columns: this.slice(from) };
  }

  private slice(from: number): SeriesColumns {
    return {
      step: this.data.step.slice(from),
      loss: this.data.loss.slice(from),
      evalLoss: this.data.evalLoss.slice(from),
      learningRate: this.data.learningRate.slice(from),
      time: this.data.time.slice(from),
    };
  }

  /** The latest step and the total when known. */
  progress(): { step: number; maxSteps: number | null } | null {
    return this.latestStep === null ? null : { step: this.latestStep, maxSteps: this.maxSteps };
  }

  epoch(): number | null {
    return this.latestEpoch;
  }

  /** Time the job still needs from `nowMs` at its pace; null while unknown. */
  etaMs(nowMs: number): number | null {
    if (this.lastMetricMs === null) return null;
    return etaFromNow(this.pace.eta(), nowMs - this.lastMetricMs);
  }
}

/**
 * Calls `flush` at most once per `intervalMs`: the first poke after a quiet spell flushes right
 * away (at the next turn), later pokes within the interval are gathered into one flush at its end.
 */
export class Coalescer {
  private scheduled = false;
  private lastFlushMs = -Infinity;
  private readonly abort = new AbortController();

  constructor(
    private readonly clock: Clock,
    private readonly intervalMs: number,
    private readonly flush: () => void,
  ) {}

  poke(): void {
    if (this.scheduled || this.abort.signal.aborted) return;
    this.scheduled = true;
    const waitMs = Math.max(0, this.lastFlushMs + this.intervalMs - this.clock.nowMs());
    this.clock.sleep(waitMs, this.abort.signal).then(
      () => {
        this.scheduled = false;
        this.lastFlushMs = this.clock.nowMs();
        this.flush();
      },
      () => undefined,
    );
  }

  dispose(): void {
    this.abort.abort(Object.assign(new Error('disposed'), { name: 'AbortError' }));
  }
}

/** What the status texts need besides the run summary and its series. */
export interface StatusExtras {
  nowMs: number;
  /** This window follows the run (its lease keeps the pod past the deadline while it does). */
  followed: boolean;
  /** The run's cost cap from pod.json, when it has one. */
  maxCostUsd: number | null;
  /** When the pod was created and deleted (seconds), from pod.json; billing runs between. */
  podCreatedUnixS: number | null;
  podDeletedUnixS: number | null;
  /** The latest `overrun` warning the core published for the run, if any. */
  overrunMessage: string | null;
  /** `<run dir>/output` exists. */
  hasOutput: boolean;
  /** The boot log's last lines while the run's pod provisions, else null. */
  bootLog?: string[] | null;
  /** The run's GPU record (`.pod/gpu.json`), when there is one. */
  gpu?: GpuSummary | null;
}

const DISPLAY_WORDS: Record<string, string> = {
  awaiting: 'awaiting retrieval',
  kept: 'pod kept',
  unreadable: 'unreadable',
};

/** Whether the job may still be going (so an ETA and a projection mean something). */
function isLive(run: RunSummary): boolean {
  return run.state === 'running' || run.state === 'preparing';
}

/** The buttons that apply to `run` now (the same rules as the commands' pickers). */
export function runActions(run: RunSummary, hasOutput: boolean): RunAction[] {
  const actions: RunAction[] = [];
  const pod = run.pod;
  const podAlive = pod !== null && pod.state !== 'deleted';
  if (run.state === 'running') actions.push('stop');
  if (isLive(run)) actions.push('cancel');
  if (podAlive && !pod.keep) actions.push('keep');
  if (podAlive && pod.keep) actions.push('release');
  if (podAlive) actions.push('remove');
  if (resumable(run)) actions.push('resume');
  if (hasOutput) actions.push('openOutput');
  return actions;
}

/** The header, progress and money texts of the run page. */
export function runStatusView(
  run: RunSummary,
  series: RunSeries,
  extras: StatusExtras,
): RunStatusView {
  const display = displayState(run);
  const state = DISPLAY_WORDS[display] ?? display;
  const live = isLive(run);
  // A cluster run has no pod.json: its cluster stands for its pod here (N × the member rate).
  const pod = run.pod ?? (run.cluster ? clusterPodSummary(run.cluster) : null);
  const summaryParts = [state];
  if (run.target !== null) summaryParts.push(`target ${run.target}`);
  if (pod?.gpuType) summaryParts.push(pod.gpuType);
  if (pod?.podId) summaryParts.push(`${run.pod ? 'pod' : 'cluster'} ${pod.podId}`);

  const progress = series.progress();
  let stepText: string | null = null;
  let fraction: number | null = null;
  if (progress !== null) {
    stepText =
      progress.maxSteps === null
        ? `step ${progress.step}`
        : `step ${progress.step} / ${progress.maxSteps}`;
    if (progress.maxSteps !== null) fraction = Math.min(1, progress.step / progress.maxSteps);
  }
  const epoch = series.epoch();
  const epochText = epoch === null ? null : `epoch ${Number(epoch.toFixed(2))}`;

  const etaMs = live ? series.etaMs(extras.nowMs) : null;
  const etaText = etaMs === null ? null : `ETA ${formatDurationS(etaMs / 1000)}`;

  const podAlive = pod !== null && pod.state !== 'deleted';
  let deadlineText: string | null = null;
  if (podAlive && pod.keep) deadlineText = 'no deadline (pod kept)';
  else if (podAlive && pod.deadlineUnixS !== null) {
    const leftS = pod.deadlineUnixS - extras.nowMs / 1000;
    deadlineText = leftS > 0 ? `${formatDurationS(leftS)} until the deadline` : 'deadline passed';
  }

  let spendText: string | null = null;
  const rate = pod?.costPerHourUsd ?? null;
  const parts: string[] = [];
  if (pod !== null && !podAlive && pod.estimatedSpendUsd !== null) {
    parts.push(`about ${formatUsd(pod.estimatedSpendUsd)} spent`);
  } else if (rate !== null && extras.podCreatedUnixS !== null) {
    const endMs = extras.podDeletedUnixS !== null ? extras.podDeletedUnixS * 1000 : extras.nowMs;
    const elapsedMs = Math.max(0, endMs - extras.podCreatedUnixS * 1000);
    const spend = projectSpendUsd(rate, elapsedMs, podAlive && live ? etaMs : null);
    parts.push(`${formatUsd(spend.spentUsd)} so far at ${formatUsd(rate)}/h`);
    if (spend.projectedUsd !== null)
      parts.push(`about ${formatUsd(spend.projectedUsd)} at the ETA`);
  }
  if (extras.maxCostUsd !== null) parts.push(`max_cost_usd ${formatUsd(extras.maxCostUsd)}`);
  if (parts.length > 0) spendText = parts.join(' · ');

  let overrunText: string | null = null;
  if (live && podAlive) {
    overrunText =
      extras.overrunMessage ??
      overrun(
        { etaMs: () => etaMs },
        {
          keep: pod.keep,
          deadlineUnixS: pod.deadlineUnixS,
          deadline: deadlineIso(pod.deadlineUnixS),
        },
        extras.nowMs,
        extras.followed,
      );
  }

  return {
    runId: run.id,
    state,
    summary: summaryParts.join(' · '),
    message: run.message,
    stepText,
    progress: fraction,
    epochText,
    etaText,
    deadlineText,
    spendText,
    overrun: overrunText,
    attemptsText: attemptsText(run.attempts),
    actions: runActions(run, extras.hasOutput),
    bootLog: live && extras.bootLog && extras.bootLog.length > 0 ? extras.bootLog : null,
    ...gpuTexts(extras.gpu ?? null),
  };
}

/** The GPUs' newest figures, a line each, and what was found of their use. */
function gpuTexts(gpu: GpuSummary | null): Pick<RunStatusView, 'gpuText' | 'gpuWarning'> {
  if (gpu === null) return { gpuText: null, gpuWarning: null };
  const lines =
    gpu.last === null
      ? null
      : gpu.last.gpus.slice(0, MAX_GPU_LINES).map((g) => `GPU ${g.index} · ${gpuLine(g)}`);
  const found = gpu.findings.map((f) => f.message);
  return {
    gpuText: lines !== null && lines.length > 0 ? lines : null,
    gpuWarning: found.length === 0 ? null : found.join('\n'),
  };
}

function deadlineIso(unixS: number | null): string | null {
  return unixS === null ? null : new Date(unixS * 1000).toISOString().replace('.000Z', 'Z');
}
