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

import {
  addRow,
  bucketWidth,
  emit,
  emptyOutput,
  keyOf,
  mergePairs,
  newBucket,
  pushRow,
  rescan,
  scan,
  SLOTS,
  truncate,
  type Bucket,
  type Decimated,
} from './buckets';
import type { SeriesStore } from './seriesStore';

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
