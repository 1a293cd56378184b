import type { Disposable } from '../core/disposable';
import { Emitter } from './emitter';

/**
 * A list loaded on first use (so activation reads nothing) whose refreshes are coalesced: a
 * refresh asked while one is loading runs once more after it, so the last change is always seen.
 * A failing loader keeps the previous list and the error reaches the caller of `refresh()`.
 */
export class LazyList<T> implements Disposable {
  private items: readonly T[] = [];
  private loaded = false;
  private inFlight: Promise<void> | null = null;
  private again = false;
  private settledOnce = false;
  private readonly changed = new Emitter<void>();
  private readonly settled = new Emitter<void>();
  /** Fires after every successful load. */
  readonly onDidChange = this.changed.event;
  /** Fires after every load, failed or not (a view's "Loading…" ends then). */
  readonly onDidSettle = this.settled.event;

  constructor(private readonly loader: () => Promise<readonly T[]>) {}

  get isLoaded(): boolean {
    return this.loaded;
  }

  /** Whether a load has ended (failed or not): a view past it shows what it has, or why not. */
  get hasSettled(): boolean {
    return this.settledOnce;
  }

  /** The items of the last successful load; empty until then. */
  get all(): readonly T[] {
    return this.items;
  }

  /** Loads once; later calls return at once. */
  async ensureLoaded(): Promise<void> {
    if (!this.loaded) await this.refresh();
  }

  refresh(): Promise<void> {
    if (this.inFlight !== null) {
      this.again = true;
      return this.inFlight;
    }
    this.inFlight = (async () => {
      try {
        do {
          this.again = false;
          this.items = await this.loader();
          this.loaded = true;
          this.changed.fire();
        } while (this.again);
      } finally {
        this.inFlight = null;
        this.settledOnce = true;
        this.settled.fire();
      }
    })();
    return this.inFlight;
  }

  dispose(): void {
    this.changed.dispose();
    this.settled.dispose();
  }
}
