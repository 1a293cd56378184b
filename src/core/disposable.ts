/** Something holding a resource (timer, watcher, connection, process) that must be released once. */
export interface Disposable {
  dispose(): void;
}

/** A disposable that owns others and releases them in reverse order, once. */
export class DisposableStore implements Disposable {
  private items: Disposable[] = [];
  private disposed = false;

  add<T extends Disposable>(item: T): T {
    if (this.disposed) {
      item.dispose();
    } else {
      this.items.push(item);
    }
    return item;
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    const items = this.items.reverse();
    this.items = [];
    for (const item of items) {
      try {
        item.dispose();
      } catch {
        // One failing release must not keep the others held.
      }
    }
  }
}

export function toDisposable(fn: () => void): Disposable {
  let done = false;
  return {
    dispose: () => {
      if (done) return;
      done = true;
      fn();
    },
  };
}
