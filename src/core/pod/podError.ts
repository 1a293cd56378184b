/**
 * Why a step of a Runpod run failed. Every error says what happened and the
 * next action; `run.json` keeps only {@link runMessageFor}'s text.
 */
import { HintedError, describeError } from '../errors';
import { ApiError, runMessage } from '../runpod/apiErrors';

export type PodErrorKind =
  /** A delete was sent but the pod still shows: it may be billing. */
  | 'not_deleted'
  /** No gpu_types entry gave a ready pod. */
  | 'no_capacity'
  /** `"auto"` found nothing in stock. */
  | 'not_in_stock'
  | 'no_credits'
  /** Runpod refused the request itself (422, other 400): trying other types would not help. */
  | 'rejected'
  /** Every create call went unanswered and no pod was found by its marker. */
  | 'unanswered'
  /** The user interrupted provisioning. */
  | 'interrupted'
  | 'bootstrap_failed'
  | 'watchdog_refused'
  /** `max_cost_usd` could not be armed on the pod (no rate, or the write failed): pod deleted. */
  | 'cost_cap_unset'
  /** The client's guard deleted the pod at the deadline (or the watchdog did). */
  | 'deadline_reached'
  /** The client's guard deleted the pod once max_cost_usd was spent (or the watchdog did). */
  | 'cost_cap_reached'
  /** The pod no longer exists, for a reason we did not cause. */
  | 'pod_gone'
  /** The pod is stopped (EXITED): start it in Runpod's console or remove it. */
  | 'pod_stopped'
  /** The pod has no SSH endpoint right now (restarting). */
  | 'no_endpoint'
  /** The API key may not manage account secrets (the pod's host key lives there). */
  | 'secrets'
  /** An API call failed (the cause is an ApiError). */
  | 'api'
  /** runs/ could not be read or written. */
  | 'runs'
  /** SSH or the job's target failed. */
  | 'exec';

export class PodError extends HintedError<PodErrorKind> {
  constructor(
    kind: PodErrorKind,
    message: string,
    /** The next action, in a sentence. */
    hint: string | null = null,
    options?: { cause?: unknown; podStatus?: string },
  ) {
    super(kind, message, hint, options);
    this.name = 'PodError';
    this.podStatus = options?.podStatus ?? null;
  }

  /**
   * Runpod's status of the run's pod when the error is about it (`pod_stopped`: EXITED, ERROR;
   * `no_endpoint`: TERMINATED), so that what is said after the error names it too.
   */
  readonly podStatus: string | null;

  static api(error: ApiError): PodError {
    return new PodError('api', error.message, null, { cause: error });
  }
}

/**
 * The reason a failed step gives in `run.json`: the error's message, except
 * that an answer of the Runpod API is reduced to its status.
 */
export function runMessageFor(error: unknown): string {
  if (error instanceof PodError) {
    if (error.kind === 'api' && error.cause instanceof ApiError) return runMessage(error.cause);
    if (error.kind === 'interrupted') return 'interrupted before the job started';
    return error.message;
  }
  return runMessage(error);
}

/** Wraps what a step threw into a PodError (API errors keep their cause). */
export function asPodError(error: unknown, kind: PodErrorKind = 'exec'): PodError {
  if (error instanceof PodError) return error;
  if (error instanceof ApiError) return PodError.api(error);
  const message = describeError(error);
  return new PodError(kind, message, null, { cause: error });
}
