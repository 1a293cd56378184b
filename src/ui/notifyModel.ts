import type { CoreEvent } from '../core/events';

/**
 * Which core events become notifications, free of `vscode`. Each decision carries its severity,
 * text and the actions offered; `key` is what makes a notification once-only (an overrun is shown
 * once per run however often the core repeats it).
 */

export type NotifyAction = 'Keep Pod' | 'Open Run' | 'Attach' | 'Remove Pod' | 'Open Output';

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
    switch (event.code) {
      case 'overrun':
        return {
          key: `overrun:${runId ?? ''}`,
          severity: 'warning',
          message: event.message,
          actions: ['Keep Pod', 'Open Run'],
          runId,
        };
      case 'strays':
        return {
          key: `strays:${runId ?? ''}:${event.message}`,
          severity: 'warning',
          message: event.message,
          actions: runId === null ? [] : ['Remove Pod'],
          runId,
        };
      case 'awaiting_retrieval':
        return {
          key: `awaiting:${runId ?? ''}`,
          severity: 'warning',
          message: event.message,
          actions: runId === null ? [] : ['Attach'],
          runId,
        };
      default:
        return {
          key: `warning:${runId ?? ''}:${event.code}:${event.message}`,
          severity: 'warning',
          message: event.message,
          actions: runId === null ? [] : ['Open Run'],
          runId,
        };
    }
  }
  if (event.type === 'runState') {
    const { runId, state, message } = event;
    const tail = message ? `: ${message}` : '';
    if (state === 'succeeded') {
      return {
        key: `end:${runId}`,
        severity: 'info',
        message: `Run ${runId} succeeded${tail}`,
        actions: ['Open Output'],
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
  }
  return null;
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
