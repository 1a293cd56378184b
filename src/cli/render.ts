/**
 * Renders the core's events as the CLI's stderr lines: `pod: …` for the
 * pod's life, `train: …` for metrics (throttled) and job statuses,
 * `warning: …` for warnings, and log lines at info and above (debug too with
 * OVERBRAINER_LOG=debug). It also tracks which pods are being deleted, so a
 * second Ctrl-C can say why it is ignored.
 */
import type { Clock } from '../core/clock';
import type { Disposable } from '../core/disposable';
import type { CoreEvent, EventBus } from '../core/events';
import { TRANSFER_LIVE_AFTER_MS } from '../core/timing';
import { MetricLineThrottle } from '../core/flow/records';
import { transferDoneLine, transferLiveLine } from '../core/transferFormat';
import { jobStatusWords, podLine } from './format';

export interface RenderOptions {
  clock: Clock;
  /** Show debug (and trace) log lines. */
  debug: boolean;
  /**
   * On a terminal: replaces the status block redrawn in place below the lines (./liveArea.ts).
   * Absent (not a terminal): the boot log comes as plain `pod log: …` lines, and a transfer
   * only as its final line.
   */
  status?: (lines: string[]) => void;
}

/** How many of the boot log's last lines a terminal shows while the pod provisions. */
export const BOOT_LOG_LINES = 6;

export class CliRenderer implements Disposable {
  private readonly throttle: MetricLineThrottle;
  private readonly subscription: Disposable;
  /** Pods whose delete was sent and not yet confirmed. */
  readonly deleting = new Set<string>();
  /** Pods that answered SSH (or ended): their log is no longer shown. */
  private readonly booted = new Set<string>();
  /** The pod whose log each run showed last. */
  private readonly podOfRun = new Map<string, string>();
  /** The last boot log lines shown in the status block, while one provisions. */
  private bootLines: string[] = [];
  /** The header above them (which pod boots). */
  private bootHeader = '';
  /** The live line of each transfer under way that has lasted long enough to show one. */
  private readonly transfers = new Map<string, string>();
  /** A wait counted down (Runpod's rate limit), below the rest. */
  private waitLine: string | null = null;

  constructor(
    bus: EventBus,
    private readonly write: (line: string) => void,
    private readonly options: RenderOptions,
  ) {
    this.throttle = new MetricLineThrottle(options.clock);
    this.subscription = bus.on((event) => this.render(event));
  }

  /** The line for `event`, or null when it shows nothing. Also tracks deletes. */
  lineFor(event: CoreEvent): string | null {
    switch (event.type) {
      case 'podLog': {
        // The boot, until the pod answers SSH; all of it is kept in runs/<id>/.pod/pod.log
        // (`overbrainer runs logs RUN_ID --pod` shows it). Lines come redacted from the core.
        if (this.booted.has(event.podId)) return null;
        this.podOfRun.set(event.runId, event.podId);
        const line = `${event.source}: ${event.line}`;
        if (this.options.status === undefined) return `pod log: ${line}`;
        this.bootLines = [...this.bootLines, line].slice(-BOOT_LOG_LINES);
        this.bootHeader = `pod ${event.podId} is booting; the last lines of its log:`;
        this.redraw();
        return null;
      }
      case 'transfer':
        return this.transferLine(event);
      case 'pod':
        if (
          event.status.kind !== 'creating' &&
          event.status.kind !== 'created' &&
          event.status.kind !== 'unavailable'
        )
          this.endBoot(event.status.podId);
        if (event.status.kind === 'deleting') this.deleting.add(event.status.podId);
        if (event.status.kind === 'deleted') this.deleting.delete(event.status.podId);
        return `pod: ${podLine(event.status)}`;
      case 'metric': {
        const line = this.throttle.line(event.metric);
        return line === null ? null : `train: ${line}`;
      }
      case 'jobStatus': {
        this.endBoot(this.podOfRun.get(event.runId));
        // The last step held back by the throttle goes first: the job's end shows where it stopped.
        const held = event.status.kind === 'running' ? null : this.throttle.flush();
        const status = `train: job ${jobStatusWords(event.status)}`;
        return held === null ? status : `train: ${held}\n${status}`;
      }
      case 'runWatched':
        return `train: following run ${event.runId} again`;
      case 'billed':
        // `overbrainer spend` and `runs show` list the bill beside the estimate.
        return null;
      case 'gpu':
        // Every 10 s: `runs show` prints the newest; a GPU left idle comes as a warning.
        return null;
      case 'runState':
        if (event.state !== 'preparing') this.endBoot(this.podOfRun.get(event.runId));
        return null;
      case 'warning':
        // A warning of several lines (the pods nothing will delete, one each): each its own.
        return event.message
          .split('\n')
          .map((line) => `warning: ${line}`)
          .join('\n');
      case 'log':
        switch (event.level) {
          case 'trace':
          case 'debug':
            return this.options.debug ? `debug: ${event.message}` : null;
          case 'info':
            return event.message;
          case 'warn':
            return `warning: ${event.message}`;
          case 'error':
            return `error: ${event.message}`;
        }
    }
  }

  /** The boot of pod `podId` is over: its log leaves the status block and is shown no more. */
  private endBoot(podId: string | undefined): void {
    if (podId === undefined) return;
    this.booted.add(podId);
    if (this.bootLines.length === 0) return;
    this.bootLines = [];
    this.redraw();
  }

  /**
   * A transfer on a terminal: one line redrawn in place once it has lasted
   * TRANSFER_LIVE_AFTER_MS (a shorter one shows its final line alone). Anywhere: the final line
   * with the total, the time and the average rate (a checkpoint's copy says so in its own log
   * line). A failed transfer's line goes; its error is told by whoever it failed.
   */
  private transferLine(event: CoreEvent & { type: 'transfer' }): string | null {
    const key = `${event.runId} ${event.direction}`;
    if (event.phase === 'start' || event.phase === 'progress' || event.phase === 'checking') {
      const shown = this.transfers.has(key) || event.elapsedMs >= TRANSFER_LIVE_AFTER_MS;
      if (this.options.status === undefined || !shown) return null;
      this.transfers.set(key, transferLiveLine(event));
      this.redraw();
      return null;
    }
    if (this.transfers.delete(key)) this.redraw();
    if (event.phase === 'failed' || event.direction === 'checkpoint') return null;
    return event.filesDone === 0 && event.bytesDone === 0 ? null : transferDoneLine(event);
  }

  /** On a terminal: shows `line` (a wait counted down) below the status block; null removes it. */
  waiting(line: string | null): void {
    if (this.options.status === undefined || line === this.waitLine) return;
    this.waitLine = line;
    this.redraw();
  }

  /** The status block: the boot log while a pod provisions, the transfers' lines, a wait. */
  private redraw(): void {
    const boot =
      this.bootLines.length === 0 ? [] : [this.bootHeader, ...this.bootLines.map((l) => `  ${l}`)];
    const wait = this.waitLine === null ? [] : [this.waitLine];
    this.options.status?.([...boot, ...this.transfers.values(), ...wait]);
  }

  /** Shows the last metric line the throttle held back, if any. */
  flush(): void {
    const held = this.throttle.flush();
    if (held !== null) this.write(`train: ${held}`);
  }

  dispose(): void {
    this.subscription.dispose();
  }

  private render(event: CoreEvent): void {
    const line = this.lineFor(event);
    if (line !== null) this.write(line);
  }
}
