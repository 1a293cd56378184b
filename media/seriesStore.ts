/**
 * Every point the run page's chart received, columnar (an ascending x column and one column per
 * series): what the decimation (decimate.ts) reads its buckets from.
 */

/** Stored for a missing value. */
const GAP = NaN;

/** A value as stored: finite numbers as they are, everything else a gap. */
export function stored(value: number | null | undefined): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : GAP;
}

/** Every point received: an ascending x column and one column per series (NaN: no value). */
export class SeriesStore {
  private xs: Float64Array;
  private columns: Float64Array[];
  private count = 0;

  constructor(
    readonly seriesCount: number,
    capacity = 1024,
  ) {
    this.xs = new Float64Array(Math.max(1, capacity));
    this.columns = Array.from({ length: seriesCount }, () => new Float64Array(this.xs.length));
  }

  get length(): number {
    return this.count;
  }

  /** The x column (valid up to `length`; the array is replaced when it grows). */
  get x(): Float64Array {
    return this.xs;
  }

  /** Series `s`'s column (valid up to `length`). */
  y(s: number): Float64Array {
    return this.columns[s] as Float64Array;
  }

  /** Every series' column (valid up to `length`; replaced when they grow). */
  get ys(): readonly Float64Array[] {
    return this.columns;
  }

  clear(): void {
    this.count = 0;
  }

  /** Appends a row; x must not be below the last one (the caller checks). */
  push(x: number, values: readonly (number | null | undefined)[]): void {
    if (this.count === this.xs.length) this.grow();
    const row = this.count++;
    this.xs[row] = x;
    for (let s = 0; s < this.seriesCount; s++) {
      (this.columns[s] as Float64Array)[row] = stored(values[s]);
    }
  }

  /**
   * Replaces every row with aligned columns (`ys[s].length === x.length`, x ascending): one
   * allocation and one pass per column, much cheaper than a push per row for a whole table.
   */
  load(x: readonly number[], ys: readonly (readonly (number | null | undefined)[])[]): void {
    const n = x.length;
    if (n > this.xs.length) {
      let capacity = this.xs.length;
      while (capacity < n) capacity *= 2;
      this.xs = new Float64Array(capacity);
      this.columns = this.columns.map(() => new Float64Array(capacity));
    }
    this.xs.set(x);
    for (let s = 0; s < this.seriesCount; s++) {
      const column = this.columns[s] as Float64Array;
      const values = ys[s] ?? [];
      // stored(), inlined: this loop runs once per point on the first draw, before the JIT.
      for (let row = 0; row < n; row++) {
        const value = values[row];
        column[row] = typeof value === 'number' && value - value === 0 ? value : GAP;
      }
    }
    this.count = n;
  }

  /** Fills the last row's gaps with `values`' present ones; true when a value changed. */
  fillLast(values: readonly (number | null | undefined)[]): boolean {
    const row = this.count - 1;
    if (row < 0) return false;
    let changed = false;
    for (let s = 0; s < this.seriesCount; s++) {
      const value = stored(values[s]);
      const column = this.columns[s] as Float64Array;
      if (!Number.isNaN(value) && !Object.is(column[row], value)) {
        column[row] = value;
        changed = true;
      }
    }
    return changed;
  }

  private grow(): void {
    const capacity = this.xs.length * 2;
    const xs = new Float64Array(capacity);
    xs.set(this.xs);
    this.xs = xs;
    this.columns = this.columns.map((column) => {
      const grown = new Float64Array(capacity);
      grown.set(column);
      return grown;
    });
  }
}
