import type { CoreEvent } from '../../core/events';
import { attach } from '../runs/following';
import type { NotifyAction } from '../runs/notifyModel';
import { openOutput } from './outputCommands';
import { keep, removePod } from '../pods/podCommands';
import { resume } from './stopCommands';
import { transferMessage } from '../runs/transferModel';
import { podText, type UiContext } from '../uiContext';

/**
 * Turns core events into the output channel's lines, view refreshes, the retrieval progress and
 * notifications (whose buttons `act` runs).
 */
export class CoreEventsView {
  /** Runs whose pod answered SSH: their pod log no longer goes to the output channel. */
  private readonly booted = new Set<string>();
  /** The retrieval notification of each run whose results are coming home: its message. */
  private readonly retrievals = new Map<string, (message: string) => void>();

  constructor(private readonly ctx: UiContext) {}

  onEvent(event: CoreEvent): void {
    const { ctx } = this;
    const { log } = ctx;
    if (event.type === 'metric') {
      const f = ctx.followed.get(event.runId);
      if (f) {
        f.pace.add(event.metric);
        f.lastMetricMs = ctx.clock.nowMs();
      }
    }
    if (event.type === 'jobStatus' && event.status.kind !== 'running') {
      this.showRetrieval(event.runId);
    }
    if (event.type === 'transfer' && event.direction === 'retrieve') {
      const message = transferMessage(event);
      if (message !== null) this.retrievals.get(event.runId)?.(message);
    }
    if (event.type === 'pod') log.info(`${event.runId}: ${podText(event)}`);
    // The pod's boot log (already redacted by the core), until its pod answers SSH.
    if (event.type === 'pod' && event.status.kind === 'ready') this.booted.add(event.runId);
    if (event.type === 'podLog' && !this.booted.has(event.runId))
      log.info(`${event.runId} pod ${event.source}: ${event.line}`);
    if (event.type === 'runState') {
      log.info(`Run ${event.runId} ${event.state}${event.message ? `: ${event.message}` : ''}`);
      ctx.refreshViews();
    }
    if (event.type === 'pod') ctx.refreshViews();
    if (event.type === 'warning') log.warn(event.message);
    log.coreEvent(event);
    // A run's end is notified once its flow returned (finish), with the flow's error and hint
    // when it failed: the runState event alone would say the same thing twice.
    if (event.type !== 'runState') ctx.notify(event);
  }

  /**
   * The job of a followed run ended: its results are retrieved and its pod ended under a
   * progress until the flow returns. Not cancellable: retrieval and the pod's end are shielded
   * (stopping them halfway could lose results or leave a pod billing), and the watchdog deletes
   * nothing of a job that ended while they run.
   */
  private showRetrieval(runId: string): void {
    const f = this.ctx.followed.get(runId);
    if (f === undefined || f.retrieving !== null) return;
    const done = new Promise<void>((resolve) => (f.retrieving = resolve));
    void this.ctx.window.withProgress(
      {
        location: this.ctx.host.progress.notification,
        title: `Overbrainer: retrieving the results of ${runId}`,
        cancellable: false,
      },
      (progress) => {
        this.retrievals.set(runId, (message) => progress.report({ message }));
        return done.finally(() => this.retrievals.delete(runId));
      },
    );
  }
}

/** What a notification's button does. */
export async function act(
  ctx: UiContext,
  action: NotifyAction | undefined,
  runId: string | null,
): Promise<void> {
  if (action === 'Show Pods') {
    await ctx.host.commands.executeCommand('overbrainer.showPods');
    return;
  }
  if (action === undefined || runId === null) return;
  await ctx.runs.refresh().catch(() => undefined);
  const run = ctx.runs.all.find((r) => r.id === runId);
  const arg = run ?? undefined;
  switch (action) {
    case 'Keep Pod':
      return keep(ctx, arg, true);
    case 'Open Run':
      // The command, so the run's panel (the webview) opens however it is registered.
      await ctx.host.commands.executeCommand('overbrainer.showRun', arg);
      return;
    case 'Attach':
      return attach(ctx, arg);
    case 'Remove Pod':
      return removePod(ctx, arg);
    case 'Open Output':
      return openOutput(ctx, run);
    case 'Resume Run':
      return resume(ctx, arg);
  }
}
