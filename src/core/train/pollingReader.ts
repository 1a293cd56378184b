/**
 * The polling way of reading a job's metrics (the overbrainer CLI's design), kept as the
 * benchmark's baseline beside the streamed follow (./follow.ts).
 */
import type { Clock } from '../clock';
import type { EventBus } from '../events';
import type { Executor } from '../exec/executor';
import type { Timing } from '../timing';
import { METRICS_FILE, remotePath, shQuote } from './job';
import { LineFramer, parseFramedLine, READ_LIMIT_BYTES } from './metrics';

/** `tail -c +N | head -c LIMIT`: one bounded poll (the benchmark's baseline). */
export function pollCommand(path: string, offset: number, limitBytes = READ_LIMIT_BYTES): string {
  return `tail -c +${offset + 1} ${shQuote(path)} 2>/dev/null | head -c ${limitBytes}`;
}

export interface PollingMetricsReaderOptions {
  executor: Executor;
  runId: string;
  runDir: string;
  bus: EventBus;
  clock: Clock;
  timing: Pick<Timing, 'statusPollMs'>;
  fromOffset?: number;
}

/**
 * The polling way, kept as the benchmark's baseline: every `statusPollMs`,
 * one `tail -c +N | head -c 1MiB` of the file from the last complete line,
 * its complete lines published. No status, no drain: only the reading.
 */
export class PollingMetricsReader {
  private readonly framer: LineFramer;
  private readonly path: string;
  private published = 0;

  constructor(private readonly options: PollingMetricsReaderOptions) {
    this.framer = new LineFramer(options.fromOffset ?? 0);
    this.path = remotePath(options.runDir, METRICS_FILE);
  }

  get offset(): number {
    return this.framer.offset;
  }

  get metricCount(): number {
    return this.published;
  }

  /** One poll; the number of metrics it published. */
  async pollOnce(signal?: AbortSignal): Promise<number> {
    const result = await this.options.executor.exec(pollCommand(this.path, this.framer.offset), {
      signal,
      maxOutputBytes: READ_LIMIT_BYTES,
    });
    const before = this.published;
    for (const line of this.framer.push(result.stdout)) {
      const parsed = parseFramedLine(line);
      if (parsed.kind !== 'metric') continue;
      this.published++;
      this.options.bus.publish({
        type: 'metric',
        runId: this.options.runId,
        metric: parsed.metric,
      });
    }
    // The next poll starts again at the last complete line.
    this.framer.dropPending();
    return this.published - before;
  }

  /** Polls until `signal` aborts (then rejects with an AbortError). */
  async run(signal: AbortSignal): Promise<never> {
    for (;;) {
      await this.pollOnce(signal);
      await this.options.clock.sleep(this.options.timing.statusPollMs, signal);
    }
  }
}
