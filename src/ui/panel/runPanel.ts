import * as path from 'node:path';
import type * as vscode from 'vscode';
import type { Clock } from '../../core/clock';
import type { CoreEvent, EventBus } from '../../core/events';
import type { LogPort, UiHost } from '../host';
import type { RunsModel, RunSummary } from '../runs/runsModel';
import { RunData } from './runData';
import { RunPanelHost } from './runPanelHost';
import { pageHtml } from './runPanelPage';
import {
  DEFAULT_CHART_PREFS,
  MAX_COMPARE_RUNS,
  parseChartPrefs,
  parsePanelState,
  type ChartPrefs,
  type PanelState,
  type RunAction,
} from './webviewProtocol';

/**
 * The run webview's host: one panel per run (and compare panels with several runs' loss curves),
 * restored after a window reload by a serializer. The host holds every run's series (RunData)
 * and sends the page a snapshot when it says `ready`, then coalesced appends (at most every
 * 100 ms) and its status texts every second while visible (RunPanelHost). It reaches VS Code
 * through the UiHost port only.
 */

export const RUN_VIEW_TYPE = 'overbrainer.run';

const COMMAND_OF: Record<Exclude<RunAction, 'openOutput'>, string> = {
  stop: 'overbrainer.stopRun',
  resume: 'overbrainer.resumeRun',
  cancel: 'overbrainer.cancel',
  keep: 'overbrainer.keepPod',
  release: 'overbrainer.releasePod',
  remove: 'overbrainer.removePod',
};

export interface RunPanelDeps {
  host: UiHost;
  extensionUri: vscode.Uri;
  bus: EventBus;
  clock: Clock;
  runs: RunsModel;
  log: LogPort;
  /**
   * Where the chart's controls are remembered (the workspace's state); absent: for this window
   * only.
   */
  chartPrefs?: { get(): unknown; set(value: unknown): void };
  /** The UI context's picker: the run of a tree item or `{ dir }`, else a QuickPick. */
  pickRun(
    arg: unknown,
    applies: (run: RunSummary) => boolean,
    what: string,
  ): Promise<RunSummary | undefined>;
}

export class RunPanels implements vscode.Disposable {
  private readonly data: RunData;
  private readonly panels = new Set<RunPanelHost>();
  /** The chart's controls when no workspace state keeps them. */
  private chartPrefs: ChartPrefs = { ...DEFAULT_CHART_PREFS };
  private readonly subs: { dispose(): void }[] = [];

  constructor(readonly deps: RunPanelDeps) {
    this.data = new RunData({
      clock: deps.clock,
      runs: deps.runs,
      log: deps.log,
      onSeriesChanged: (runId) => {
        for (const panel of this.panels) panel.seriesChanged(runId);
      },
    });
    this.subs.push(
      deps.bus.on((event) => this.onEvent(event)),
      deps.runs.onDidChange(() => {
        this.data.recordsChanged();
        for (const panel of this.panels) {
          // A run created after its panel opened is known now: a resumed one gets its start.
          for (const dir of panel.dirs) void this.data.loadEarlier(dir);
          panel.sendStatus();
        }
      }),
    );
  }

  private get window(): UiHost['window'] {
    return this.deps.host.window;
  }

  // ------------------------------------------------------------ commands

  /** `overbrainer.showRun`: the run's panel (the live run when called without an argument). */
  async showRun(arg: unknown): Promise<void> {
    const { runs, host } = this.deps;
    await runs.ensureLoaded().catch(() => undefined);
    let run: RunSummary | undefined;
    const live = this.data.liveRunId;
    if (arg === undefined && live !== null) run = runs.all.find((r) => r.id === live);
    // Train opening its new run's view: beside the editor, keeping the focus, never a pick.
    const onTrain = openedOnTrain(arg);
    if (onTrain !== null) run = runs.all.find((r) => r.dir === onTrain);
    else run ??= await this.deps.pickRun(arg, () => true, 'show');
    if (!run) return;
    const existing = [...this.panels].find((p) => p.mode === 'run' && p.dirs[0] === run.dir);
    if (existing) {
      existing.panel.reveal(undefined, onTrain !== null);
      return;
    }
    const panel = this.window.createWebviewPanel(
      RUN_VIEW_TYPE,
      `Run ${run.id}`,
      onTrain !== null
        ? { viewColumn: host.viewColumn.beside, preserveFocus: true }
        : host.viewColumn.active,
      this.webviewOptions(),
    );
    this.attach(panel, { mode: 'run', dirs: [run.dir] });
  }

  /** `overbrainer.compareRuns`: several runs' loss curves on one chart. */
  async compareRuns(arg: unknown, selected: unknown): Promise<void> {
    await this.deps.runs.ensureLoaded().catch(() => undefined);
    const all = this.deps.runs.all.filter((r) => r.state !== null);
    let dirs = dirsOf(selected);
    if (dirs.length < 2) {
      const preselected = new Set([...dirsOf(arg), ...dirs]);
      if (all.length === 0) {
        void this.window.showInformationMessage('Overbrainer: no run to compare.');
        return;
      }
      const picks = await this.window.showQuickPick(
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
      void this.window.showWarningMessage(
        `Overbrainer: compare at most ${MAX_COMPARE_RUNS} runs at once; showing the first ${MAX_COMPARE_RUNS}.`,
      );
      dirs = dirs.slice(0, MAX_COMPARE_RUNS);
    }
    const ids = dirs.map((d) => path.basename(d));
    const panel = this.window.createWebviewPanel(
      RUN_VIEW_TYPE,
      `Compare ${ids.join(', ')}`,
      this.deps.host.viewColumn.active,
      this.webviewOptions(),
    );
    this.attach(panel, { mode: 'compare', dirs });
  }

  // ------------------------------------------------------------ panels

  private webviewOptions(): vscode.WebviewPanelOptions & vscode.WebviewOptions {
    return {
      enableScripts: true,
      // The page only loads the bundle and its styles from dist/.
      localResourceRoots: [this.deps.host.joinUri(this.deps.extensionUri, 'dist')],
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
    const { host, extensionUri, clock, log, runs } = this.deps;
    panel.iconPath = host.joinUri(extensionUri, 'media', 'overbrainer.svg');
    panel.webview.html = pageHtml(panel.webview, (name) =>
      host.joinUri(extensionUri, 'dist', name),
    );
    const act = (action: RunAction, run: RunSummary) => this.act(action, run);
    const chartPrefs = {
      get: () => parseChartPrefs(this.deps.chartPrefs?.get() ?? this.chartPrefs),
      set: (prefs: ChartPrefs) => {
        this.chartPrefs = prefs;
        this.deps.chartPrefs?.set(prefs);
      },
    };
    const panelHost = new RunPanelHost(
      { clock, log, runs, data: this.data, act, chartPrefs },
      panel,
      state,
    );
    this.panels.add(panelHost);
    panel.onDidDispose(() => {
      this.panels.delete(panelHost);
      panelHost.dispose();
    });
  }

  private onEvent(event: CoreEvent): void {
    const change = this.data.onEvent(event);
    if (change === null) return;
    for (const panel of this.panels) {
      if (change.kind === 'series') panel.seriesChanged(change.runId);
      else if (panel.shows(change.runId)) panel.sendStatus();
    }
  }

  /** A button of the page: the existing command, with the run's directory as its argument. */
  private async act(action: RunAction, run: RunSummary): Promise<void> {
    const { host } = this.deps;
    if (action === 'openOutput') {
      const output = host.fileUri(path.join(run.dir, 'output'));
      await host.commands.executeCommand('revealInExplorer', output);
      return;
    }
    await host.commands.executeCommand(COMMAND_OF[action], { dir: run.dir });
  }

  dispose(): void {
    for (const sub of this.subs) sub.dispose();
    for (const panel of [...this.panels]) panel.panel.dispose();
    this.panels.clear();
  }
}

/** The run directories of a tree selection (items with a `dir`). */
function dirsOf(value: unknown): string[] {
  return (Array.isArray(value) ? value : [value])
    .map((v) =>
      typeof v === 'object' && v !== null && typeof (v as { dir?: unknown }).dir === 'string'
        ? (v as { dir: string }).dir
        : null,
    )
    .filter((d): d is string => d !== null);
}

/** The run directory of Train's `{ dir, openOnTrain: true }`; null for any other argument. */
function openedOnTrain(arg: unknown): string | null {
  if (typeof arg !== 'object' || arg === null) return null;
  const a = arg as { dir?: unknown; openOnTrain?: unknown };
  return a.openOnTrain === true && typeof a.dir === 'string' ? a.dir : null;
}
