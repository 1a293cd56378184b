/**
 * A transfer's `transfer` events on the core bus: `start` at its first report, `progress` at most
 * every {@link TRANSFER_REPORT_MS} in between, then `done` (with the average rate) or `failed`.
 * Rate and time left come from one {@link RateMeter} over the injected clock.
 */
import type { Clock } from './clock';
import type { EventBus, TransferDirection, TransferProgress } from './events';
import { TRANSFER_REPORT_MS } from './timing';
import { RateMeter } from './transferRate';

/** What a transfer knows of itself at one moment (totals null while unknown). */
export interface TransferCounts {
  bytesDone: number;
  bytesTotal: number | null;
  filesDone: number;
  filesTotal: number | null;
  /** Every byte went; the hashes of the other side are awaited (published once, at once). */
  checking?: boolean;
}

export type TransferCallback = (counts: TransferCounts) => void;

export class TransferReporter {
  private readonly meter = new RateMeter();
  private counts: TransferCounts | null = null;
  private lastPublishMs = -Infinity;
  private ended = false;
  private checking = false;

  constructor(
    private readonly bus: EventBus,
    private readonly clock: Clock,
    private readonly runId: string,
    private readonly direction: TransferDirection,
    private readonly intervalMs = TRANSFER_REPORT_MS,
  ) {}

  /** A report of the transfer (the first one starts it). */
  readonly report: TransferCallback = (counts) => {
    if (this.ended) return;
    const nowMs = this.clock.nowMs();
    const first = this.counts === null;
    const { checking, ...rest } = counts;
    this.counts = rest;
    this.meter.sample(nowMs, counts.bytesDone);
    if (first) {
      this.publish('start', nowMs);
    } else if (checking === true && !this.checking) {
      this.checking = true;
      this.publish('checking', nowMs);
    } else if (!this.checking && nowMs - this.lastPublishMs >= this.intervalMs) {
      this.publish('progress', nowMs);
    }
  };

  /**
   * The end: `done` with `final` counts (those of the last report when absent), or `failed`.
   * Nothing when nothing was reported (the transfer never started); once only.
   */
  end(ok: boolean, final?: TransferCounts): void {
    if (this.ended || (this.counts === null && final === undefined)) return;
    this.ended = true;
    const nowMs = this.clock.nowMs();
    if (this.counts === null) this.meter.sample(nowMs, 0);
    this.counts = final ? { ...final } : this.counts;
    this.publish(ok ? 'done' : 'failed', nowMs);
  }

  /** `action` given this reporter's callback; its end reported however it ends. */
  async around<T>(
    action: (report: TransferCallback) => Promise<T>,
    final?: (result: T) => TransferCounts | undefined,
  ): Promise<T> {
    try {
      const result = await action(this.report);
      this.end(true, final?.(result));
      return result;
    } catch (error) {
      this.end(false);
      throw error;
    }
  }

  private publish(phase: TransferProgress['phase'], nowMs: number): void {
    const counts = this.counts!;
    this.lastPublishMs = nowMs;
    // A total that turned out low (a file grew meanwhile) never shows more done than in all.
    const bytesTotal =
      counts.bytesTotal === null ? null : Math.max(counts.bytesTotal, counts.bytesDone);
    const done = phase === 'done';
    this.bus.publish({
      type: 'transfer',
      runId: this.runId,
      direction: this.direction,
      phase,
      bytesDone: counts.bytesDone,
      filesDone: counts.filesDone,
      filesTotal: counts.filesTotal,
      bytesTotal,
      rateBytesPerS: done
        ? this.meter.averageBytesPerS(nowMs, counts.bytesDone)
        : this.meter.rateBytesPerS(),
      etaMs: done
        ? 0
        : phase === 'failed' || phase === 'checking'
          ? null
          : this.meter.etaMs(bytesTotal),
      elapsedMs: this.meter.elapsedMs(nowMs),
    });
  }
}
