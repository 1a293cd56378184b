/**
 * The API calls of a read-only command (`pod ls`, `pod gpus`, the catalog listings,
 * `train --dry-run`, `spend`'s bills, `runs logs --pod` from the API): nothing depends on them, so
 * they never wait out what the lifecycle's calls do.
 * - Runpod's rate limit is waited out and the call sent again, as on the lifecycle's paths, up to
 *   `readOnlyRateLimitWaitMs` (30 s) in all for the command: each wait is said on stderr, and on
 *   a terminal counted down in place; a longer wait fails at once, saying when to run it again.
 * - A refused connection fails at once; no answer at all fails after `readOnlyLimitMs` (8 s,
 *   the rate-limit waits not counted), naming the base URL either way.
 * The limits themselves are the client's (src/core/runpod/callLimits.ts): one retry machinery.
 */
import { isAbortError, type Clock } from '../core/clock';
import { describeError, HintedError } from '../core/errors';
import { type RunpodClient } from '../core/flow';
import { CallLimits, type RateLimitWait, isApiError } from '../core/flow/pods';
import type { Timing } from '../core/timing';

const UNREACHABLE_HINT =
  'Check the network and OVERBRAINER_RUNPOD__BASE_URL (unset: the public API), then run it again. Running pods are not affected: their watchdogs keep their own deadlines.';

/**
 * A read-only command whose API did not answer in time, or could not be reached at all (a
 * refused connection): nothing changed anywhere.
 */
export class ReadOnlyTimeout extends HintedError<'unreachable'> {
  constructor(message: string) {
    super('unreachable', message, UNREACHABLE_HINT);
    this.name = 'ReadOnlyTimeout';
  }
}

/** Runpod's rate limit asked for a longer wait than a read-only command waits. */
export class ReadOnlyRateLimited extends HintedError<'rate_limited'> {
  constructor(message: string, hint: string) {
    super('rate_limited', message, hint);
    this.name = 'ReadOnlyRateLimited';
  }
}

/** What a read-only scope needs of the session. */
export interface ReadOnlyHost {
  clock: Clock;
  timing: Pick<Timing, 'readOnlyLimitMs' | 'readOnlyRateLimitWaitMs'>;
  /** One stderr line. */
  say(line: string): void;
  /** On a terminal: the line counted down in place (null clears it). Absent: plain lines only. */
  countdown?: (line: string | null) => void;
}

/** The read-only calls of one command: their rate-limit patience is shared by all of them. */
export class ReadOnlyCalls {
  readonly limits: CallLimits;
  /** Moves the no-answer deadline of the call in progress by a rate-limit wait. */
  private extend: ((ms: number) => void) | null = null;
  /** Stops the countdown on a terminal (a newer wait, or the calls' end). */
  private counting = new AbortController();

  constructor(private readonly host: ReadOnlyHost) {
    this.limits = new CallLimits(host.timing.readOnlyRateLimitWaitMs, (wait) => this.told(wait));
  }

  /**
   * Runs `calls` on `client` with the limits, within the no-answer limit (moved on by every
   * rate-limit wait). `onAnswer`: `calls` may call it once an answer came that it keeps reading
   * (a log stream): the no-answer limit is then over.
   */
  async run<T>(
    client: RunpodClient,
    calls: (api: RunpodClient, signal: AbortSignal, answered: () => void) => Promise<T>,
  ): Promise<T> {
    const { clock, timing } = this.host;
    const limitMs = timing.readOnlyLimitMs;
    const limit = new AbortController();
    let timer = new AbortController();
    let deadlineMs = clock.nowMs() + limitMs;
    const arm = (): void => {
      timer.abort();
      timer = new AbortController();
      void clock.sleep(Math.max(0, deadlineMs - clock.nowMs()), timer.signal).then(
        () => limit.abort(),
        () => undefined,
      );
    };
    arm();
    this.extend = (ms) => {
      deadlineMs += ms;
      arm();
    };
    const timedOut = (error?: unknown): ReadOnlyTimeout =>
      new ReadOnlyTimeout(
        `the Runpod API at ${client.baseUrl} did not answer within ${Math.round(limitMs / 1000)} s` +
          (error === undefined || isAbortError(error) ? '' : ` (${describeError(error)})`),
      );
    try {
      const result = await calls(client.withLimits(this.limits), limit.signal, () => timer.abort());
      // Calls that keep going without an answer (a bill's look, a log stream) end on the limit.
      if (limit.signal.aborted) throw timedOut();
      return result;
    } catch (error) {
      if (error instanceof ReadOnlyTimeout) throw error;
      if (limit.signal.aborted) throw timedOut(error);
      if (isApiError(error, 'rate_limited')) throw this.rateLimited(client, error.retryAfterMs);
      // The transport's own words name the base URL ("could not reach the Runpod API at …").
      if (isApiError(error, 'transport')) throw new ReadOnlyTimeout(error.message);
      throw error;
    } finally {
      timer.abort();
      this.extend = null;
      this.counting.abort();
      this.host.countdown?.(null);
    }
  }

  /** A rate-limit wait is about to start: said, counted down on a terminal, the limit moved. */
  private told(wait: RateLimitWait): void {
    this.extend?.(wait.waitMs);
    const seconds = Math.max(1, Math.ceil(wait.waitMs / 1000));
    const patience = Math.round(this.limits.rateLimitWaitMs / 1000);
    this.host.say(
      `rate limit: Runpod's ${wait.what} ${wait.why}; sent again in ${seconds} s (a read-only command waits ${patience} s at most in all)`,
    );
    const countdown = this.host.countdown;
    if (countdown === undefined) return;
    this.counting.abort();
    this.counting = new AbortController();
    void this.countDown(countdown, wait, this.counting.signal).catch(() => undefined);
  }

  /** Redraws `… again in N s` on every whole second until the wait is over (or `stop`). */
  private async countDown(
    show: (line: string | null) => void,
    wait: RateLimitWait,
    stop: AbortSignal,
  ): Promise<void> {
    const { clock } = this.host;
    for (let leftMs = wait.untilMs - clock.nowMs(); leftMs > 0;) {
      show(`rate limit: ${wait.what} again in ${Math.ceil(leftMs / 1000)} s`);
      await clock.sleep(leftMs % 1000 || 1000, stop);
      leftMs = wait.untilMs - clock.nowMs();
    }
    show(null);
  }

  private rateLimited(client: RunpodClient, retryAfterMs: number | undefined): Error {
    const patience = Math.round(this.limits.rateLimitWaitMs / 1000);
    const waited = Math.round(this.limits.waitedMs / 1000);
    const after = waited === 0 ? '' : `, after ${waited} s of waiting`;
    const asked =
      retryAfterMs === undefined
        ? 'still refuses the call (429)'
        : `asks to wait ${Math.ceil(retryAfterMs / 1000)} s more`;
    const again =
      retryAfterMs === undefined
        ? 'Run it again in a minute.'
        : `Run it again after ${new Date(this.host.clock.nowMs() + retryAfterMs).toISOString().slice(11, 19)} UTC (in ${Math.ceil(retryAfterMs / 1000)} s).`;
    return new ReadOnlyRateLimited(
      `Runpod's rate limit at ${client.baseUrl} ${asked}${after}: a read-only command waits ${patience} s at most`,
      `${again} Running pods are not affected: their watchdogs keep their own deadlines.`,
    );
  }
}
