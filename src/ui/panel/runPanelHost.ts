import * as path from 'node:path';
import type * as vscode from 'vscode';
import type { Clock } from '../../core/clock';
import type { LogPort } from '../host';
import type { RunsModel, RunSummary } from '../runs/runsModel';
import { describeError } from '../../core/errors';
import { every } from '../ticker';
import type { RunData } from './runData';
import { Coalescer, runStatusView, type SeriesCursor } from './runSeries';
import {
  parsePageMessage,
  type ChartPrefs,
  type HostMessage,
  type PanelState,
  type RunAction,
} from './webviewProtocol';

/** Appends reach the page at most this often. */
export const APPEND_INTERVAL_MS = 100;
/** The status texts (ETA, deadline, spend) are sent this often while the panel is visible. */
export const STATUS_INTERVAL_MS = 1000;

export interface RunPanelHostDeps {
  clock: Clock;
  log: LogPort;
  runs: RunsModel;
  data: RunData;
  /** A button of the page on the run it shows. */
  act(action: RunAction, run: RunSummary): Promise<void>;
  /** The chart's controls, remembered per workspace. */
  chartPrefs: { get(): ChartPrefs; set(prefs: ChartPrefs): void };
}

/** One panel: its page, its coalesced appends and its status ticker. */
export class RunPanelHost {
  readonly mode: 'run' | 'compare';
  readonly dirs: string[];
  private readonly runIds: string[];
  private ready = false;
  /** What the page has seen of each run's series. */
  private readonly cursors = new Map<string, SeriesCursor>();
  private readonly coalescer: Coalescer;
  private readonly subs: { dispose(): void }[] = [];

  constructor(
    private readonly deps: RunPanelHostDeps,
    readonly panel: vscode.WebviewPanel,
    state: PanelState,
  ) {
    this.mode = state.mode;
    this.dirs = state.dirs;
    this.runIds = state.dirs.map((d) => path.basename(d));
    this.coalescer = new Coalescer(deps.clock, APPEND_INTERVAL_MS, () => this.flush());
    this.subs.push(
      panel.webview.onDidReceiveMessage((message: unknown) => this.onMessage(message)),
      panel.onDidChangeViewState(() => {
        if (panel.visible) this.sendStatus();
      }),
      every(
        deps.clock,
        STATUS_INTERVAL_MS,
        () => {
          if (this.panel.visible) this.sendStatus();
        },
        (error) =>
          deps.log.warn(`The run page's status could not be sent: ${describeError(error)}`),
      ),
    );
  }

  shows(runId: string): boolean {
    return this.runIds.includes(runId);
  }

  private onMessage(raw: unknown): void {
    const message = parsePageMessage(raw);
    if (message === null) {
      this.deps.log.warn('The run page sent a message that is not in the contract; ignored.');
      return;
    }
    if (message.type === 'ready') {
      void this.sendSnapshot();
      return;
    }
    if (message.type === 'chartPrefs') {
      this.deps.chartPrefs.set(message.prefs);
      return;
    }
    // The page may only act on the run it shows, and only with a button that applies now.
    const { data } = this.deps;
    const index = this.runIds.indexOf(message.runId);
    const dir = this.dirs[index];
    const run = dir === undefined ? undefined : data.run(dir);
    if (this.mode !== 'run' || run === undefined) return;
    const status = runStatusView(run, data.entry(run.id).series, data.statusExtras(run));
    if (!status.actions.includes(message.action)) return;
    this.deps.act(message.action, run).catch((error: unknown) => {
      this.deps.log.error(`${message.action} on ${run.id} failed: ${describeError(error)}`);
    });
  }

  private async sendSnapshot(): Promise<void> {
    // Appends wait for the snapshot; the poke after it sends what arrived meanwhile.
    this.ready = false;
    const { data } = this.deps;
    await this.deps.runs.ensureLoaded().catch(() => undefined);
    await Promise.all(this.dirs.map((dir) => data.load(dir)));
    const runs = this.runIds.map((runId) => {
      const { columns, cursor } = data.entry(runId).series.snapshot();
      this.cursors.set(runId, cursor);
      return { runId, columns };
    });
    const title =
      this.mode === 'run' ? `Run ${this.runIds[0] ?? ''}` : `Compare ${this.runIds.join(', ')}`;
    const message: HostMessage = {
      type: 'snapshot',
      mode: this.mode,
      title,
      runs,
      status: this.mode === 'run' ? this.status() : null,
      panel: { mode: this.mode, dirs: this.dirs },
      chart: this.deps.chartPrefs.get(),
    };
    if (this.mode === 'run' && message.status === null) {
      // The run is gone from the records (deleted folder): show what the chart knows.
      message.status = {
        runId: this.runIds[0] ?? 'unknown',
        state: 'not found',
        summary: 'The run folder is gone or unreadable.',
        message: null,
        stepText: null,
        progress: null,
        epochText: null,
        etaText: null,
        deadlineText: null,
        spendText: null,
        overrun: null,
        actions: [],
      };
    }
    this.ready = await this.post(message);
    // Points that arrived while the snapshot was on its way follow as an append.
    if (this.ready) this.coalescer.poke();
  }

  /** The series of `runId` changed: an append goes out within the coalescing interval. */
  seriesChanged(runId: string): void {
    if (this.ready && this.shows(runId)) this.coalescer.poke();
  }

  private flush(): void {
    if (!this.ready) return;
    for (const runId of this.runIds) {
      const cursor = this.cursors.get(runId);
      const pending =
        cursor === undefined
          ? ({ kind: 'snapshot' } as const)
          : this.deps.data.entry(runId).series.pending(cursor);
      if (pending.kind === 'snapshot') {
        void this.sendSnapshot();
        return;
      }
      if (pending.kind === 'append') {
        void this.post({ type: 'append', runId, columns: pending.columns });
      }
    }
    if (this.mode === 'run') this.sendStatus();
  }

  private status(): ReturnType<typeof runStatusView> | null {
    const { data } = this.deps;
    const dir = this.dirs[0];
    const run = dir === undefined ? undefined : data.run(dir);
    if (run === undefined) return null;
    return runStatusView(run, data.entry(run.id).series, data.statusExtras(run));
  }

  sendStatus(): void {
    if (!this.ready || this.mode !== 'run') return;
    const status = this.status();
    if (status !== null) void this.post({ type: 'status', status });
  }

  private async post(message: HostMessage): Promise<boolean> {
    try {
      return await this.panel.webview.postMessage(message);
    } catch {
      return false; // The panel was closed meanwhile.
    }
  }

  dispose(): void {
    this.coalescer.dispose();
    for (const sub of this.subs) sub.dispose();
  }
}
