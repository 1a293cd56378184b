import * as vscode from 'vscode';
import { showLogs } from '../runs/runLogs';
import type { Clock } from '../../core/clock';
import type { EventBus } from '../../core/events';
import type { DeadlineView } from '../../core/pod/lease';
import type { ApiKeyStore } from '../apiKey';
import { createConfig, pickDataCenters, pickGpuTypes, pickVolume } from './configCommands';
import { act, CoreEventsView } from './coreEvents';
import { attach, resumeFollowing } from '../runs/following';
import type { UiHost } from '../host';
import type { Log } from '../log';
import { openOutput, showRun } from './outputCommands';
import { keep, openSshTerminal, removePod } from '../pods/podCommands';
import type { RunsModel, RunSummary } from '../runs/runsModel';
import { runSpendLines } from '../../core/runs/spend';
import { etaFromNow, statusForPod, type StatusView } from '../runs/statusModel';
import { cancel, resume, stopRun } from './stopCommands';
import { train } from './trainCommand';
import { TransferModel, transferStatusView } from '../runs/transferModel';
import { UiContext } from '../uiContext';
import { vscodeHost } from '../vscodeHost';
import { WelcomeContext, type Settling } from '../welcome';
import type { WorkspaceSession } from '../workspace';

/**
 * Wires the command families (trainCommand, following, stopCommands, podCommands,
 * configCommands, outputCommands) to one UiContext, turns core events into the status bar,
 * notifications and view refreshes (coreEvents), and owns the status bar item. Deactivation
 * (dispose) aborts every follow and deletes nothing.
 */
export class Controller implements vscode.Disposable {
  readonly ctx: UiContext;
  /** The welcome views' context keys (Loading…, Create or Train, the API key step). */
  readonly welcome: WelcomeContext;
  private readonly statusItem: vscode.StatusBarItem;
  private readonly ticker: ReturnType<typeof setInterval>;
  private readonly subs: { dispose(): void }[] = [];
  /** Transfers under way: the status bar shows one while it lasts. */
  private readonly transfers = new TransferModel();

  constructor(
    bus: EventBus,
    clock: Clock,
    log: Log,
    apiKeys: ApiKeyStore,
    runs: RunsModel,
    pods: { refresh(): Promise<void>; isLoaded: boolean } & Settling,
    host: UiHost = vscodeHost(),
  ) {
    this.ctx = new UiContext({ host, bus, clock, log, apiKeys, runs, pods });
    this.ctx.onAction = (action, runId) => act(this.ctx, action, runId);
    this.ctx.onFollowedChange = () => this.updateStatus();
    this.welcome = new WelcomeContext(apiKeys, runs, pods);
    this.statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
    this.statusItem.command = 'overbrainer.showRun';
    const events = new CoreEventsView(this.ctx);
    this.subs.push(bus.on((event) => events.onEvent(event)));
    this.subs.push(
      bus.on((event) => {
        if (this.transfers.onEvent(event)) this.updateStatus();
      }),
    );
    this.ticker = setInterval(() => this.updateStatus(), 1000);
  }

  /** A fresh session per command: the key and settings are read each time. */
  session(folder: vscode.WorkspaceFolder): Promise<WorkspaceSession> {
    return this.ctx.session(folder);
  }

  /** The run from a tree item, else a QuickPick of the runs `applies` to. */
  pickRun(
    arg: unknown,
    applies: (run: RunSummary) => boolean,
    what: string,
  ): Promise<RunSummary | undefined> {
    return this.ctx.pickRun(arg, applies, what);
  }

  /** Shows an error with its hint; a missing or refused key offers "Set Runpod API Key". */
  showError(prefix: string, error: unknown): Promise<void> {
    return this.ctx.showError(prefix, error);
  }

  train = (): Promise<void> => train(this.ctx);
  attach = (arg: unknown, quiet = false): Promise<void> => attach(this.ctx, arg, quiet);
  cancel = (arg: unknown): Promise<void> => cancel(this.ctx, arg);
  stopRun = (arg: unknown): Promise<void> => stopRun(this.ctx, arg);
  resume = (arg: unknown): Promise<void> => resume(this.ctx, arg);
  keep = (arg: unknown, kept: boolean): Promise<void> => keep(this.ctx, arg, kept);
  removePod = (arg: unknown): Promise<void> => removePod(this.ctx, arg);
  openSshTerminal = (arg: unknown): Promise<void> => openSshTerminal(this.ctx, arg);
  createConfig = (): Promise<void> => createConfig(this.ctx);
  pickGpuTypes = (): Promise<void> => pickGpuTypes(this.ctx);
  pickDataCenters = (): Promise<void> => pickDataCenters(this.ctx);
  pickVolume = (): Promise<void> => pickVolume(this.ctx);
  showRun = (arg: unknown): Promise<void> => showRun(this.ctx, arg);
  showLogs = (arg: unknown): Promise<void> => showLogs(this.ctx, arg);
  openOutput = (run: RunSummary | undefined): Promise<void> => openOutput(this.ctx, run);
  /** Follows again the runs this workspace left `running` (activation). */
  resumeFollowing = (): Promise<void> => resumeFollowing(this.ctx);

  private updateStatus(): void {
    const enabled = vscode.workspace
      .getConfiguration('overbrainer')
      .get<boolean>('statusBar.enabled', true);
    const { current, followed, clock } = this.ctx;
    const f = current === null ? undefined : followed.get(current);
    if (!enabled || f === undefined) {
      this.statusItem.hide();
      return;
    }
    const transfer = this.transfers.of(f.runId);
    if (transfer !== null) {
      this.show(transferStatusView(f.runId, transfer));
      return;
    }
    const now = clock.nowMs();
    let pod: DeadlineView | null = null;
    try {
      pod = f.session.store.loadPod(f.runId);
    } catch {
      // A pod record mid-write: keep the countdown without a deadline this second.
    }
    const etaMs = etaFromNow(f.pace.eta(), now - f.lastMetricMs);
    const spend = runSpendLines(f.session.store, f.runId, null, now, { etaMs });
    this.show(statusForPod(f.runId, pod, now, etaMs, spend));
  }

  private show(view: StatusView): void {
    this.statusItem.text = view.text;
    this.statusItem.tooltip = view.tooltip;
    this.statusItem.backgroundColor =
      view.background === 'none'
        ? undefined
        : new vscode.ThemeColor(
            view.background === 'error'
              ? 'statusBarItem.errorBackground'
              : 'statusBarItem.warningBackground',
          );
    this.statusItem.show();
  }

  dispose(): void {
    this.ctx.closing.abort();
    clearInterval(this.ticker);
    for (const sub of this.subs) sub.dispose();
    // Stop following only: aborting after the job started never deletes a pod.
    for (const f of this.ctx.followed.values()) {
      f.abort.abort(Object.assign(new Error('VS Code window closing'), { name: 'AbortError' }));
    }
    this.statusItem.dispose();
    this.welcome.dispose();
  }
}
