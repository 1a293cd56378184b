/**
 * Injected time. Every deadline, lease, grace, poll and ETA in the core goes
 * through a Clock, so tests can run a 12-hour run in milliseconds and the
 * production constants are never edited for a test.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  nowMs(): number;
  /**
   * Resolves after `ms` milliseconds. Rejects with an `AbortError` (see
   * {@link abortError}) as soon as `signal` aborts; never resolves early.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The error a sleep or a wait rejects with when its signal aborts. */
export function abortError(signal?: AbortSignal): Error {
  const reason: unknown = signal?.reason;
  if (reason instanceof Error) return reason;
  const error = new Error('aborted');
  error.name = 'AbortError';
  return error;
}

export function isAbortError(error: unknown): boolean {
  return error instanceof Error && error.name === 'AbortError';
}

/** The real clock. */
export const systemClock: Clock = {
  nowMs: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortError(signal));
        return;
      }
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(abortError(signal));
      };
      const timer = setTimeout(
        () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        Math.max(0, ms),
      );
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};

/** Whole seconds since the Unix epoch, as the pod's watchdog counts them. */
export function unixS(clock: Clock): number {
  return Math.floor(clock.nowMs() / 1000);
}

/** RFC 3339 UTC to the second, as run.json and pod.json write times. */
export function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}
