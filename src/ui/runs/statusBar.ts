import * as vscode from 'vscode';
import type { Clock } from '../../core/clock';
import type { EventBus } from '../../core/events';
import { type DeadlineView } from '../../core/flow/records';
import { runSpendLines } from '../../core/flow/spend';
import { describeError } from '../../core/errors';
import { every } from '../ticker';
import type { UiContext } from '../uiContext';
import { etaFromNow, followedDeadline, statusForPod, type StatusView } from './statusModel';
import { TransferModel, transferStatusView } from './transferModel';

/** How often the countdown is redrawn. */
export const STATUS_BAR_TICK_MS = 1000;

/**
 * The status bar item of the followed run: its countdown to the watchdog's deadline (a cluster's:
 * the earliest of its nodes'), its ETA and spend (a cluster's: N × the member rate), or a
 * transfer under way in its place; redrawn every second and when the followed runs change.
 * Clicking it shows the run.
 */
export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private readonly ticker: { dispose(): void };
  private readonly subs: { dispose(): void }[] = [];
  /** Transfers under way: the status bar shows one while it lasts. */
  private readonly transfers = new TransferModel();

  constructor(
    private readonly ctx: UiContext,
    bus: EventBus,
    private readonly clock: Clock,
  ) {
    this.item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
    this.subs.push(
      ctx.onFollowedChange(() => this.update()),
      bus.on((event) => {
        if (this.transfers.onEvent(event)) this.update();
      }),
    );
    this.ticker = every(
      clock,
      STATUS_BAR_TICK_MS,
      () => this.update(),
      (error) => ctx.log.warn(`The status bar could not be redrawn: ${describeError(error)}`),
    );
  }

  private update(): void {
    const enabled = vscode.workspace
      .getConfiguration('overbrainer')
      .get<boolean>('statusBar.enabled', true);
    const { current, followed } = this.ctx;
    const f = current === null ? undefined : followed.get(current);
    if (!enabled || f === undefined) {
      this.item.hide();
      return;
    }
    // The click shows the run the item shows, live or just ended (Show Run without an argument
    // opens only a run still live).
    this.item.command = {
      title: 'Show Run',
      command: 'overbrainer.showRun',
      arguments: [{ dir: f.session.store.runDir(f.runId) }],
    };
    const transfer = this.transfers.of(f.runId);
    if (transfer !== null) {
      this.show(transferStatusView(f.runId, transfer));
      return;
    }
    const now = this.clock.nowMs();
    // Its pod's deadline, or for a run on a cluster the earliest of its nodes'.
    let limit: { deadline: DeadlineView | null; nodes?: number } = { deadline: null };
    try {
      limit = followedDeadline(f.session.store, f.runId);
    } catch {
      // A record mid-write: keep the countdown without a deadline this second.
    }
    const etaMs = etaFromNow(f.pace.eta(), now - f.lastMetricMs);
    const spend = runSpendLines(f.session.store, f.runId, null, now, { etaMs });
    this.show(statusForPod(f.runId, limit.deadline, now, etaMs, spend, limit.nodes));
  }

  private show(view: StatusView): void {
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.backgroundColor =
      view.background === 'none'
        ? undefined
        : new vscode.ThemeColor(
            view.background === 'error'
              ? 'statusBarItem.errorBackground'
              : 'statusBarItem.warningBackground',
          );
    this.item.show();
  }

  dispose(): void {
    this.ticker.dispose();
    for (const sub of this.subs) sub.dispose();
    this.item.dispose();
  }
}
