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
import { MetricLineThrottle } from '../core/train/render';
import { jobStatusWords, podLine } from './format';

export interface RenderOptions {
  clock: Clock;
  /** Show debug (and trace) log lines. */
  debug: boolean;
}

export class CliRenderer implements Disposable {
  private readonly throttle: MetricLineThrottle;
  private readonly subscription: Disposable;
  /** Pods whose delete was sent and not yet confirmed. */
  readonly deleting = new Set<string>();

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
      case 'podLog':
        // Kept in runs/<id>/.pod/pod.log; `overbrainer runs logs RUN_ID --pod` shows it.
        return null;
      case 'pod':
        if (event.status.kind === 'deleting') this.deleting.add(event.status.podId);
        if (event.status.kind === 'deleted') this.deleting.delete(event.status.podId);
        return `pod: ${podLine(event.status)}`;
      case 'metric': {
        const line = this.throttle.line(event.metric);
        return line === null ? null : `train: ${line}`;
      }
      case 'jobStatus': {
        // The last step held back by the throttle goes first: the job's end shows where it stopped.
        const held = event.status.kind === 'running' ? null : this.throttle.flush();
        const status = `train: job ${jobStatusWords(event.status)}`;
        return held === null ? status : `train: ${held}\n${status}`;
      }
      case 'runWatched':
        return `train: following run ${event.runId} again`;
      case 'runState':
        return null;
      case 'warning':
        return `warning: ${event.message}`;
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
