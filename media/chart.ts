import uPlot from 'uplot';
import { decimateRange, Decimator } from './decimate';
import { SeriesStore } from './seriesStore';
import { elapsedLabel, faded } from './chartView';
import { exponentTickLabels } from './ticks';

/**
 * The run page's chart: uPlot (bundled, no CDN) behind a small pure API so it can be bundled and
 * measured alone (a headless benchmark draws 200,000 points and appends at 10 Hz). It knows
 * nothing of runs, messages or VS Code: the page hands it aligned columns and theme colours.
 *
 * It keeps every point (media/decimate.ts) and hands uPlot only a few rows per pixel column (each
 * column's first, last, smallest and largest value per series: the same pixels as all the points,
 * spikes included), decimated again from the full data on a resize and on a zoom. Appends are
 * drawn once per animation frame however many arrive in it.
 *
 *   const chart = create(container, { series: [...] });
 *   chart.setData({ x: [...steps], ys: [[...loss], [...evalLoss], [...lr]] });
 *   chart.append({ x: [101, 102], ys: [[0.5, 0.49], [null, null], [1e-4, 1e-4]] });
 *   chart.dispose();
 *
 * After every draw the container carries `data-points="<n>"` (x values the chart holds) and
 * `data-rows="<n>"` (rows handed to uPlot after decimation), and `data-axes` the x and loss axes'
 * labels (`data-x-ticks` the wall-time ticks), so tests can read what is on screen without
 * poking into the canvas.
 */

/** Which y axis a series is drawn against: losses on the left, the learning rate on the right. */
export type ChartAxis = 'loss' | 'lr';

export interface ChartSeriesSpec {
  label: string;
  /** A CSS colour or a CSS variable (`--vscode-charts-blue`, `var(--vscode-charts-blue)`). */
  color: string;
  axis: ChartAxis;
  /** Dashes for the line (e.g. the learning rate), in pixels. */
  dash?: number[];
  /** Sparse series (eval loss): join the gaps and show the points. */
  sparse?: boolean;
  /**
   * Join the line across missing values without showing the points: compare mode, where a run
   * has no value at another run's steps (else its line would break at every one of them).
   */
  joinGaps?: boolean;
  /** Drawn faint and thin behind the others (the raw line under its smoothed one). */
  faint?: boolean;
}

export interface ChartOptions {
  series: ChartSeriesSpec[];
  /** Pixels; default the container's size (at least 200 × 160). */
  width?: number;
  height?: number;
  /** Label of the x axis; default `step`. */
  xLabel?: string;
  /** Follow the container's size (ResizeObserver); default true. */
  autoResize?: boolean;
  /** The loss axis on a log scale (values ≤ 0 must be null); default linear. */
  logLoss?: boolean;
  /** `time`: x is seconds since the run's first point, labelled as elapsed time; default `step`. */
  xKind?: 'step' | 'time';
}

/**
 * Aligned columns: `x` ascending, and one column per series with `ys[i].length === x.length`;
 * null where a series has no value at that x.
 */
export interface ChartData {
  x: number[];
  ys: (number | null)[][];
}

export interface Chart {
  /** Replaces all the data and draws at once (a zoom the new data still reaches is kept). */
  setData(data: ChartData): void;
  /**
   * Adds points after the last one (x ascending, else a RangeError and nothing is added; a first
   * x equal to the last one fills in that point's values). Drawn at the next animation frame:
   * appends within one frame draw once.
   */
  append(data: ChartData): void;
  /** How many x values the chart holds (drawn by the next frame). */
  points(): number;
  /** Redraws with the theme's current colours (after a theme change). */
  restyle(): void;
  dispose(): void;
}

const MIN_WIDTH = 200;
const MIN_HEIGHT = 160;
/** Tick spacings of the step axis: 1, 2, 5, 10, 20, 50, … */
const STEP_INCREMENTS: number[] = [];
for (let power = 1; power <= 1e12; power *= 10) STEP_INCREMENTS.push(power, 2 * power, 5 * power);
/** Tick spacings of the wall-time axis, seconds: 1 s … 30 s, 1 min … 30 min, 1 h … 12 h, days. */
const TIME_INCREMENTS = [
  1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800,
  432000, 864000,
];
/** Room for the legend before it is first laid out. */
const LEGEND_PX = 32;

/** Resolves `--name`/`var(--name, fallback)` against `element`'s computed style; else returns `color`. */
export function resolveColor(element: Element, color: string, fallback = '#888'): string {
  const match = /^(?:var\(\s*)?(--[\w-]+)\s*(?:,\s*([^)]*))?\)?$/.exec(color.trim());
  if (!match) return color;
  const value = getComputedStyle(element)
    .getPropertyValue(match[1] ?? '')
    .trim();
  return value !== '' ? value : (match[2]?.trim() ?? fallback);
}

/** Checks the columns' shape; a mismatch is a bug in the caller, not something to draw around. */
function check(data: ChartData, seriesCount: number): void {
  if (data.ys.length !== seriesCount) {
    throw new RangeError(`expected ${seriesCount} series, got ${data.ys.length}`);
  }
  for (const column of data.ys) {
    if (column.length !== data.x.length) {
      throw new RangeError(`a series has ${column.length} values for ${data.x.length} x values`);
    }
  }
}

/** Pixel columns of a plot `widthCss` wide: device pixels, so a bucket is never wider than one. */
function columnsFor(widthCss: number): number {
  const ratio = typeof devicePixelRatio === 'number' && devicePixelRatio > 0 ? devicePixelRatio : 1;
  return Math.max(1, Math.ceil(widthCss * ratio));
}

/** One callback per animation frame (a timer where there are no frames, e.g. outside a page). */
const requestFrame = (callback: () => void): (() => void) => {
  if (typeof requestAnimationFrame === 'function') {
    const id = requestAnimationFrame(() => callback());
    return () => cancelAnimationFrame(id);
  }
  const id = setTimeout(callback, 16);
  return () => clearTimeout(id);
};

export function create(container: HTMLElement, options: ChartOptions): Chart {
  const count = options.series.length;
  // Every point received; uPlot only ever gets the decimated rows (a few per pixel column).
  const store = new SeriesStore(count);
  const joins = (spec: ChartSeriesSpec): boolean => spec.sparse === true || spec.joinGaps === true;
  const gaps = options.series.map((spec) => !joins(spec));
  let plot: uPlot | null = null;
  let observer: ResizeObserver | null = null;
  let disposed = false;
  /** The x range the user zoomed to (a drag), or null for all of the data. */
  let zoom: { min: number; max: number } | null = null;
  /** Set while the chart itself hands uPlot data: the x scale changes then are not the user's. */
  let applying = false;
  let cancelFrame: (() => void) | null = null;
  let zoomQueued = false;

  const size = (): { width: number; height: number } => {
    // The legend sits under the plot inside the container: leave it its room.
    const legend = container.querySelector<HTMLElement>('.u-legend');
    const legendPx = legend ? legend.offsetHeight : LEGEND_PX;
    return {
      width: Math.max(MIN_WIDTH, Math.floor(options.width ?? container.clientWidth)),
      height: Math.max(MIN_HEIGHT, Math.floor(options.height ?? container.clientHeight - legendPx)),
    };
  };

  let columns = columnsFor(size().width);
  const decimator = new Decimator(store, { columns, gaps });

  const mark = (rows: number): void => {
    container.dataset.points = String(store.length);
    container.dataset.rows = String(rows);
  };

  /**
   * Hands uPlot the rows to draw and draws now (batch: not in uPlot's microtask, so a caller's
   * timing covers the draw): the whole data decimated, or the zoomed range decimated again from
   * the full data (zooming in shows the points a coarser view merged). With `resized`, the plot
   * takes that size and the data is decimated for its columns, in the same draw.
   */
  const draw = (resized?: { width: number; height: number }): void => {
    cancelFrame?.();
    cancelFrame = null;
    if (!plot || disposed) return;
    const target = plot;
    if (resized) {
      columns = columnsFor(resized.width);
      decimator.setColumns(columns);
    }
    decimator.update();
    const range = zoom;
    // A zoom the data no longer reaches (after setData) is dropped.
    const n = store.length;
    if (
      range &&
      (n === 0 || range.max < (store.x[0] as number) || range.min > (store.x[n - 1] as number))
    ) {
      zoom = null;
    }
    const view = zoom
      ? decimateRange(store, zoom.min, zoom.max, { columns, gaps })
      : decimator.output();
    const data = [view.x, ...view.ys] as uPlot.AlignedData;
    applying = true;
    try {
      target.batch(() => {
        if (resized) target.setSize(resized);
        if (zoom) {
          // Keep the user's x range; the y scales range again over the new rows.
          target.setData(data, false);
          target.setScale('x', { min: zoom.min, max: zoom.max });
        } else {
          target.setData(data, true);
        }
      });
    } finally {
      applying = false;
    }
    mark(view.x.length);
  };

  /** Appends draw at the next animation frame: however many arrive in a frame, one draw. */
  const schedule = (): void => {
    if (cancelFrame || disposed) return;
    cancelFrame = requestFrame(() => {
      cancelFrame = null;
      draw();
    });
  };

  /**
   * The user zoomed (a drag) or zoomed out (a double click): decimate again for the new range
   * from the full data, right after uPlot's own draw (a microtask: before the frame is shown).
   */
  const onScale = (u: uPlot, key: string): void => {
    if (key !== 'x' || applying || disposed) return;
    const { min, max } = u.scales.x ?? {};
    if (min === undefined || max === undefined || min === null || max === null) return;
    // What uPlot holds always spans the data (decimateRange keeps the first and last rows), so
    // a range covering it is no zoom: a double click scales to it.
    const drawn = u.data[0];
    const all =
      drawn.length === 0 ||
      (min <= (drawn[0] as number) && max >= (drawn[drawn.length - 1] as number));
    if (all && zoom === null) return;
    zoom = all ? null : { min, max };
    if (zoomQueued) return;
    zoomQueued = true;
    queueMicrotask(() => {
      zoomQueued = false;
      draw();
    });
  };

  const build = (): uPlot => {
    const color = (c: string, fallback?: string): string => resolveColor(container, c, fallback);
    const foreground = color('--vscode-foreground', '#ccc');
    const grid = color('--vscode-editorWidget-border', 'rgba(128,128,128,0.25)');
    const font = `11px ${color('--vscode-font-family', 'sans-serif')}`;
    const hasLr = options.series.some((s) => s.axis === 'lr');
    const axis = (scale: string, side: 0 | 1 | 2 | 3, label: string): uPlot.Axis => ({
      scale,
      side,
      label,
      stroke: foreground,
      font,
      labelFont: font,
      grid: { stroke: grid, width: 1, show: side !== 1 },
      ticks: { stroke: grid, width: 1 },
    });
    const byTime = options.xKind === 'time';
    const xAxis = axis('x', 2, options.xLabel ?? (byTime ? 'wall time' : 'step'));
    if (byTime) {
      xAxis.incrs = TIME_INCREMENTS;
      xAxis.values = (_u, splits) => {
        const labels = splits.map((v) => elapsedLabel(v));
        // The axes are drawn on the canvas: tests read the labels here.
        container.dataset.xTicks = labels.join(' ');
        return labels;
      };
    } else {
      // Steps are whole numbers: no tick at 2.5.
      xAxis.incrs = STEP_INCREMENTS;
    }
    const lossAxis = axis('loss', 3, options.logLoss === true ? 'loss (log)' : 'loss');
    if (options.logLoss === true) {
      // uPlot leaves a log axis's skipped splits null: no label there.
      lossAxis.values = (_u, splits) =>
        splits.map((v) => (typeof v === 'number' ? String(Number(v.toPrecision(2))) : ''));
    }
    const axes: uPlot.Axis[] = [xAxis, lossAxis];
    container.dataset.axes = `${xAxis.label ?? ''} | ${lossAxis.label ?? ''}`;
    if (hasLr) {
      const lrAxis = axis('lr', 1, 'learning rate');
      // Learning rates are small: exponent notation keeps the labels short, with the precision
      // the tick spacing needs for the labels to differ.
      lrAxis.values = (_u, splits) => exponentTickLabels(splits);
      lrAxis.size = 60;
      axes.push(lrAxis);
    }
    const opts: uPlot.Options = {
      ...size(),
      pxAlign: 0,
      scales: {
        x: { time: false },
        loss: options.logLoss === true ? { auto: true, distr: 3, log: 10 } : { auto: true },
        lr: { auto: true },
      },
      legend: { show: true, live: false },
      cursor: { drag: { x: true, y: false } },
      hooks: { setScale: [onScale] },
      axes,
      series: [
        { label: options.xLabel ?? (byTime ? 'wall time' : 'step') },
        ...options.series.map((spec): uPlot.Series => ({
          label: spec.label,
          scale: spec.axis,
          stroke: spec.faint === true ? faded(color(spec.color)) : color(spec.color),
          width: spec.faint === true ? 1 : 1.5,
          dash: spec.dash,
          spanGaps: joins(spec),
          points: { show: spec.sparse === true, size: 5 },
        })),
      ],
    };
    const empty = [[], ...options.series.map(() => [])] as uPlot.AlignedData;
    // Initialized inside batch(): drawn now, not in a microtask that would draw everything again
    // after the first setData.
    return new uPlot(opts, empty, (u, init) => {
      container.appendChild(u.root);
      u.batch(() => init());
    });
  };

  plot = build();
  mark(0);

  if (options.autoResize !== false && typeof ResizeObserver !== 'undefined') {
    observer = new ResizeObserver(() => {
      if (plot && !disposed) draw(size());
    });
    observer.observe(container);
  }

  /** The values of row `i` of `data`, one per series (null: none). */
  const rowOf = (data: ChartData, i: number, into: (number | null)[]): (number | null)[] => {
    for (let s = 0; s < count; s++) into[s] = (data.ys[s] as (number | null)[])[i] ?? null;
    return into;
  };

  return {
    setData(data: ChartData): void {
      check(data, count);
      store.load(data.x, data.ys);
      decimator.rebuild();
      draw();
    },
    append(data: ChartData): void {
      check(data, count);
      if (data.x.length === 0) return;
      const n = store.length;
      const last = n > 0 ? (store.x[n - 1] as number) : undefined;
      const first = data.x[0] as number;
      if (last !== undefined && first < last) {
        throw new RangeError(`appended x ${first} is before the last drawn x ${last}`);
      }
      for (let i = 1; i < data.x.length; i++) {
        if ((data.x[i] as number) < (data.x[i - 1] as number)) {
          throw new RangeError(
            `appended x ${data.x[i]} is before the x ${data.x[i - 1]} it follows`,
          );
        }
      }
      const row: (number | null)[] = new Array<number | null>(count);
      // A first point at the last x completes that point (an eval loss logged after the
      // training loss of the same step): its values fill in, the rest is appended.
      let from = 0;
      if (last !== undefined && first === last) {
        if (store.fillLast(rowOf(data, 0, row))) decimator.rowChanged(n - 1);
        from = 1;
      }
      for (let i = from; i < data.x.length; i++)
        store.push(data.x[i] as number, rowOf(data, i, row));
      schedule();
    },
    points(): number {
      return store.length;
    },
    restyle(): void {
      if (disposed) return;
      plot?.destroy();
      plot = build();
      draw();
    },
    dispose(): void {
      if (disposed) return;
      disposed = true;
      cancelFrame?.();
      cancelFrame = null;
      observer?.disconnect();
      plot?.destroy();
      plot = null;
    },
  };
}

/**
 * Aligns several runs' series (each its own ascending x) on the union of their x values, with
 * null where a run has no point: one column per run, for compare mode.
 */
export function alignColumns(tables: { x: number[]; y: (number | null)[] }[]): ChartData {
  const union: number[] = [];
  const cursors = tables.map(() => 0);
  // A k-way merge of sorted arrays; k is small (the runs compared).
  for (;;) {
    let next = Infinity;
    for (let t = 0; t < tables.length; t++) {
      const v = tables[t]?.x[cursors[t] ?? 0];
      if (v !== undefined && v < next) next = v;
    }
    if (next === Infinity) break;
    union.push(next);
    for (let t = 0; t < tables.length; t++) {
      const table = tables[t] as { x: number[] };
      // Equal x values within one table (a restarted trainer) collapse onto one point.
      while (table.x[cursors[t] ?? 0] === next) cursors[t] = (cursors[t] ?? 0) + 1;
    }
  }
  const ys = tables.map((table) => {
    const column: (number | null)[] = new Array<number | null>(union.length).fill(null);
    let j = 0;
    for (let i = 0; i < table.x.length; i++) {
      const v = table.x[i] as number;
      while (j < union.length && (union[j] as number) < v) j++;
      if (j < union.length && union[j] === v) column[j] = table.y[i] ?? null;
    }
    return column;
  });
  return { x: union, ys };
}
