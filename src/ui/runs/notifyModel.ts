import type { CoreEvent, RunEndCause, RunState } from '../../core/events';
import { followLostWords, PodError } from '../../core/flow/records';

/**
 * Which core events become notifications, free of `vscode`. Each decision carries its severity,
 * text and the actions offered; `key` is what makes a notification once-only (an overrun is shown
 * once per run however often the core repeats it).
 */

export type NotifyAction =
  'Keep Pod' | 'Open Run' | 'Attach' | 'Remove Pod' | 'Open Output' | 'Show Pods' | 'Resume Run';

export interface Notification {
  key: string;
  severity: 'info' | 'warning' | 'error';
  message: string;
  actions: NotifyAction[];
  runId: string | null;
}

export function notificationFor(event: CoreEvent): Notification | null {
  if (event.type === 'warning') {
    const runId = event.runId;
    // The core's words, said of a run when they do not name it (several runs may be followed).
    const message =
      runId === null || event.message.includes(runId)
        ? event.message
        : `Run ${runId}: ${event.message}`;
    switch (event.code) {
      case 'overrun':
        return {
          key: `overrun:${runId ?? ''}`,
          severity: 'warning',
          message,
          actions: ['Keep Pod', 'Open Run'],
          runId,
        };
      case 'strays':
        // Pods of a run (Remove deletes them with the run's pod rm), or of no known run (the
        // Pods view lists them, each with its own Remove).
        return {
          key: `strays:${runId ?? ''}:${event.message}`,
          severity: 'warning',
          message,
          actions: runId === null ? ['Show Pods'] : ['Remove Pod'],
          runId,
        };
      case 'awaiting_retrieval':
        return {
          key: `awaiting:${runId ?? ''}`,
          severity: 'warning',
          message,
          actions: runId === null ? [] : ['Attach'],
          runId,
        };
      case 'gpu_idle':
      case 'gpu_memory':
        // Said once per run by the core (kept in .pod/gpu.json); the run page shows it too.
        return {
          key: `${event.code}:${runId ?? ''}`,
          severity: 'warning',
          message,
          actions: runId === null ? [] : ['Open Run'],
          runId,
        };
      case 'api_unreachable':
        // Repeated with a countdown while the core keeps trying: shown once per run (each line
        // stays in the output channel).
        return {
          key: `api_unreachable:${runId ?? ''}`,
          severity: 'warning',
          message,
          actions: runId === null ? [] : ['Open Run'],
          runId,
        };
      default:
        return {
          key: `warning:${runId ?? ''}:${event.code}:${event.message}`,
          severity: 'warning',
          message,
          actions: runId === null ? [] : ['Open Run'],
          runId,
        };
    }
  }
  if (
    event.type === 'pod' &&
    event.status.kind === 'deleting' &&
    event.status.reason === 'deadline'
  ) {
    // The client's guard deletes the pod at the deadline: said once, as the run's end.
    return deadlineReached(event.runId);
  }
  if (
    event.type === 'pod' &&
    event.status.kind === 'deleting' &&
    event.status.reason === 'cost_cap'
  ) {
    return costCapReached(event.runId);
  }
  if (event.type === 'runState') {
    return runEnd(event.runId, event.state, event.message, event.cause);
  }
  return null;
}

/**
 * The run's end a flow's error says, by its kind (the run was saved so too): a limit that
 * deleted the pod, or the pod gone; null for any other error (its words are never read).
 */
export function endCauseOf(error: unknown): RunEndCause | null {
  if (!(error instanceof PodError)) return null;
  if (error.kind === 'deadline_reached') return 'deadline';
  if (error.kind === 'cost_cap_reached') return 'cost_cap';
  if (error.kind === 'pod_gone') return 'pod_gone';
  if (error.kind === 'host_lost') return 'host_lost';
  return null;
}

function deadlineReached(runId: string): Notification {
  return {
    key: `end:${runId}`,
    severity: 'error',
    message: `Run ${runId}: deadline reached (max_hours): its pod was deleted before the job ended. Raise the target's max_hours, or keep the pod, for jobs this long.`,
    actions: ['Open Run'],
    runId,
  };
}

function costCapReached(runId: string): Notification {
  return {
    key: `end:${runId}`,
    severity: 'error',
    message: `Run ${runId}: cost cap reached (max_cost_usd): its pod was deleted before the job ended. Raise the target's max_cost_usd, or remove it, for jobs this costly.`,
    actions: ['Open Run'],
    runId,
  };
}

function podGone(runId: string, message: string | null): Notification {
  return {
    key: `end:${runId}`,
    severity: 'error',
    message: `Run ${runId}: pod gone${message ? ` (${message})` : ''}. Its results still on the pod are lost; runs/ keeps what was already copied.`,
    actions: ['Open Run'],
    runId,
  };
}

/**
 * The one notification of a run's end (key `end:<run>`, so a deadline announced while the pod
 * was being deleted is not repeated when the flow returns), told by its cause (never its
 * message, which is only shown): deadline reached, cost cap reached and pod gone have their own
 * words; success offers the output; a snapshot home offers the resume.
 */
export function runEnd(
  runId: string,
  state: RunState,
  message: string | null,
  cause: RunEndCause | null,
): Notification | null {
  const tail = message ? `: ${message}` : '';
  if (state === 'failed' || state === 'stopped') {
    if (cause === 'deadline') return deadlineReached(runId);
    if (cause === 'cost_cap') return costCapReached(runId);
    if (cause === 'pod_gone') return podGone(runId, message);
  }
  if (state === 'succeeded') {
    return {
      key: `end:${runId}`,
      severity: 'info',
      message: `Run ${runId} succeeded${tail}`,
      actions: ['Open Output'],
      runId,
    };
  }
  if (state === 'stopped' && cause === 'snapshotted') {
    // Stopped with its snapshot home, as asked (or before a limit): nothing is lost.
    return {
      key: `end:${runId}`,
      severity: 'info',
      message: `Run ${runId} ${message ?? state}`,
      actions: ['Resume Run', 'Open Run'],
      runId,
    };
  }
  if (state === 'failed' || state === 'stopped') {
    return {
      key: `end:${runId}`,
      severity: 'error',
      message: `Run ${runId} ${state}${tail}`,
      actions: ['Open Run'],
      runId,
    };
  }
  if (state === 'cancelled') {
    return {
      key: `end:${runId}`,
      severity: 'info',
      message: `Run ${runId} cancelled${tail}`,
      actions: [],
      runId,
    };
  }
  return null;
}

/**
 * Following a run stopped on an error while its run is still `running` (the connection was lost,
 * the pod could not be reached): the run did not fail, so this is no "Run failed". It says the
 * job goes on, what the pod's watchdog does while nobody follows (`deadlineUnixS`: the pod's
 * max_hours deadline, null for a kept pod), and offers Attach.
 */
export function followLost(
  runId: string,
  reason: string,
  deadlineUnixS: number | null,
  nowMs: number,
): Notification {
  return {
    key: `lost:${runId}:${reason}`,
    severity: 'warning',
    message: followLostWords(runId, reason, deadlineUnixS, nowMs, 'Attach to follow it again'),
    actions: ['Attach'],
    runId,
  };
}

/** Remembers which notifications were shown, so each key is shown once. */
export class OnceFilter {
  private readonly shown = new Set<string>();

  /** True the first time `key` is seen. */
  first(key: string): boolean {
    if (this.shown.has(key)) return false;
    this.shown.add(key);
    return true;
  }
}

/**
 * The confirmation Cancel Run asks. A kept pod is not deleted by a cancel (the job stops, what it
 * wrote comes home, the pod stays until it is removed): the question must not say it is.
 */
/** A cluster run's cluster, as Cancel Run names it. */
export interface CancelCluster {
  id: string;
  nodes: readonly unknown[];
}

export function cancelPrompt(
  runId: string,
  pod: { keep: boolean; state: string } | null,
  cluster: CancelCluster | null = null,
): string {
  if (cluster !== null) {
    // Runpod deletes a member only with its cluster, and rank 0's results come home only at the
    // job's end: a cancel keeps what was streamed home (checkpoints), nothing more.
    return `Cancel run ${runId}? Its job is stopped and the whole cluster ${cluster.id} (${cluster.nodes.length} nodes) is deleted: the checkpoints already home stay, nothing more is retrieved.`;
  }
  const ends =
    pod === null || pod.state === 'deleted'
      ? ''
      : pod.keep
        ? ' Its pod is kept: it stays, and bills, until you remove it.'
        : ' Its pod is deleted.';
  return `Cancel run ${runId}? Its job is stopped and what it wrote is retrieved.${ends}`;
}

/** How Cancel Run asks: its question, whether it blocks the window (modal), the button. */
export interface CancelQuestion {
  message: string;
  modal: boolean;
  action: 'Cancel Run';
}

/**
 * Cancel Run's question. A cancel that deletes the run's pod asks in a modal dialog; a kept pod's
 * is not deleted (the job stops, what it wrote comes home, the pod stays until removed), so it
 * gets no modal dialog: the question is a notification, and the job is stopped only when its
 * button is pressed (left unanswered, nothing happens).
 */
export function cancelQuestion(
  runId: string,
  pod: { keep: boolean; state: string } | null,
  cluster: CancelCluster | null = null,
): CancelQuestion {
  const keptPod = cluster === null && pod !== null && pod.keep && pod.state !== 'deleted';
  return { message: cancelPrompt(runId, pod, cluster), modal: !keptPod, action: 'Cancel Run' };
}
