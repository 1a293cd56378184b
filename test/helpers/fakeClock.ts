import { abortError, type Clock } from '../../src/core/clock';

interface Sleeper {
  atMs: number;
  resolve: () => void;
}

/**
 * A clock that only moves when a test advances it. Sleepers wake in time
 * order; `advanceMs` lets promise chains settle between wake-ups so code
 * that sleeps in a loop runs as it would in real time.
 */
export class FakeClock implements Clock {
  private sleepers: Sleeper[] = [];

  constructor(private currentMs = Date.UTC(2026, 8, 29, 12, 0, 0)) {}

  nowMs(): number {
    return this.currentMs;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortError(signal));
        return;
      }
      const onAbort = (): void => {
        this.sleepers = this.sleepers.filter((s) => s !== sleeper);
        reject(abortError(signal));
      };
      const sleeper: Sleeper = {
        atMs: this.currentMs + Math.max(0, ms),
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      this.sleepers.push(sleeper);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Number of pending sleeps. */
  get pending(): number {
    return this.sleepers.length;
  }

  /** Moves time forward by `ms`, waking every sleeper due on the way. */
  async advanceMs(ms: number): Promise<void> {
    const targetMs = this.currentMs + ms;
    for (;;) {
      await settle();
      this.sleepers.sort((a, b) => a.atMs - b.atMs);
      const next = this.sleepers[0];
      if (!next || next.atMs > targetMs) break;
      this.sleepers.shift();
      this.currentMs = Math.max(this.currentMs, next.atMs);
      next.resolve();
    }
    this.currentMs = targetMs;
    await settle();
  }
}

/** Lets pending promise callbacks run. */
export async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
