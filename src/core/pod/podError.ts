/**
 * Why a step of a Runpod run failed. Every error says what happened and the
 * next action; `run.json` keeps only {@link runMessageFor}'s text.
 */
import { HintedError, describeError, hintOf } from '../errors';
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
  /**
   * Its host stopped answering while Runpod listed it RUNNING: the client deleted it (its
   * watchdog, on that host, could not).
   */
  | 'host_lost'
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

/** The next action of each kind, where the step that failed has no more to say than that. */
const POD_HINTS: Record<PodErrorKind, string> = {
  not_deleted:
    'It may still bill: check `overbrainer pod ls`, and remove it with `overbrainer pod rm` (or in the Runpod console).',
  no_capacity:
    'Add GPU types or data centers to the target, or try again later (`overbrainer pod gpus --in-stock` lists what is in stock).',
  not_in_stock:
    'Name GPU types in gpu_types, or try again later (`overbrainer pod gpus --in-stock` lists what is in stock).',
  no_credits: 'Add credit to the Runpod account (Runpod console, Billing), then train again.',
  rejected:
    "Check the target in overbrainer.toml against Runpod's answer in the log, then train again.",
  unanswered: 'Check `overbrainer pod ls` for a pod of the run, and the network, then train again.',
  interrupted: 'Train again when you are ready; `overbrainer pod ls` shows any pod left.',
  bootstrap_failed:
    "The pod's log (`overbrainer runs logs` with the run's ID) says why it did not start; check the target's image, then train again.",
  watchdog_refused:
    "The pod's log (`overbrainer runs logs` with the run's ID) says why; check the target's image, then train again.",
  cost_cap_unset: 'Check max_cost_usd and the GPU types of the target, then train again.',
  deadline_reached:
    'Raise max_hours on the target to give the run more time, or resume it from its last snapshot.',
  cost_cap_reached:
    'Raise max_cost_usd on the target to give the run more money, or resume it from its last snapshot.',
  pod_gone:
    "`overbrainer runs show` with the run's ID says what came home; train again for the rest.",
  pod_stopped: 'Start the pod in the Runpod console, or remove it with `overbrainer pod rm`.',
  host_lost:
    "The checkpoints streamed home stay in the run's checkpoints/ folder: train again, or raise the target's max_recoveries to go on on a new pod by itself.",
  no_endpoint:
    "The pod may be restarting: follow it again in a minute (`overbrainer train attach` with the run's ID).",
  secrets:
    'Use an API key that may manage secrets (Runpod console, Settings → API Keys), then train again.',
  api: 'Run the command again; running pods are not affected: their watchdogs keep their own deadlines.',
  runs: 'Check that runs/ is readable and writable, and the free space on this disk.',
  exec: "Check that the pod is up (`overbrainer pod ls`), then follow it again (`overbrainer train attach` with the run's ID).",
};

export class PodError extends HintedError<PodErrorKind> {
  constructor(
    kind: PodErrorKind,
    message: string,
    /** The next action, in a sentence; the one of its kind when left out. */
    hint: string | null = null,
    options?: { cause?: unknown; podStatus?: string },
  ) {
    super(kind, message, hint ?? POD_HINTS[kind], options);
    this.name = 'PodError';
    this.podStatus = options?.podStatus ?? null;
  }

  /**
   * Runpod's status of the run's pod when the error is about it (`pod_stopped`: EXITED, ERROR;
   * `no_endpoint`: TERMINATED), so that what is said after the error names it too.
   */
  readonly podStatus: string | null;

  static api(error: ApiError): PodError {
    return new PodError('api', error.message, error.hint, { cause: error });
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
  return new PodError(kind, message, hintOf(error), { cause: error });
}
