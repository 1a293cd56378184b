import * as assert from 'node:assert/strict';
import { decimateRange, Decimator, type DecimateOptions } from '../../media/decimate';
import { bucketWidth, type Decimated } from '../../media/buckets';
import { SeriesStore } from '../../media/seriesStore';

/** A seeded generator (Park–Miller), so a failing case replays. */
function random(seed: number): () => number {
  let state = seed;
  return () => (state = (state * 16807) % 2147483647) / 2147483647;
}

interface Table {
  x: number[];
  ys: (number | null)[][];
}

/**
 * Training-like columns with what decimation must not lose: noisy values with rare spikes (up
 * and down), runs of gaps, a sparse series (a value every `sparseEvery` rows), jumps in x, a
 * series of few distinct values (ties).
 */
function table(n: number, seed: number, sparseEvery = 37): Table {
  const next = random(seed);
  const x: number[] = [];
  const ys: (number | null)[][] = [[], [], []];
  let step = Math.floor(next() * 10) - 5;
  let gapLeft = 0;
  for (let i = 0; i < n; i++) {
    step += next() < 0.01 ? 1 + Math.floor(next() * 500) : 1 + Math.floor(next() * 3);
    x.push(step);
    let loss = 2 * Math.exp(-i / (n / 4)) + 0.1 * next();
    const spike = next();
    if (spike < 0.002) loss += 5;
    else if (spike < 0.004) loss -= 5;
    if (gapLeft > 0) gapLeft--;
    else if (next() < 0.01) gapLeft = 1 + Math.floor(next() * 20);
    (ys[0] as (number | null)[]).push(gapLeft > 0 ? null : loss);
    (ys[1] as (number | null)[]).push(i % sparseEvery === 0 ? loss + 0.01 : null);
    // Few distinct values (a stepped schedule with blips): ties for the smallest and largest.
    const lr = 1e-4 * (1 - Math.floor((10 * i) / n) / 10) * (next() < 0.1 ? 2 : 1);
    (ys[2] as (number | null)[]).push(next() < 0.05 ? null : lr);
  }
  return { x, ys };
}

/** Loss breaks at its gaps, eval loss (sparse) joins them, the learning rate breaks. */
const GAPS = [true, false, true];

function options(columns: number): DecimateOptions {
  return { columns, gaps: GAPS };
}

function fill(store: SeriesStore, data: Table, from = 0, to = data.x.length): void {
  for (let i = from; i < to; i++) {
    store.push(
      data.x[i] as number,
      data.ys.map((column) => column[i] ?? null),
    );
  }
}

function fromScratch(
  store: SeriesStore,
  columns: number,
): { out: Decimated; decimator: Decimator } {
  const decimator = new Decimator(store, options(columns));
  decimator.rebuild();
  const out = decimator.output();
  return { out: { x: out.x.slice(), ys: out.ys.map((c) => c.slice()) }, decimator };
}

function copy(out: Decimated): Decimated {
  return { x: out.x.slice(), ys: out.ys.map((c) => c.slice()) };
}

/** The full-table row of each output row (x is strictly ascending in these tables). */
function rowsOf(out: Decimated, data: Table): number[] {
  const index = new Map(data.x.map((x, row) => [x, row]));
  return out.x.map((x) => {
    const row = index.get(x);
    assert.ok(row !== undefined, `output x ${x} is not a row of the data`);
    return row;
  });
}

/** Every output row is a row of the data with its own values, ascending, each once. */
function assertRowsOfData(out: Decimated, data: Table): number[] {
  const rows = rowsOf(out, data);
  for (let i = 1; i < rows.length; i++) {
    assert.ok((rows[i] as number) > (rows[i - 1] as number), `rows out of order at ${i}`);
  }
  for (let s = 0; s < data.ys.length; s++) {
    const column = out.ys[s] as (number | null)[];
    assert.equal(column.length, out.x.length);
    rows.forEach((row, i) => {
      assert.equal(column[i], (data.ys[s] as (number | null)[])[row], `series ${s} at row ${row}`);
    });
  }
  return rows;
}

/**
 * In each bucket of `width` over rows [from, to], each series' first, last, smallest and largest
 * value is among the output rows (a spike is never lost), and the bucket's first and last rows.
 */
function assertBucketsKept(
  kept: Set<number>,
  data: Table,
  width: number,
  from = 0,
  to = data.x.length - 1,
): number {
  const key = (row: number): number =>
    width > 0 ? Math.floor((data.x[row] as number) / width) : 0;
  let buckets = 0;
  let start = from;
  while (start <= to) {
    let end = start;
    while (end + 1 <= to && key(end + 1) === key(start)) end++;
    buckets++;
    assert.ok(kept.has(start) && kept.has(end), `bucket rows ${start}..${end}: ends dropped`);
    for (let s = 0; s < data.ys.length; s++) {
      const column = data.ys[s] as (number | null)[];
      let min = Infinity;
      let max = -Infinity;
      let firstValue = -1;
      let lastValue = -1;
      for (let row = start; row <= end; row++) {
        const value = column[row];
        if (value === null || value === undefined) continue;
        if (firstValue < 0) firstValue = row;
        lastValue = row;
        min = Math.min(min, value);
        max = Math.max(max, value);
      }
      if (firstValue < 0) continue;
      assert.ok(kept.has(firstValue) && kept.has(lastValue), `series ${s} ends, ${start}..${end}`);
      const keptValues = [...kept]
        .filter((row) => row >= start && row <= end)
        .map((row) => column[row])
        .filter((v): v is number => typeof v === 'number');
      assert.equal(Math.min(...keptValues), min, `series ${s} min in rows ${start}..${end}`);
      assert.equal(Math.max(...keptValues), max, `series ${s} max in rows ${start}..${end}`);
      // A gap between the bucket's values (a line that breaks there) stays a break.
      if (GAPS[s] === true && column.slice(firstValue, lastValue).includes(null)) {
        assert.ok(
          [...kept].some((row) => row > firstValue && row < lastValue && column[row] === null),
          `series ${s}: the gap inside rows ${start}..${end} is drawn joined`,
        );
      }
    }
    start = end + 1;
  }
  return buckets;
}

/**
 * A series whose gaps break its line is drawn joined across a gap of the data only inside one
 * bucket (narrower than a pixel column): two output rows adjacent in the output, both with a
 * value, that have a gap between them in the data, are in the same bucket.
 */
function assertGapsKept(out: Decimated, rows: number[], data: Table, width: number): void {
  for (let s = 0; s < data.ys.length; s++) {
    if (GAPS[s] !== true) continue;
    const column = data.ys[s] as (number | null)[];
    const drawn = out.ys[s] as (number | null)[];
    for (let i = 1; i < rows.length; i++) {
      if (drawn[i] === null || drawn[i - 1] === null) continue;
      const a = rows[i - 1] as number;
      const b = rows[i] as number;
      let gap = false;
      for (let row = a + 1; row < b && !gap; row++) gap = column[row] === null;
      if (!gap) continue;
      const key = (row: number): number => Math.floor((data.x[row] as number) / width);
      assert.equal(
        key(a),
        key(b),
        `series ${s}: rows ${a} and ${b} are joined across a gap of the data in different buckets`,
      );
    }
  }
}

describe('Chart decimation (media/decimate.ts)', () => {
  it('bucketWidth is the largest power of two not above range ÷ columns', () => {
    for (const [range, columns] of [
      [200_000, 900],
      [900, 900],
      [899, 900],
      [1, 1000],
      [1e12, 3],
      [1024, 1],
    ] as const) {
      const width = bucketWidth(range, columns);
      const per = range / columns;
      assert.ok(width <= per && per < 2 * width, `${range}/${columns}: width ${width}`);
      assert.equal(2 ** Math.round(Math.log2(width)), width, `${width} is not a power of two`);
    }
    assert.equal(bucketWidth(0, 900), 0);
    assert.equal(bucketWidth(Number.NaN, 900), 0);
  });

  it('keeps every bucket’s first, last, smallest and largest value (spikes), and the x extent', () => {
    const data = table(50_000, 7);
    const store = new SeriesStore(3);
    fill(store, data);
    const columns = 800;
    const { out, decimator } = fromScratch(store, columns);
    const rows = assertRowsOfData(out, data);
    assert.equal(out.x[0], data.x[0]);
    assert.equal(out.x[out.x.length - 1], data.x[data.x.length - 1]);
    const width = decimator.bucketWidth;
    const range = (data.x[data.x.length - 1] as number) - (data.x[0] as number);
    assert.ok(width <= range / columns && range / columns < 2 * width);
    const buckets = assertBucketsKept(new Set(rows), data, width);
    assert.equal(decimator.bucketCount, buckets);
    assert.ok(buckets <= 2 * columns + 1, `${buckets} buckets for ${columns} columns`);
    // The spikes of the data are all drawn.
    const loss = data.ys[0] as (number | null)[];
    const values = loss.filter((v): v is number => v !== null);
    const drawn = (out.ys[0] as (number | null)[]).filter((v): v is number => v !== null);
    assert.equal(Math.max(...drawn), Math.max(...values));
    assert.equal(Math.min(...drawn), Math.min(...values));
  });

  it('never joins a gap of the data across buckets (lines that break at gaps)', () => {
    const data = table(30_000, 11);
    const store = new SeriesStore(3);
    fill(store, data);
    const { out, decimator } = fromScratch(store, 500);
    const rows = assertRowsOfData(out, data);
    assertGapsKept(out, rows, data, decimator.bucketWidth);
    // And leading and trailing gaps stay: a series that starts and ends with gaps.
    const edges: Table = { x: [1, 2, 3, 4, 5, 6], ys: [[null, null, 1, 2, null, null]] };
    const small = new SeriesStore(1);
    fill(small, edges);
    const decimator1 = new Decimator(small, { columns: 1, gaps: [true] });
    decimator1.rebuild();
    const edged = decimator1.output();
    assert.equal(edged.ys[0]?.[0], null);
    assert.equal(edged.ys[0]?.[edged.x.length - 1], null);
    assert.equal(edged.x[0], 1);
    assert.equal(edged.x[edged.x.length - 1], 6);
  });

  it('hands over a number of rows bounded by the columns, not by the points', () => {
    const columns = 900;
    for (const n of [20_000, 200_000]) {
      const store = new SeriesStore(3);
      const data = table(n, 3, 500);
      data.ys[2] = data.x.map((_, i) => 1e-4 * (1 - i / n)); // a linear decay
      fill(store, data);
      const { out, decimator } = fromScratch(store, columns);
      // At most 2 + 4 per series (+3 per series that breaks at gaps) rows per bucket.
      const bound = (2 * columns + 1) * (2 + 4 * 3 + 3 * 2);
      assert.ok(decimator.bucketCount <= 2 * columns + 1);
      assert.ok(out.x.length <= bound, `${out.x.length} rows for ${n} points`);
      // Training-like data (noisy loss, monotone learning rate): about 4 rows per bucket.
      assert.ok(
        out.x.length <= 6 * decimator.bucketCount,
        `${out.x.length} rows for ${decimator.bucketCount} buckets`,
      );
    }
    // Fewer points than columns: every point is drawn.
    const data = table(300, 5);
    const store = new SeriesStore(3);
    fill(store, data);
    const { out } = fromScratch(store, 4000);
    assert.deepEqual(out.x, data.x);
  });

  it('decimates incrementally exactly as from scratch, through appends, widenings and fills', () => {
    for (const seed of [1, 2, 3, 4]) {
      const data = table(20_000, seed);
      const next = random(seed + 100);
      const store = new SeriesStore(3, 16);
      const columns = 300 + Math.floor(next() * 700);
      const decimator = new Decimator(store, options(columns));
      let widenings = 0;
      let lastWidth = 0;
      let row = 0;
      while (row < data.x.length) {
        const chunk = next() < 0.7 ? 1 : 1 + Math.floor(next() * 400);
        const to = Math.min(data.x.length, row + chunk);
        fill(store, data, row, to);
        row = to;
        // Usually the chart folds appends in before the next one (a frame each).
        if (next() < 0.8) decimator.update();
        // An eval loss logged after its step's loss fills the last row in (a spike, at times).
        if (next() < 0.2) {
          const value = 10 * next() - 5;
          (data.ys[1] as (number | null)[])[row - 1] = value;
          if (store.fillLast([null, value, null])) decimator.rowChanged(store.length - 1);
        }
        decimator.update();
        if (decimator.bucketWidth > lastWidth && lastWidth > 0) widenings++;
        lastWidth = decimator.bucketWidth;
        if (next() < 0.05 || row === data.x.length) {
          const incremental = copy(decimator.output());
          const scratch = fromScratch(store, columns);
          assert.deepEqual(incremental, scratch.out, `seed ${seed}: differs at ${row} rows`);
          assert.equal(decimator.bucketWidth, scratch.decimator.bucketWidth);
          assert.equal(decimator.bucketCount, scratch.decimator.bucketCount);
        }
      }
      assert.ok(widenings >= 3, `seed ${seed}: only ${widenings} widenings were exercised`);
      const rows = assertRowsOfData(decimator.output(), data);
      assertBucketsKept(new Set(rows), data, decimator.bucketWidth);
      assertGapsKept(decimator.output(), rows, data, decimator.bucketWidth);
    }
  });

  it('decimates again for a new column count (a resize) as from scratch', () => {
    const data = table(10_000, 9);
    const store = new SeriesStore(3);
    fill(store, data);
    const decimator = new Decimator(store, options(1000));
    decimator.update();
    decimator.output();
    decimator.setColumns(250);
    assert.equal(decimator.columns, 250);
    assert.deepEqual(copy(decimator.output()), fromScratch(store, 250).out);
  });

  it('starts over after the store is cleared and refilled', () => {
    const store = new SeriesStore(3);
    const decimator = new Decimator(store, options(100));
    fill(store, table(5000, 1));
    decimator.update();
    decimator.output();
    store.clear();
    const data = table(3000, 2);
    fill(store, data);
    decimator.rebuild();
    assert.deepEqual(copy(decimator.output()), fromScratch(store, 100).out);
    assertRowsOfData(decimator.output(), data);
    // A whole table loaded at once (setData) holds what a push per row would.
    for (const n of [20_000, 10]) {
      const bigger = table(n, 4);
      const loaded = new SeriesStore(3, 16);
      loaded.load(bigger.x, bigger.ys);
      const pushed = new SeriesStore(3);
      fill(pushed, bigger);
      assert.equal(loaded.length, n);
      assert.deepEqual(fromScratch(loaded, 100).out, fromScratch(pushed, 100).out);
      assertRowsOfData(fromScratch(loaded, 100).out, bigger);
      // And appends after a load go on from its last row.
      loaded.push(1e9, [1, 2, 3]);
      assert.equal(loaded.x[n], 1e9);
      assert.equal(loaded.y(2)[n], 3);
    }
  });

  it('stores a missing or non-finite value as a gap', () => {
    const store = new SeriesStore(2);
    store.push(1, [Number.NaN, Number.POSITIVE_INFINITY]);
    store.push(2, [undefined, 3]);
    const decimator = new Decimator(store, { columns: 10, gaps: [true, true] });
    decimator.rebuild();
    assert.deepEqual(decimator.output(), {
      x: [1, 2],
      ys: [
        [null, null],
        [null, 3],
      ],
    });
    assert.equal(store.fillLast([null, null]), false);
    assert.equal(store.fillLast([4, 3]), true);
  });

  it('decimates a zoomed range from the full data, every point once a column holds few', () => {
    const data = table(100_000, 13);
    const store = new SeriesStore(3);
    fill(store, data);
    const columns = 600;
    const n = data.x.length;
    const next = random(99);
    let closeZooms = 0;
    for (let trial = 0; trial < 20; trial++) {
      const a = Math.floor(next() * n);
      const b = Math.min(n - 1, a + Math.floor(next() * (trial < 10 ? 50_000 : 150)));
      // Edges between rows, as a drag selects them.
      const x0 = (data.x[a] as number) - 0.5;
      const x1 = (data.x[b] as number) + 0.5;
      const out = decimateRange(store, x0, x1, options(columns));
      const rows = assertRowsOfData(out, data);
      const kept = new Set(rows);
      // The data's extent, and the rows just outside the range (the line runs to the edges).
      assert.ok(kept.has(0) && kept.has(n - 1));
      if (a > 0) assert.ok(kept.has(a - 1), 'the row before the range');
      if (b < n - 1) assert.ok(kept.has(b + 1), 'the row after the range');
      const lo = Math.max(0, a - 1);
      const hi = Math.min(n - 1, b + 1);
      const width = bucketWidth(x1 - x0, columns);
      const buckets = assertBucketsKept(kept, data, width, lo, hi);
      assert.ok(out.x.length <= buckets * (2 + 4 * 3 + 3 * 2) + 2);
      // At most one step per column: buckets hold one row each.
      if (x1 - x0 <= columns) {
        closeZooms++;
        for (let row = a; row <= b; row++) assert.ok(kept.has(row), `row ${row} of a close zoom`);
      }
      const inRange = rows.filter((row) => row >= lo && row <= hi);
      const inRangeOut: Decimated = {
        x: inRange.map((row) => data.x[row] as number),
        ys: data.ys.map((column) => inRange.map((row) => column[row] ?? null)),
      };
      assertGapsKept(inRangeOut, inRange, data, width);
    }
    assert.ok(closeZooms >= 5, `only ${closeZooms} close zooms were tried`);
    // Zoomed on the whole range: the same rows as the whole data decimated at that width.
    const whole = decimateRange(
      store,
      data.x[0] as number,
      data.x[n - 1] as number,
      options(columns),
    );
    assert.deepEqual(whole, fromScratch(store, columns).out);
  });
});
