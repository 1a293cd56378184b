/**
 * The limits of a read-only command's API calls (the CLI's listings, `spend`'s bills, a pod log's
 * replay): nothing depends on their answers, so they never wait out what the lifecycle's calls do.
 * They go through the client's one retry machinery (./transport.ts), which asks these limits
 * before each wait:
 * - Runpod's rate limit (a 429's `Retry-After`, or a spent quota's reset) is waited out and the
 *   call sent again, exactly as on the lifecycle's paths, while the waits add up to at most
 *   `rateLimitWaitMs` for the whole command; each wait is told first (`onWait`: a terminal counts
 *   it down). A longer wait is not started: the call fails at once with the wait Runpod asked for.
 * - A refused connection or an unknown host (nothing answers there, and nothing will within a
 *   command's patience) is not retried: the call fails at once, naming the base URL.
 * - Every other failure (no answer, a 5xx) is retried as usual; the caller's signal bounds it
 *   (the CLI's `readOnlyLimitMs`).
 */

/** A wait for Runpod's rate limit, told before it starts. */
export interface RateLimitWait {
  /** The call that waits (`GET /pods`). */
  what: string;
  /** Why: `answered 429`, or `the quota is spent`. */
  why: string;
  waitMs: number;
  /** When the call is sent again (clock ms). */
  untilMs: number;
  /** What is left of the command's rate-limit patience after this wait. */
  leftMs: number;
}

/** Transport error codes that mean nothing answers at that address (see describeTransportError). */
const NOTHING_THERE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH']);

/** Whether a transport failure's code says nothing answers at that address: never retried here. */
export function nothingThere(code: string | undefined): boolean {
  return code !== undefined && NOTHING_THERE.has(code);
}

export class CallLimits {
  #waitedMs = 0;

  constructor(
    /** The most the command's rate-limit waits may add up to. */
    readonly rateLimitWaitMs: number,
    private readonly onWait: (wait: RateLimitWait) => void = () => undefined,
  ) {}

  /** The rate-limit waits taken so far. */
  get waitedMs(): number {
    return this.#waitedMs;
  }

  /**
   * Whether a wait of `waitMs` for Runpod's rate limit fits what is left of the patience: when it
   * does it is counted and told (before the caller sleeps); when it does not, nothing is counted.
   */
  takeWait(what: string, why: string, waitMs: number, nowMs: number): boolean {
    if (this.#waitedMs + waitMs > this.rateLimitWaitMs) return false;
    this.#waitedMs += waitMs;
    this.onWait({
      what,
      why,
      waitMs,
      untilMs: nowMs + waitMs,
      leftMs: this.rateLimitWaitMs - this.#waitedMs,
    });
    return true;
  }
}
