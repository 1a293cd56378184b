import * as path from 'node:path';
import type { Clock } from '../../core/clock';
import type { CoreEvent } from '../../core/events';
import { METRICS_FILE, readGpuSummary, type GpuSummary } from '../../core/flow/records';
import type { LogPort } from '../host';
import type { RunsModel, RunSummary } from '../runs/runsModel';
import { describeError } from '../../core/errors';
import { readMetricsFile } from './runMetricsFile';
import { isDirectory, readPodExtras, type PodExtras } from './runPanelPage';
import { RunSeries, type StatusExtras } from './runSeries';
import { MAX_BOOT_LOG_LINES } from './webviewProtocol';

/** A run's data shared by every panel showing it. */
export interface RunEntry {
  series: RunSeries;
  /** The file read for a run with no metric events yet; null once done or not needed. */
  loading: Promise<void> | null;
  /** The latest overrun warning of the core for the run. */
  overrunMessage: string | null;
  /** Metric events arrived since the last run state: this window follows the run. */
  followed: boolean;
  /** The read of the earlier run's points, for a resumed run (once). */
  earlier: Promise<void> | null;
  /** The last lines of the boot log of the pod provisioning for the run (redacted by the core). */
  bootLog: string[];
  /** Pods of the run that answered SSH or ended: their log is no boot log any more. */
  bootedPods: Set<string>;
}

export interface RunDataDeps {
  clock: Clock;
  runs: RunsModel;
  log: LogPort;
  /** A run's series changed outside an event (the earlier run's points read in). */
  onSeriesChanged(runId: string): void;
}

/** What a core event changed for the panels: a run's series, its status texts, or nothing. */
export type RunDataChange = { kind: 'series' | 'status'; runId: string } | null;

/**
 * What the run panels show of each run, free of `vscode`: its series (fed by the core's metric
 * events, or by the run's metrics.jsonl when this window does not follow it), its boot log, its
 * overrun warning and pod.json's extras, and which run is live.
 */
export class RunData {
  private readonly entries = new Map<string, RunEntry>();
  private readonly podExtras = new Map<string, PodExtras>();
  /** Each run's `.pod/gpu.json` as last read; dropped at each GPU sample of the run. */
  private readonly gpuSummaries = new Map<string, GpuSummary | null>();
  /** The run most recently seen live (status bar click with no argument shows it). */
  liveRunId: string | null = null;

  constructor(private readonly deps: RunDataDeps) {}

  /** The run of `dir` as the runs model knows it, if it does. */
  run(dir: string): RunSummary | undefined {
    return this.deps.runs.all.find((r) => r.dir === dir);
  }

  /** The series of `runId`, created on first use. */
  entry(runId: string): RunEntry {
    let entry = this.entries.get(runId);
    if (!entry) {
      entry = {
        series: new RunSeries(runId),
        loading: null,
        overrunMessage: null,
        followed: false,
        earlier: null,
        bootLog: [],
        bootedPods: new Set(),
      };
      this.entries.set(runId, entry);
    }
    return entry;
  }

  /** The records changed: pod.json's extras are read again when next asked. */
  recordsChanged(): void {
    this.podExtras.clear();
    this.gpuSummaries.clear();
  }

  /**
   * Makes sure a run's series holds what is known: a run without metric events in this window
   * (finished, or followed elsewhere) is read from its metrics.jsonl once.
   */
  load(dir: string): Promise<void> {
    return Promise.all([this.loadOwn(dir), this.loadEarlier(dir)]).then(() => undefined);
  }

  private loadOwn(dir: string): Promise<void> {
    const runId = path.basename(dir);
    const entry = this.entry(runId);
    if (entry.loading !== null) return entry.loading;
    if (entry.series.length > 0 || entry.followed) return Promise.resolve();
    entry.loading = (async () => {
      try {
        const read = await readMetricsFile(path.join(dir, METRICS_FILE));
        // Events that arrived meanwhile are newer than the file: keep them.
        if (read === null || entry.series.length > 0) return;
        const now = this.deps.clock.nowMs();
        for (const metric of read.metrics) entry.series.add(metric, now);
        if (read.truncated) {
          this.deps.log.warn(`${runId}: metrics.jsonl is too large; only its head is charted.`);
        }
      } catch (error) {
        this.deps.log.warn(`${runId}: could not read metrics.jsonl: ${describeError(error)}`);
      }
    })();
    return entry.loading;
  }

  /**
   * A resumed run's chart continues the earlier curve: the points of the run it resumed from, up
   * to that run's snapshot, go before its own (read once; the panels get a new snapshot).
   */
  loadEarlier(dir: string): Promise<void> {
    const run = this.run(dir);
    if (!run?.resumedFrom) return Promise.resolve();
    const entry = this.entry(run.id);
    if (entry.earlier !== null) return entry.earlier;
    const from = run.resumedFrom;
    const upToStep =
      this.deps.runs.all.find((r) => r.id === from)?.snapshot?.step ?? Number.POSITIVE_INFINITY;
    entry.earlier = (async () => {
      try {
        const read = await readMetricsFile(path.join(path.dirname(dir), from, METRICS_FILE));
        if (read === null) return;
        entry.series.prefix(read.metrics.filter((metric) => metric.step <= upToStep));
        this.deps.onSeriesChanged(run.id);
      } catch (error) {
        this.deps.log.warn(
          `${run.id}: could not read the metrics of ${from}: ${describeError(error)}`,
        );
      }
    })();
    return entry.earlier;
  }

  podExtrasOf(run: RunSummary): PodExtras {
    let extras = this.podExtras.get(run.dir);
    if (!extras) {
      extras = readPodExtras(run.dir);
      this.podExtras.set(run.dir, extras);
    }
    return extras;
  }

  statusExtras(run: RunSummary): StatusExtras {
    const entry = this.entry(run.id);
    const pod = this.podExtrasOf(run);
    return {
      nowMs: this.deps.clock.nowMs(),
      followed: entry.followed,
      maxCostUsd: pod.maxCostUsd,
      podCreatedUnixS: pod.createdUnixS,
      podDeletedUnixS: pod.deletedUnixS,
      overrunMessage: entry.overrunMessage,
      hasOutput: isDirectory(path.join(run.dir, 'output')),
      bootLog: entry.bootLog.length > 0 ? [...entry.bootLog] : null,
      gpu: this.gpuOf(run),
    };
  }

  private gpuOf(run: RunSummary): GpuSummary | null {
    if (!this.gpuSummaries.has(run.id)) this.gpuSummaries.set(run.id, readGpuSummary(run.dir));
    return this.gpuSummaries.get(run.id) ?? null;
  }

  /** Takes in a core event; says what the panels showing its run must send again. */
  onEvent(event: CoreEvent): RunDataChange {
    if (!('runId' in event) || event.runId === null) return null;
    const runId = event.runId;
    switch (event.type) {
      case 'metric': {
        const entry = this.entry(runId);
        entry.followed = true;
        entry.bootLog = [];
        entry.series.add(event.metric, this.deps.clock.nowMs());
        this.liveRunId = runId;
        return { kind: 'series', runId };
      }
      case 'runWatched':
        this.entry(runId).followed = true;
        this.liveRunId = runId;
        break;
      case 'runState':
        if (event.state === 'preparing' || event.state === 'running') {
          this.liveRunId = runId;
        } else {
          this.entry(runId).followed = false;
          this.entry(runId).overrunMessage = null;
          // Ended, it is no longer what Show Run opens unasked.
          if (this.liveRunId === runId) this.liveRunId = null;
        }
        break;
      case 'podLog': {
        // The boot, until the pod answers SSH: shown in place of the chart.
        const entry = this.entry(runId);
        if (entry.bootedPods.has(event.podId)) return null;
        entry.bootLog.push(this.deps.log.redact(`${event.source}: ${event.line}`));
        if (entry.bootLog.length > MAX_BOOT_LOG_LINES) entry.bootLog.shift();
        break;
      }
      case 'jobStatus':
        this.entry(runId).bootLog = [];
        break;
      case 'warning':
        if (event.code === 'overrun') this.entry(runId).overrunMessage = event.message;
        if (event.code.startsWith('gpu_')) this.gpuSummaries.delete(runId);
        break;
      case 'transfer':
        // Up to four a second, and nothing the page shows: the status bar shows transfers.
        return null;
      case 'gpu':
        // Written to .pod/gpu.json before the event: read again at the next status.
        this.gpuSummaries.delete(runId);
        break;
      case 'pod':
        this.podExtras.clear();
        if ('podId' in event.status && event.status.kind !== 'created') {
          this.entry(runId).bootedPods.add(event.status.podId);
          this.entry(runId).bootLog = [];
        }
        // A pod being provisioned is the live run's, before its job (and its metrics) start.
        if (event.status.kind === 'creating' || event.status.kind === 'ready') {
          this.liveRunId = runId;
        }
        break;
      default:
        break;
    }
    return { kind: 'status', runId };
  }
}
