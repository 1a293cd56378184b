import type { Disposable } from '../core/disposable';

/**
 * A minimal typed change emitter for UI models, so models stay free of the `vscode` module and
 * can be unit-tested in plain Node. A listener that throws does not keep the others from running.
 */
export class Emitter<T> implements Disposable {
  private listeners = new Set<(value: T) => void>();

  /** Subscribes; the returned Disposable unsubscribes. Same shape as vscode.Event. */
  readonly event = (listener: (value: T) => void): Disposable => {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  };

  fire(value: T): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(value);
      } catch {
        // A broken view must not stop the others from rendering.
      }
    }
  }

  dispose(): void {
    this.listeners.clear();
  }
}
