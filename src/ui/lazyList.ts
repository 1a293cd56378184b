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

  /**
   * The items once the load in flight (if any) has ended, loading first if never loaded: what a
   * reader of the same source would read now, without reading it twice.
   */
  async latest(): Promise<readonly T[]> {
    if (this.inFlight !== null) await this.inFlight;
    else if (!this.loaded) await this.refresh();
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

/**
 * Whether VS Code is waiting for a view's rows (a root getChildren in flight). A model change
 * fired meanwhile (the first load, which that fetch itself started, or a refresh it awaits) is
 * already in the rows the fetch returns, as those are read from the model after its load: a
 * provider that also fired its change event would make VS Code drop those rows and ask again
 * (with 1,000 runs the first render then waited for a second listing). `forward` passes a change
 * on only when no fetch is pending.
 */
export class RootFetch {
  private inFlight = 0;

  get pending(): boolean {
    return this.inFlight > 0;
  }

  async run<R>(fetch: () => Promise<R>): Promise<R> {
    this.inFlight += 1;
    try {
      return await fetch();
    } finally {
      this.inFlight -= 1;
    }
  }

  forward(fire: () => void): () => void {
    return () => {
      if (this.inFlight === 0) fire();
    };
  }
}
