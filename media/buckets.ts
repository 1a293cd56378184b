import type { SeriesStore } from './seriesStore';

/**
 * The decimation's buckets (decimate.ts): one per pixel column, summarizing its rows by the
 * first, last, smallest and largest value of each series and where its gaps fall, so that two
 * adjacent buckets merge exactly and a bucket emits the rows that draw the same pixels.
 */

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

export function keyOf(x: number, width: number): number {
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
export const SLOTS = 7;

export interface Bucket {
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

export function newBucket(key: number, row: number, seriesCount: number): Bucket {
  return {
    key,
    firstRow: row,
    lastRow: row,
    stats: new Array<number>(SLOTS * seriesCount).fill(-1),
    outStart: 0,
  };
}

/** Folds row `row` (after the bucket's rows) into the bucket. */
export function addRow(bucket: Bucket, row: number, store: SeriesStore): void {
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
export function rescan(bucket: Bucket, store: SeriesStore): void {
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
export function mergePairs(buckets: Bucket[], store: SeriesStore): Bucket[] {
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
export function pushRow(out: Decimated, store: SeriesStore, row: number): void {
  out.x.push(store.x[row] as number);
  const columns = store.ys;
  for (let s = 0; s < columns.length; s++) {
    const value = (columns[s] as Float64Array)[row] as number;
    // value !== value: NaN, a gap.
    (out.ys[s] as (number | null)[]).push(value !== value ? null : value);
  }
}

/** Emits a bucket's kept rows, ascending and each once. */
export function emit(
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

export function emptyOutput(seriesCount: number): Decimated {
  return { x: [], ys: Array.from({ length: seriesCount }, () => []) };
}

export function truncate(out: Decimated, length: number): void {
  out.x.length = length;
  for (const column of out.ys) column.length = length;
}

/** Scans rows [from, to] into buckets of `width`. */
export function scan(store: SeriesStore, from: number, to: number, width: number): Bucket[] {
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
