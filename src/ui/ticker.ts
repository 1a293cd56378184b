import type { Clock } from '../core/clock';
import type { Disposable } from '../core/disposable';

/**
 * Calls `tick` every `periodMs` on the injected clock until disposed (in place of setInterval,
 * so a test drives it with its clock). A tick that throws goes to `onError`; the ticker goes on.
 */
export function every(
  clock: Clock,
  periodMs: number,
  tick: () => void,
  onError: (error: unknown) => void,
): Disposable {
  const stop = new AbortController();
  void (async () => {
    for (;;) {
      try {
        await clock.sleep(periodMs, stop.signal);
      } catch {
        return; // Disposed.
      }
      try {
        tick();
      } catch (error) {
        onError(error);
      }
    }
  })();
  return { dispose: () => stop.abort() };
}
