import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Clock } from '../../core/clock';
import type { CoreEvent, EventBus } from '../../core/events';
import { METRICS_FILE } from '../../core/train/job';
import type { Log } from '../log';
import { isDirectory, pageHtml, readPodExtras, type PodExtras } from './runPanelPage';
import { readMetricsFile } from './runMetricsFile';
import {
  Coalescer,
  RunSeries,
  runStatusView,
  type SeriesCursor,
  type StatusExtras,
} from './runSeries';
import type { RunsModel, RunSummary } from '../runs/runsModel';
import {
  MAX_BOOT_LOG_LINES,
  MAX_COMPARE_RUNS,
  parsePageMessage,
  parsePanelState,
  type HostMessage,
  type PanelState,
  type RunAction,
} from './webviewProtocol';
import { describeError } from '../../core/errors';

/**
 * The run webview's host: one panel per run (and compare panels with several runs' loss curves),
 * restored after a window reload by a serializer. The host holds every run's series (RunSeries,
 * fed by the core's metric events, or by the run's metrics.jsonl when this window does not follow
 * it) and sends the page a snapshot when it says `ready`, then coalesced appends (at most every
 * 100 ms) and its status texts every second while visible.
 */

export const RUN_VIEW_TYPE = 'overbrainer.run';
/** Appends reach the page at most this often. */
export const APPEND_INTERVAL_MS = 100;
const STATUS_INTERVAL_MS = 1000;

const COMMAND_OF: Record<Exclude<RunAction, 'openOutput'>, string> = {
  stop: 'overbrainer.stopRun',
  resume: 'overbrainer.resumeRun',
  cancel: 'overbrainer.cancel',
  keep: 'overbrainer.keepPod',
  release: 'overbrainer.releasePod',
  remove: 'overbrainer.removePod',
};

export interface RunPanelDeps {
  extensionUri: vscode.Uri;
  bus: EventBus;
  clock: Clock;
  runs: RunsModel;
  log: Log;
  /** The UI context's picker: the run of a tree item or `{ dir }`, else a QuickPick. */
  pickRun(
    arg: unknown,
    applies: (run: RunSummary) => boolean,
    what: string,
  ): Promise<RunSummary | undefined>;
}

/** A run's data shared by every panel showing it. */
interface RunEntry {
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

export class RunPanels implements vscode.Disposable {
  private readonly entries = new Map<string, RunEntry>();
  private readonly panels = new Set<RunPanelHost>();
  private readonly podExtras = new Map<string, PodExtras>();
  private readonly subs: vscode.Disposable[] = [];
  /** The run most recently seen live (status bar click with no argument shows it). */
  private liveRunId: string | null = null;

  constructor(readonly deps: RunPanelDeps) {
    this.subs.push(
      deps.bus.on((event) => this.onEvent(event)),
      deps.runs.onDidChange(() => {
        this.podExtras.clear();
        for (const panel of this.panels) {
          // A run created after its panel opened is known now: a resumed one gets its start.
          for (const dir of panel.dirs) void this.loadEarlier(dir);
          panel.sendStatus();
        }
      }),
    );
  }

  // ------------------------------------------------------------ commands

  /** `overbrainer.showRun`: the run's panel (the live run when called without an argument). */
  async showRun(arg: unknown): Promise<void> {
    await this.deps.runs.ensureLoaded().catch(() => undefined);
    let run: RunSummary | undefined;
    if (arg === undefined && this.liveRunId !== null) {
      run = this.deps.runs.all.find((r) => r.id === this.liveRunId);
    }
    // Train opening its new run's view: beside the editor, keeping the focus, never a pick.
    const onTrain = openedOnTrain(arg);
    if (onTrain !== null) run = this.deps.runs.all.find((r) => r.dir === onTrain);
    else run ??= await this.deps.pickRun(arg, () => true, 'show');
    if (!run) return;
    const existing = [...this.panels].find((p) => p.mode === 'run' && p.dirs[0] === run.dir);
    if (existing) {
      existing.panel.reveal(undefined, onTrain !== null);
      return;
    }
    const panel = vscode.window.createWebviewPanel(
      RUN_VIEW_TYPE,
      `Run ${run.id}`,
      onTrain !== null
        ? { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true }
        : vscode.ViewColumn.Active,
      this.webviewOptions(),
    );
    this.attach(panel, { mode: 'run', dirs: [run.dir] });
  }

  /** `overbrainer.compareRuns`: several runs' loss curves on one chart. */
  async compareRuns(arg: unknown, selected: unknown): Promise<void> {
    await this.deps.runs.ensureLoaded().catch(() => undefined);
    const all = this.deps.runs.all.filter((r) => r.state !== null);
    const dirsOf = (value: unknown): string[] =>
      (Array.isArray(value) ? value : [value])
        .map((v) =>
          typeof v === 'object' && v !== null && typeof (v as { dir?: unknown }).dir === 'string'
            ? (v as { dir: string }).dir
            : null,
        )
        .filter((d): d is string => d !== null);
    let dirs = dirsOf(selected);
    if (dirs.length < 2) {
      const preselected = new Set([...dirsOf(arg), ...dirs]);
      if (all.length === 0) {
        void vscode.window.showInformationMessage('Overbrainer: no run to compare.');
        return;
      }
      const picks = await vscode.window.showQuickPick(
        all.map((run) => ({
          label: run.id,
          description: [run.state, run.target].filter(Boolean).join(' · '),
          picked: preselected.has(run.dir),
          run,
        })),
        { canPickMany: true, placeHolder: 'Runs to compare (loss curves on one chart)' },
      );
      if (!picks || picks.length === 0) return;
      dirs = picks.map((p) => p.run.dir);
    }
    if (dirs.length > MAX_COMPARE_RUNS) {
      void vscode.window.showWarningMessage(
        `Overbrainer: compare at most ${MAX_COMPARE_RUNS} runs at once; showing the first ${MAX_COMPARE_RUNS}.`,
      );
      dirs = dirs.slice(0, MAX_COMPARE_RUNS);
    }
    const ids = dirs.map((d) => path.basename(d));
    const panel = vscode.window.createWebviewPanel(
      RUN_VIEW_TYPE,
      `Compare ${ids.join(', ')}`,
      vscode.ViewColumn.Active,
      this.webviewOptions(),
    );
    this.attach(panel, { mode: 'compare', dirs });
  }

  // ------------------------------------------------------------ panels

  private webviewOptions(): vscode.WebviewPanelOptions & vscode.WebviewOptions {
    return {
      enableScripts: true,
      // The page only loads the bundle and its styles from dist/.
      localResourceRoots: [vscode.Uri.joinPath(this.deps.extensionUri, 'dist')],
      retainContextWhenHidden: false,
    };
  }

  /** The serializer's work (registered by src/extension.ts): `state` is what the page stored, validated like any page message. */
  async restore(panel: vscode.WebviewPanel, state: unknown): Promise<void> {
    const panelState = parsePanelState(state);
    if (panelState === null) {
      this.deps.log.warn('A run panel could not be restored: its saved state is not valid.');
      panel.dispose();
      return;
    }
    panel.webview.options = this.webviewOptions();
    this.attach(panel, panelState);
  }

  private attach(panel: vscode.WebviewPanel, state: PanelState): void {
    const host = new RunPanelHost(this, panel, state);
    this.panels.add(host);
    panel.onDidDispose(() => {
      this.panels.delete(host);
      host.dispose();
    });
  }

  // ------------------------------------------------------------ data

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
  private loadEarlier(dir: string): Promise<void> {
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
        for (const panel of this.panels) panel.seriesChanged(run.id);
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
    };
  }

  private onEvent(event: CoreEvent): void {
    if (!('runId' in event) || event.runId === null) return;
    const runId = event.runId;
    switch (event.type) {
      case 'metric': {
        const entry = this.entry(runId);
        entry.followed = true;
        entry.bootLog = [];
        entry.series.add(event.metric, this.deps.clock.nowMs());
        this.liveRunId = runId;
        for (const panel of this.panels) panel.seriesChanged(runId);
        return;
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
        }
        break;
      case 'podLog': {
        // The boot, until the pod answers SSH: shown in place of the chart.
        const entry = this.entry(runId);
        if (entry.bootedPods.has(event.podId)) return;
        entry.bootLog.push(this.deps.log.redact(`${event.source}: ${event.line}`));
        if (entry.bootLog.length > MAX_BOOT_LOG_LINES) entry.bootLog.shift();
        break;
      }
      case 'jobStatus':
        this.entry(runId).bootLog = [];
        break;
      case 'warning':
        if (event.code === 'overrun') this.entry(runId).overrunMessage = event.message;
        break;
      case 'transfer':
        // Up to four a second, and nothing the page shows: the status bar shows transfers.
        return;
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
    for (const panel of this.panels) if (panel.shows(runId)) panel.sendStatus();
  }

  /** A button of the page: the existing command, with the run's directory as its argument. */
  async act(action: RunAction, run: RunSummary): Promise<void> {
    if (action === 'openOutput') {
      const output = vscode.Uri.file(path.join(run.dir, 'output'));
      await vscode.commands.executeCommand('revealInExplorer', output);
      return;
    }
    await vscode.commands.executeCommand(COMMAND_OF[action], { dir: run.dir });
  }

  dispose(): void {
    for (const sub of this.subs) sub.dispose();
    for (const panel of [...this.panels]) panel.panel.dispose();
    this.panels.clear();
  }
}

/** One panel: its page, its coalesced appends and its status ticker. */
class RunPanelHost {
  readonly mode: 'run' | 'compare';
  readonly dirs: string[];
  private readonly runIds: string[];
  private ready = false;
  /** What the page has seen of each run's series. */
  private readonly cursors = new Map<string, SeriesCursor>();
  private readonly coalescer: Coalescer;
  private readonly subs: vscode.Disposable[] = [];
  private readonly ticker: ReturnType<typeof setInterval>;

  constructor(
    private readonly owner: RunPanels,
    readonly panel: vscode.WebviewPanel,
    state: PanelState,
  ) {
    this.mode = state.mode;
    this.dirs = state.dirs;
    this.runIds = state.dirs.map((d) => path.basename(d));
    this.coalescer = new Coalescer(owner.deps.clock, APPEND_INTERVAL_MS, () => this.flush());
    panel.iconPath = vscode.Uri.joinPath(owner.deps.extensionUri, 'media', 'overbrainer.svg');
    panel.webview.html = pageHtml(panel.webview, owner.deps.extensionUri);
    this.subs.push(
      panel.webview.onDidReceiveMessage((message: unknown) => this.onMessage(message)),
      panel.onDidChangeViewState(() => {
        if (panel.visible) this.sendStatus();
      }),
    );
    this.ticker = setInterval(() => {
      if (this.panel.visible) this.sendStatus();
    }, STATUS_INTERVAL_MS);
  }

  shows(runId: string): boolean {
    return this.runIds.includes(runId);
  }

  private onMessage(raw: unknown): void {
    const message = parsePageMessage(raw);
    if (message === null) {
      this.owner.deps.log.warn('The run page sent a message that is not in the contract; ignored.');
      return;
    }
    if (message.type === 'ready') {
      void this.sendSnapshot();
      return;
    }
    // The page may only act on the run it shows, and only with a button that applies now.
    const index = this.runIds.indexOf(message.runId);
    const dir = this.dirs[index];
    const run = dir === undefined ? undefined : this.owner.run(dir);
    if (this.mode !== 'run' || run === undefined) return;
    const status = runStatusView(
      run,
      this.owner.entry(run.id).series,
      this.owner.statusExtras(run),
    );
    if (!status.actions.includes(message.action)) return;
    this.owner.act(message.action, run).catch((error: unknown) => {
      this.owner.deps.log.error(`${message.action} on ${run.id} failed: ${describeError(error)}`);
    });
  }

  private async sendSnapshot(): Promise<void> {
    // Appends wait for the snapshot; the poke after it sends what arrived meanwhile.
    this.ready = false;
    await this.owner.deps.runs.ensureLoaded().catch(() => undefined);
    await Promise.all(this.dirs.map((dir) => this.owner.load(dir)));
    const runs = this.runIds.map((runId) => {
      const { columns, cursor } = this.owner.entry(runId).series.snapshot();
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
          : this.owner.entry(runId).series.pending(cursor);
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
    const dir = this.dirs[0];
    const run = dir === undefined ? undefined : this.owner.run(dir);
    if (run === undefined) return null;
    return runStatusView(run, this.owner.entry(run.id).series, this.owner.statusExtras(run));
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
    clearInterval(this.ticker);
    this.coalescer.dispose();
    for (const sub of this.subs) sub.dispose();
  }
}

/** The run directory of Train's `{ dir, openOnTrain: true }`; null for any other argument. */
function openedOnTrain(arg: unknown): string | null {
  if (typeof arg !== 'object' || arg === null) return null;
  const a = arg as { dir?: unknown; openOnTrain?: unknown };
  return a.openOnTrain === true && typeof a.dir === 'string' ? a.dir : null;
}
