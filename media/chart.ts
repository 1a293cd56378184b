import uPlot from 'uplot';

/**
 * The run page's chart: uPlot (bundled, no CDN) behind a small pure API so it can be bundled and
 * measured alone (a headless benchmark draws 200,000 points and appends at 10 Hz). It knows
 * nothing of runs, messages or VS Code: the page hands it aligned columns and theme colours.
 *
 *   const chart = create(container, { series: [...] });
 *   chart.setData({ x: [...steps], ys: [[...loss], [...evalLoss], [...lr]] });
 *   chart.append({ x: [101, 102], ys: [[0.5, 0.49], [null, null], [1e-4, 1e-4]] });
 *   chart.dispose();
 *
 * After every draw the container carries `data-points="<n>"` (x values drawn) so tests can read
 * what is on screen without poking into the canvas.
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
  /** Replaces everything drawn. */
  setData(data: ChartData): void;
  /**
   * Adds points after the last one (x ascending; a first x equal to the last drawn one fills in
   * that point's values); redraws once.
   */
  append(data: ChartData): void;
  /** How many x values are drawn. */
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

export function create(container: HTMLElement, options: ChartOptions): Chart {
  const count = options.series.length;
  // uPlot keeps references to these arrays: appends push into them and redraw.
  let x: number[] = [];
  let ys: (number | null)[][] = options.series.map(() => []);
  let plot: uPlot | null = null;
  let observer: ResizeObserver | null = null;
  let disposed = false;

  const size = (): { width: number; height: number } => {
    // The legend sits under the plot inside the container: leave it its room.
    const legend = container.querySelector<HTMLElement>('.u-legend');
    const legendPx = legend ? legend.offsetHeight : LEGEND_PX;
    return {
      width: Math.max(MIN_WIDTH, Math.floor(options.width ?? container.clientWidth)),
      height: Math.max(MIN_HEIGHT, Math.floor(options.height ?? container.clientHeight - legendPx)),
    };
  };

  const mark = (): void => {
    container.dataset.points = String(x.length);
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
    const xAxis = axis('x', 2, options.xLabel ?? 'step');
    // Steps are whole numbers: no tick at 2.5.
    xAxis.incrs = STEP_INCREMENTS;
    const axes: uPlot.Axis[] = [xAxis, axis('loss', 3, 'loss')];
    if (hasLr) {
      const lrAxis = axis('lr', 1, 'learning rate');
      // Learning rates are small: exponent notation keeps the labels short.
      lrAxis.values = (_u, splits) => splits.map((v) => (v === 0 ? '0' : v.toExponential(1)));
      lrAxis.size = 60;
      axes.push(lrAxis);
    }
    const opts: uPlot.Options = {
      ...size(),
      // Points are not drawn one by one on a dense chart; uPlot decimates per pixel column.
      pxAlign: 0,
      scales: { x: { time: false }, loss: { auto: true }, lr: { auto: true } },
      legend: { show: true, live: false },
      cursor: { drag: { x: true, y: false } },
      axes,
      series: [
        { label: options.xLabel ?? 'step' },
        ...options.series.map((spec): uPlot.Series => ({
          label: spec.label,
          scale: spec.axis,
          stroke: color(spec.color),
          width: 1.5,
          dash: spec.dash,
          spanGaps: spec.sparse === true,
          points: { show: spec.sparse === true, size: 5 },
        })),
      ],
    };
    return new uPlot(opts, [x, ...ys] as uPlot.AlignedData, container);
  };

  plot = build();
  mark();

  if (options.autoResize !== false && typeof ResizeObserver !== 'undefined') {
    observer = new ResizeObserver(() => {
      if (plot && !disposed) plot.setSize(size());
    });
    observer.observe(container);
  }

  const redraw = (): void => {
    if (!plot || disposed) return;
    const target = plot;
    // batch(): draw now, not in uPlot's microtask, so the caller's timing covers the draw.
    target.batch(() => target.setData([x, ...ys] as uPlot.AlignedData, true));
    mark();
  };

  return {
    setData(data: ChartData): void {
      check(data, count);
      x = data.x.slice();
      ys = data.ys.map((column) => column.slice());
      redraw();
    },
    append(data: ChartData): void {
      check(data, count);
      if (data.x.length === 0) return;
      const last = x[x.length - 1];
      const first = data.x[0];
      if (last !== undefined && first !== undefined && first < last) {
        throw new RangeError(`appended x ${first} is before the last drawn x ${last}`);
      }
      // A first point at the last drawn x completes that point (an eval loss logged after the
      // training loss of the same step): its values fill in, the rest is appended.
      let from = 0;
      if (last !== undefined && first === last) {
        for (let s = 0; s < count; s++) {
          const value = (data.ys[s] as (number | null)[])[0] ?? null;
          if (value !== null) (ys[s] as (number | null)[])[x.length - 1] = value;
        }
        from = 1;
      }
      for (let i = from; i < data.x.length; i++) x.push(data.x[i] as number);
      for (let s = 0; s < count; s++) {
        const column = ys[s] as (number | null)[];
        const added = data.ys[s] as (number | null)[];
        for (let i = from; i < added.length; i++) column.push(added[i] ?? null);
      }
      redraw();
    },
    points(): number {
      return x.length;
    },
    restyle(): void {
      if (disposed) return;
      plot?.destroy();
      plot = build();
      mark();
    },
    dispose(): void {
      if (disposed) return;
      disposed = true;
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
