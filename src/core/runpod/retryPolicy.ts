/**
 * When a Runpod call is sent again, and after how long. Only idempotent calls are sent again on a
 * transport error, 408 or 5xx; any call on 429 (but the create, whose caller reconciles first).
 * The wait is the one Runpod asks for (`Retry-After`, or a 429's RateLimit headers), capped; else
 * base × 2^attempt up to the max, jittered ×0.5–1. And the account's quota: once an answer's
 * RateLimit headers say a window is spent, every call waits for its reset rather than draw a 429.
 */
import type { Timing } from '../timing';
import { TransportFailure, type Answer, type Outcome } from './answers';
import { rateLimitResetMs, retryAfterMs } from './retryHeaders';

/** The wait an answer asks for: `Retry-After`, else (on a 429) its RateLimit headers; capped. */
export function answerRetryAfterMs(
  answer: Answer,
  nowMs: number,
  capMs: number,
): number | undefined {
  const asked =
    retryAfterMs(answer.headers['retry-after'], nowMs) ??
    (answer.status === 429 ? rateLimitResetMs(answer.headers) : undefined);
  return asked === undefined ? undefined : Math.min(asked, capMs);
}

/** Whether a call may be sent again after this outcome (see {@link CallSpec.idempotent}). */
export function retryable(outcome: Outcome, idempotent: boolean): boolean {
  if (outcome instanceof TransportFailure) return idempotent;
  const { status } = outcome;
  if (status === 429) return true;
  return idempotent && (status === 408 || status >= 500);
}

/** The wait before attempt `attempt + 1` after `outcome`: what Runpod asked for, else the backoff. */
export function backoffMs(
  attempt: number,
  outcome: Outcome,
  nowMs: number,
  timing: Pick<Timing, 'retryAfterCapMs' | 'retryBaseMs' | 'retryMaxMs'>,
  random: () => number,
): number {
  if (!(outcome instanceof TransportFailure)) {
    const asked = answerRetryAfterMs(outcome, nowMs, timing.retryAfterCapMs);
    if (asked !== undefined) return asked;
  }
  const exponential = Math.min(timing.retryMaxMs, timing.retryBaseMs * 2 ** attempt);
  return Math.round(exponential * (0.5 + 0.5 * random()));
}

/** The account's rate-limit quota: one for a client and the views on it (they call one account). */
export class AccountQuota {
  /** When the spent window resets (clock ms); 0 while quota is left. */
  private resetAtMs = 0;

  /** Keeps when the quota resets, if an answer (of any status, 2xx too) says a window is spent. */
  note(outcome: Outcome, nowMs: number, capMs: number): void {
    if (outcome instanceof TransportFailure) return;
    const resetMs = rateLimitResetMs(outcome.headers);
    if (resetMs === undefined) return;
    this.resetAtMs = Math.max(this.resetAtMs, nowMs + Math.min(resetMs, capMs));
  }

  /** How long a call sent at `nowMs` must wait for the reset; 0 or less when quota is left. */
  waitMs(nowMs: number): number {
    return this.resetAtMs - nowMs;
  }
}
