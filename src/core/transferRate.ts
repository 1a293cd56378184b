/**
 * The rate and the time left of one transfer, from its byte counts over time: an exponentially
 * weighted moving average of the rate (each stretch of time weighs by how long it lasted, so a
 * burst of reports in one millisecond does not swing it), as `rsync --info=progress2` and
 * `docker pull` smooth theirs. Pure: the caller passes the times (its injected clock).
 */

/** How far back the average mostly looks: a change of pace shows within a few seconds. */
export const RATE_TIME_CONSTANT_MS = 3_000;
/** Samples closer than this to the last one are accumulated (a rate over 1 ms is noise). */
export const RATE_MIN_STRETCH_MS = 200;

export class RateMeter {
  private lastMs: number | null = null;
  private lastBytes = 0;
  private firstMs: number | null = null;
  private firstBytes = 0;
  private ewmaBytesPerS: number | null = null;

  constructor(
    private readonly timeConstantMs = RATE_TIME_CONSTANT_MS,
    private readonly minStretchMs = RATE_MIN_STRETCH_MS,
  ) {}

  /** `bytesDone` (a running total, never decreasing) reached at `nowMs`. */
  sample(nowMs: number, bytesDone: number): void {
    if (this.lastMs === null || this.firstMs === null) {
      this.firstMs = this.lastMs = nowMs;
      this.firstBytes = this.lastBytes = bytesDone;
      return;
    }
    const stretchMs = nowMs - this.lastMs;
    if (stretchMs < this.minStretchMs) return;
    const bytesPerS = (Math.max(0, bytesDone - this.lastBytes) * 1000) / stretchMs;
    const weight = 1 - Math.exp(-stretchMs / this.timeConstantMs);
    this.ewmaBytesPerS =
      this.ewmaBytesPerS === null
        ? bytesPerS
        : this.ewmaBytesPerS + weight * (bytesPerS - this.ewmaBytesPerS);
    this.lastMs = nowMs;
    this.lastBytes = Math.max(this.lastBytes, bytesDone);
  }

  /** The smoothed rate; null until a first stretch of at least `minStretchMs` was measured. */
  rateBytesPerS(): number | null {
    return this.ewmaBytesPerS;
  }

  /** Time left to reach `bytesTotal` at the smoothed rate; null when unknown or stalled. */
  etaMs(bytesTotal: number | null): number | null {
    const rate = this.ewmaBytesPerS;
    if (bytesTotal === null || rate === null || rate <= 0) return null;
    return Math.max(0, ((bytesTotal - this.lastBytes) / rate) * 1000);
  }

  /** Bytes over the whole time since the first sample, through `nowMs`, per second; null before 1 ms. */
  averageBytesPerS(nowMs: number, bytesDone: number): number | null {
    if (this.firstMs === null || nowMs - this.firstMs <= 0) return null;
    return (Math.max(0, bytesDone - this.firstBytes) * 1000) / (nowMs - this.firstMs);
  }

  /** Time since the first sample. */
  elapsedMs(nowMs: number): number {
    return this.firstMs === null ? 0 : Math.max(0, nowMs - this.firstMs);
  }
}
