/**
 * Min/max decimation of the run page's chart (M4: the first, min, max and last point of each
 * series in each pixel column), so the chart hands uPlot a few thousand rows however many points
 * it holds, and the line it draws covers the same pixels as the full data (spikes kept).
 *
 * Pure (no DOM): the chart (media/chart.ts) uses it in the page, the unit tests run it in Node.
 *
 * - `SeriesStore` keeps every point received in typed arrays that grow by doubling (an append is
 *   O(1) amortized). A missing value (null, NaN, ±Infinity) is stored as NaN: a gap.
 * - Buckets are aligned on absolute x (`floor(x / width)`), `width` the largest power of two not
 *   above (x range ÷ columns): a bucket is never wider than a pixel column, there are at most
 *   `2 × columns + 1` of them, and an append only touches the last one. When the x
 *   range doubles, adjacent buckets merge pairwise; the M4 summary of two buckets is exactly the
 *   summary of their union, so the incremental result equals decimating from scratch.
 * - The output is a subset of the full table's ROWS (x with every series' value at that x), so
 *   uPlot draws true points with the series' own options: the union of each series' kept rows,
 *   plus each bucket's first and last row (the x extent stays the data's).
 * - Gaps: a bucket's first and last rows are always kept, so a gap that reaches a bucket's edge
 *   stays a break; for a series whose gaps break its line (not a sparse series that joins them), a
 *   bucket also keeps its first null before the first value, between values, and after the last
 *   value, so a gap inside a bucket stays a break too (one per bucket: the bucket is narrower
 *   than a pixel). Every null drawn is a real one.
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

/** What the chart hands uPlot: rows of the full table (null: no value at that x). */
export interface Decimated {
  x: number[];
  ys: (number | null)[][];
}

/**
 * The bucket width for `range` x units over `columns` pixel columns: the largest power of two
 * not above range ÷ columns; 0 when the range is empty (every row in one bucket).
 */
export function bucketWidth(range: number, columns: number): number {
  const per = range / Math.max(1, columns);
  if (!(per > 0) || !Number.isFinite(per)) return 0;
  let width = 2 ** Math.floor(Math.log2(per));
  // log2 is not exact near powers of two: settle on the unique w with w ≤ per < 2w.
  while (width > per) width /= 2;
  while (width * 2 <= per) width *= 2;
  return width;
}

function keyOf(x: number, width: number): number {
  return width > 0 ? Math.floor(x / width) : 0;
}

// Slots of a bucket's per-series summary (row indices, -1: none).
const FIRST = 0; // first value
const LAST = 1; // last value
const MIN = 2; // smallest value (the earliest on a tie)
const MAX = 3; // largest value (the earliest on a tie)
const LEAD = 4; // first gap before the first value (or the first gap, when no value)
const TRAIL = 5; // first gap after the last value
const INNER = 6; // first gap between the first and last value
const SLOTS = 7;

interface Bucket {
  key: number;
  firstRow: number;
  lastRow: number;
  /**
   * SLOTS row indices per series. A plain array: a typed array this size is allocated off the
   * heap, and a chart holds thousands of buckets (allocating them dominated a cold first draw).
   */
  stats: number[];
  /** Where this bucket's rows start in the output. */
  outStart: number;
}

function newBucket(key: number, row: number, seriesCount: number): Bucket {
  return {
    key,
    firstRow: row,
    lastRow: row,
    stats: new Array<number>(SLOTS * seriesCount).fill(-1),
    outStart: 0,
  };
}

/** Folds row `row` (after the bucket's rows) into the bucket. */
function addRow(bucket: Bucket, row: number, store: SeriesStore): void {
  bucket.lastRow = row;
  const stats = bucket.stats;
  const columns = store.ys;
  for (let s = 0, o = 0; s < columns.length; s++, o += SLOTS) {
    const column = columns[s] as Float64Array;
    const value = column[row] as number;
    // value !== value: NaN, a gap.
    if (value !== value) {
      if ((stats[o + FIRST] as number) < 0) {
        if ((stats[o + LEAD] as number) < 0) stats[o + LEAD] = row;
      } else if ((stats[o + TRAIL] as number) < 0) stats[o + TRAIL] = row;
      continue;
    }
    if ((stats[o + FIRST] as number) < 0) {
      stats[o + FIRST] = row;
      stats[o + MIN] = row;
      stats[o + MAX] = row;
    } else {
      // Gaps after the last value are now between values.
      const trail = stats[o + TRAIL] as number;
      if (trail >= 0) {
        if ((stats[o + INNER] as number) < 0) stats[o + INNER] = trail;
        stats[o + TRAIL] = -1;
      }
      if (value < (column[stats[o + MIN] as number] as number)) stats[o + MIN] = row;
      if (value > (column[stats[o + MAX] as number] as number)) stats[o + MAX] = row;
    }
    stats[o + LAST] = row;
  }
}

/** Recomputes a bucket's summary from its rows (after a row in it changed). */
function rescan(bucket: Bucket, store: SeriesStore): void {
  const columns = store.ys;
  for (let s = 0; s < columns.length; s++) {
    summarize(columns[s] as Float64Array, bucket.firstRow, bucket.lastRow, bucket.stats, s * SLOTS);
  }
}

/**
 * Writes the summary of one series over rows [from, to] into `stats` at `o`: what addRow() row
 * by row would leave (same slots, same tie rule), in one tight loop over the column (a whole
 * table is scanned this way: series by series, bucket by bucket).
 */
function summarize(
  column: Float64Array,
  from: number,
  to: number,
  stats: number[],
  o: number,
): void {
  let firstRow = -1;
  let lastRow = -1;
  let minRow = -1;
  let maxRow = -1;
  let lead = -1;
  let trail = -1;
  let inner = -1;
  let min = Infinity;
  let max = -Infinity;
  for (let row = from; row <= to; row++) {
    const value = column[row] as number;
    if (value !== value) {
      if (firstRow < 0) {
        if (lead < 0) lead = row;
      } else if (trail < 0) trail = row;
      continue;
    }
    if (firstRow < 0) {
      firstRow = minRow = maxRow = row;
      min = max = value;
    } else {
      if (trail >= 0) {
        if (inner < 0) inner = trail;
        trail = -1;
      }
      if (value < min) {
        min = value;
        minRow = row;
      }
      if (value > max) {
        max = value;
        maxRow = row;
      }
    }
    lastRow = row;
  }
  stats[o + FIRST] = firstRow;
  stats[o + LAST] = lastRow;
  stats[o + MIN] = minRow;
  stats[o + MAX] = maxRow;
  stats[o + LEAD] = lead;
  stats[o + TRAIL] = trail;
  stats[o + INNER] = inner;
}

const first = (...rows: number[]): number => {
  for (const row of rows) if (row >= 0) return row;
  return -1;
};

/** `a` absorbs `b` (the bucket right after it): exactly the summary of their rows together. */
function merge(a: Bucket, b: Bucket, store: SeriesStore): void {
  a.lastRow = b.lastRow;
  const sa = a.stats;
  const sb = b.stats;
  for (let s = 0, o = 0; s < store.seriesCount; s++, o += SLOTS) {
    const aHas = (sa[o + FIRST] as number) >= 0;
    const bHas = (sb[o + FIRST] as number) >= 0;
    if (!bHas) {
      // b holds gaps only (or nothing): they trail a's values, or lead when a has none.
      const bGap = sb[o + LEAD] as number;
      if (aHas) sa[o + TRAIL] = first(sa[o + TRAIL] as number, bGap);
      else sa[o + LEAD] = first(sa[o + LEAD] as number, bGap);
      continue;
    }
    if (!aHas) {
      sa[o + LEAD] = first(sa[o + LEAD] as number, sb[o + LEAD] as number);
      for (const slot of [FIRST, LAST, MIN, MAX, TRAIL, INNER])
        sa[o + slot] = sb[o + slot] as number;
      continue;
    }
    const column = store.y(s);
    sa[o + INNER] = first(
      sa[o + INNER] as number,
      sa[o + TRAIL] as number,
      sb[o + LEAD] as number,
      sb[o + INNER] as number,
    );
    sa[o + TRAIL] = sb[o + TRAIL] as number;
    sa[o + LAST] = sb[o + LAST] as number;
    // Strictly smaller/larger: on a tie the earlier row (a's) stays, as a scan would keep it.
    const bMin = sb[o + MIN] as number;
    const bMax = sb[o + MAX] as number;
    if ((column[bMin] as number) < (column[sa[o + MIN] as number] as number)) sa[o + MIN] = bMin;
    if ((column[bMax] as number) > (column[sa[o + MAX] as number] as number)) sa[o + MAX] = bMax;
  }
}

/** Merges adjacent buckets that share a key at twice the width; returns the new list. */
function mergePairs(buckets: Bucket[], store: SeriesStore): Bucket[] {
  const merged: Bucket[] = [];
  for (const bucket of buckets) {
    const key = Math.floor(bucket.key / 2);
    const previous = merged[merged.length - 1];
    if (previous && previous.key === key) merge(previous, bucket, store);
    else {
      bucket.key = key;
      merged.push(bucket);
    }
  }
  return merged;
}

/** Appends row `row` of the store to `out`. */
function pushRow(out: Decimated, store: SeriesStore, row: number): void {
  out.x.push(store.x[row] as number);
  const columns = store.ys;
  for (let s = 0; s < columns.length; s++) {
    const value = (columns[s] as Float64Array)[row] as number;
    // value !== value: NaN, a gap.
    (out.ys[s] as (number | null)[]).push(value !== value ? null : value);
  }
}

/** Emits a bucket's kept rows, ascending and each once. */
function emit(
  bucket: Bucket,
  store: SeriesStore,
  gaps: readonly boolean[],
  out: Decimated,
  scratch: Int32Array,
): void {
  let n = 0;
  scratch[n++] = bucket.firstRow;
  scratch[n++] = bucket.lastRow;
  const stats = bucket.stats;
  for (let s = 0, o = 0; s < store.seriesCount; s++, o += SLOTS) {
    const end = gaps[s] === true ? SLOTS : LEAD;
    for (let slot = FIRST; slot < end; slot++) {
      const row = stats[o + slot] as number;
      if (row >= 0) scratch[n++] = row;
    }
  }
  // Insertion sort: at most 2 + 7 × series rows.
  for (let i = 1; i < n; i++) {
    const row = scratch[i] as number;
    let j = i - 1;
    while (j >= 0 && (scratch[j] as number) > row) {
      scratch[j + 1] = scratch[j] as number;
      j--;
    }
    scratch[j + 1] = row;
  }
  let previous = -1;
  for (let i = 0; i < n; i++) {
    const row = scratch[i] as number;
    if (row !== previous) pushRow(out, store, row);
    previous = row;
  }
}

function emptyOutput(seriesCount: number): Decimated {
  return { x: [], ys: Array.from({ length: seriesCount }, () => []) };
}

function truncate(out: Decimated, length: number): void {
  out.x.length = length;
  for (const column of out.ys) column.length = length;
}

/** Scans rows [from, to] into buckets of `width`. */
function scan(store: SeriesStore, from: number, to: number, width: number): Bucket[] {
  const buckets: Bucket[] = [];
  const x = store.x;
  // The buckets' row ranges from x alone: x ascends, so a bucket ends before the first row of a
  // larger key (a binary search: a bucket holds many rows when there are many points).
  let row = from;
  while (row <= to) {
    const key = keyOf(x[row] as number, width);
    let lo = row + 1;
    let hi = to + 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (keyOf(x[mid] as number, width) === key) lo = mid + 1;
      else hi = mid;
    }
    const bucket = newBucket(key, row, store.seriesCount);
    bucket.lastRow = lo - 1;
    buckets.push(bucket);
    row = lo;
  }
  // Then each series, bucket by bucket, in a tight loop over its column.
  const columns = store.ys;
  for (let s = 0; s < columns.length; s++) {
    const column = columns[s] as Float64Array;
    for (const bucket of buckets) {
      summarize(column, bucket.firstRow, bucket.lastRow, bucket.stats, s * SLOTS);
    }
  }
  return buckets;
}

export interface DecimateOptions {
  /** Pixel columns the x range is drawn over (device pixels). */
  columns: number;
  /** Per series: whether its gaps break its line (false for a sparse series drawn joined). */
  gaps: readonly boolean[];
}

/**
 * The whole data decimated, kept up to date incrementally: after rows are pushed to the store,
 * `update()` folds them into the last bucket(s) and `output()` re-emits only the buckets that
 * changed (all of them only when the width doubled).
 */
export class Decimator {
  private buckets: Bucket[] = [];
  private width = 0;
  private rows = 0;
  private readonly out: Decimated;
  /** The first bucket whose emitted rows are stale. */
  private dirtyFrom = 0;
  private readonly scratch: Int32Array;

  constructor(
    private readonly store: SeriesStore,
    private options: DecimateOptions,
  ) {
    this.out = emptyOutput(store.seriesCount);
    this.scratch = new Int32Array(2 + SLOTS * store.seriesCount);
  }

  get columns(): number {
    return this.options.columns;
  }

  get bucketWidth(): number {
    return this.width;
  }

  /** How many buckets (about the pixel columns covered, at most 2 × columns + 1). */
  get bucketCount(): number {
    return this.buckets.length;
  }

  /** Starts over from the store (after it was cleared or refilled). */
  rebuild(): void {
    const n = this.store.length;
    const x = this.store.x;
    this.width =
      n > 0 ? bucketWidth((x[n - 1] as number) - (x[0] as number), this.options.columns) : 0;
    this.buckets = n > 0 ? scan(this.store, 0, n - 1, this.width) : [];
    this.rows = n;
    this.dirtyFrom = 0;
  }

  /** A new plot width: decimates again from the data when the column count changed. */
  setColumns(columns: number): void {
    if (columns === this.options.columns) return;
    this.options = { ...this.options, columns };
    this.rebuild();
  }

  /** Folds in the rows pushed since the last call. */
  update(): void {
    const n = this.store.length;
    if (n < this.rows || this.rows === 0) return this.rebuild();
    if (n === this.rows) return;
    const x = this.store.x;
    const wanted = bucketWidth((x[n - 1] as number) - (x[0] as number), this.options.columns);
    // Only a range that was empty (all rows at one x) asks for narrower buckets: start over.
    if (this.width === 0 || wanted < this.width) return this.rebuild();
    let from = this.buckets.length - 1;
    while (this.width < wanted) {
      this.buckets = mergePairs(this.buckets, this.store);
      this.width *= 2;
      from = 0;
    }
    let current = this.buckets[this.buckets.length - 1];
    for (let row = this.rows; row < n; row++) {
      const key = keyOf(x[row] as number, this.width);
      if (current && current.key === key) addRow(current, row, this.store);
      else {
        current = newBucket(key, row, this.store.seriesCount);
        addRow(current, row, this.store);
        this.buckets.push(current);
      }
    }
    this.rows = n;
    this.dirtyFrom = Math.min(this.dirtyFrom, Math.max(0, from));
  }

  /** Row `row` (already folded in) changed its values: its bucket is summarized again. */
  rowChanged(row: number): void {
    if (row >= this.rows) return;
    // Only the last rows change (an eval loss filling in its step): search from the end.
    let index = this.buckets.length - 1;
    while (index > 0 && (this.buckets[index] as Bucket).firstRow > row) index--;
    const bucket = this.buckets[index];
    if (!bucket) return;
    rescan(bucket, this.store);
    this.dirtyFrom = Math.min(this.dirtyFrom, index);
  }

  /** The rows to draw. The same arrays each time (updated in place): copy to keep a version. */
  output(): Decimated {
    if (this.dirtyFrom < this.buckets.length || this.dirtyFrom === 0) {
      const from = this.dirtyFrom;
      truncate(this.out, from === 0 ? 0 : (this.buckets[from] as Bucket).outStart);
      for (let i = from; i < this.buckets.length; i++) {
        const bucket = this.buckets[i] as Bucket;
        bucket.outStart = this.out.x.length;
        emit(bucket, this.store, this.options.gaps, this.out, this.scratch);
      }
    }
    this.dirtyFrom = this.buckets.length;
    return this.out;
  }
}

/** First row with x ≥ value (`length` if none); with `after`, first row with x > value. */
function search(x: Float64Array, length: number, value: number, after = false): number {
  let lo = 0;
  let hi = length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const v = x[mid] as number;
    if (v < value || (after && v === value)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The rows in x range [x0, x1] decimated from the full data (a zoomed view: zooming in reveals
 * every point once a column holds four or fewer), plus the row just outside each end (the line
 * runs on to the plot's edges) and the data's first and last rows (so the x extent of what is
 * handed to uPlot stays the data's, and a double click zooms back out to all of it).
 */
export function decimateRange(
  store: SeriesStore,
  x0: number,
  x1: number,
  options: DecimateOptions,
): Decimated {
  const out = emptyOutput(store.seriesCount);
  const n = store.length;
  if (n === 0) return out;
  const x = store.x;
  const lo = Math.max(0, search(x, n, x0) - 1);
  const hi = Math.min(n - 1, search(x, n, x1, true));
  const width = bucketWidth(x1 - x0, options.columns);
  const scratch = new Int32Array(2 + SLOTS * store.seriesCount);
  if (lo > 0) pushRow(out, store, 0);
  for (const bucket of scan(store, lo, hi, width)) emit(bucket, store, options.gaps, out, scratch);
  if (hi < n - 1) pushRow(out, store, n - 1);
  return out;
}
