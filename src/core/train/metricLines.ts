/**
 * A job's metrics file read from a byte offset, its lines turned into events as they arrive: each
 * metric published (a loop that states max_steps only in its `begin` line gets it filled in, so
 * progress and an ETA too), a skipped line warned about as {@link SkipWarnings} allows, every
 * other parsed line handed to `onLine`. Its framer keeps the offset of the last complete line, so
 * a read or a stream resumes there: no line lost, none published twice.
 */
import type { EventBus, TrainMetric } from '../events';
import {
  LineFramer,
  parseFramedLine,
  SkipWarnings,
  type FramedLine,
  type ParsedLine,
} from './metrics';

export interface MetricLinesOptions {
  runId: string;
  bus: EventBus;
  /** Where in metrics.jsonl the lines start (default 0). */
  fromOffset?: number;
  /** Every parsed line that is not a metric (begin, end, stage, eval progress, skips). */
  onLine?: (line: ParsedLine) => void;
}

export class MetricLines {
  readonly framer: LineFramer;
  private readonly warnings = new SkipWarnings();
  private maxStepsFromBegin: number | null = null;
  /** Metric events published so far. */
  published = 0;

  constructor(private readonly options: MetricLinesOptions) {
    this.framer = new LineFramer(options.fromOffset ?? 0);
  }

  /** Publishes the complete lines `chunk` ends. */
  push(chunk: Buffer): void {
    for (const line of this.framer.push(chunk)) this.handle(line);
  }

  /** Publishes what is left of a finished file: its last line counts even without a newline. */
  finish(): void {
    for (const line of this.framer.finish()) this.handle(line);
  }

  private handle(line: FramedLine): void {
    const parsed = parseFramedLine(line);
    if (parsed.kind === 'metric') {
      this.publishMetric(parsed.metric);
      return;
    }
    if (parsed.kind === 'begin' && parsed.maxSteps !== null)
      this.maxStepsFromBegin = parsed.maxSteps;
    if (parsed.kind === 'skip') {
      const warning = this.warnings.note(
        parsed,
        `runs/${this.options.runId}/metrics.jsonl at byte ${line.startOffset}`,
      );
      if (warning !== null) {
        this.options.bus.publish({
          type: 'log',
          level: 'warn',
          message: `run ${this.options.runId}: ${warning}`,
        });
      }
    }
    this.options.onLine?.(parsed);
  }

  private publishMetric(metric: TrainMetric): void {
    // A loop that states max_steps only in its `begin` line still gets progress and an ETA.
    const filled =
      (metric.maxSteps === null || metric.maxSteps === undefined) && this.maxStepsFromBegin !== null
        ? { ...metric, maxSteps: this.maxStepsFromBegin }
        : metric;
    this.published++;
    this.options.bus.publish({ type: 'metric', runId: this.options.runId, metric: filled });
  }
}
