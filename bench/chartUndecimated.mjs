/* global getComputedStyle, ResizeObserver */
/**
 * BENCHMARK BASELINE, not shipped: media/chart.ts as it was before it decimated (commit bcacd9d),
 * types stripped (esbuild transform), logic unchanged, so bench/chart.bench.ts measures the old
 * path side by side with the new one in the same run: every point goes to uPlot, and every
 * append calls setData on all of them and redraws at once. Same create()/setData()/append() API.
 */
import uPlot from 'uplot';
const MIN_WIDTH = 200;
const MIN_HEIGHT = 160;
const STEP_INCREMENTS = [];
for (let power = 1; power <= 1e12; power *= 10) STEP_INCREMENTS.push(power, 2 * power, 5 * power);
const LEGEND_PX = 32;
function resolveColor(element, color, fallback = '#888') {
  const match = /^(?:var\(\s*)?(--[\w-]+)\s*(?:,\s*([^)]*))?\)?$/.exec(color.trim());
  if (!match) return color;
  const value = getComputedStyle(element)
    .getPropertyValue(match[1] ?? '')
    .trim();
  return value !== '' ? value : (match[2]?.trim() ?? fallback);
}
function check(data, seriesCount) {
  if (data.ys.length !== seriesCount) {
    throw new RangeError(`expected ${seriesCount} series, got ${data.ys.length}`);
  }
  for (const column of data.ys) {
    if (column.length !== data.x.length) {
      throw new RangeError(`a series has ${column.length} values for ${data.x.length} x values`);
    }
  }
}
function create(container, options) {
  const count = options.series.length;
  let x = [];
  let ys = options.series.map(() => []);
  let plot = null;
  let observer = null;
  let disposed = false;
  const size = () => {
    const legend = container.querySelector('.u-legend');
    const legendPx = legend ? legend.offsetHeight : LEGEND_PX;
    return {
      width: Math.max(MIN_WIDTH, Math.floor(options.width ?? container.clientWidth)),
      height: Math.max(MIN_HEIGHT, Math.floor(options.height ?? container.clientHeight - legendPx)),
    };
  };
  const mark = () => {
    container.dataset.points = String(x.length);
  };
  const build = () => {
    const color = (c, fallback) => resolveColor(container, c, fallback);
    const foreground = color('--vscode-foreground', '#ccc');
    const grid = color('--vscode-editorWidget-border', 'rgba(128,128,128,0.25)');
    const font = `11px ${color('--vscode-font-family', 'sans-serif')}`;
    const hasLr = options.series.some((s) => s.axis === 'lr');
    const axis = (scale, side, label) => ({
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
    xAxis.incrs = STEP_INCREMENTS;
    const axes = [xAxis, axis('loss', 3, 'loss')];
    if (hasLr) {
      const lrAxis = axis('lr', 1, 'learning rate');
      lrAxis.values = (_u, splits) => splits.map((v) => (v === 0 ? '0' : v.toExponential(1)));
      lrAxis.size = 60;
      axes.push(lrAxis);
    }
    const opts = {
      ...size(),
      // Points are not drawn one by one on a dense chart; uPlot decimates per pixel column.
      pxAlign: 0,
      scales: { x: { time: false }, loss: { auto: true }, lr: { auto: true } },
      legend: { show: true, live: false },
      cursor: { drag: { x: true, y: false } },
      axes,
      series: [
        { label: options.xLabel ?? 'step' },
        ...options.series.map((spec) => ({
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
    return new uPlot(opts, [x, ...ys], container);
  };
  plot = build();
  mark();
  if (options.autoResize !== false && typeof ResizeObserver !== 'undefined') {
    observer = new ResizeObserver(() => {
      if (plot && !disposed) plot.setSize(size());
    });
    observer.observe(container);
  }
  const redraw = () => {
    if (!plot || disposed) return;
    const target = plot;
    target.batch(() => target.setData([x, ...ys], true));
    mark();
  };
  return {
    setData(data) {
      check(data, count);
      x = data.x.slice();
      ys = data.ys.map((column) => column.slice());
      redraw();
    },
    append(data) {
      check(data, count);
      if (data.x.length === 0) return;
      const last = x[x.length - 1];
      const first = data.x[0];
      if (last !== void 0 && first !== void 0 && first < last) {
        throw new RangeError(`appended x ${first} is before the last drawn x ${last}`);
      }
      let from = 0;
      if (last !== void 0 && first === last) {
        for (let s = 0; s < count; s++) {
          const value = data.ys[s][0] ?? null;
          if (value !== null) ys[s][x.length - 1] = value;
        }
        from = 1;
      }
      for (let i = from; i < data.x.length; i++) x.push(data.x[i]);
      for (let s = 0; s < count; s++) {
        const column = ys[s];
        const added = data.ys[s];
        for (let i = from; i < added.length; i++) column.push(added[i] ?? null);
      }
      redraw();
    },
    points() {
      return x.length;
    },
    restyle() {
      if (disposed) return;
      plot?.destroy();
      plot = build();
      mark();
    },
    dispose() {
      if (disposed) return;
      disposed = true;
      observer?.disconnect();
      plot?.destroy();
      plot = null;
    },
  };
}
function alignColumns(tables) {
  const union = [];
  const cursors = tables.map(() => 0);
  for (;;) {
    let next = Infinity;
    for (let t = 0; t < tables.length; t++) {
      const v = tables[t]?.x[cursors[t] ?? 0];
      if (v !== void 0 && v < next) next = v;
    }
    if (next === Infinity) break;
    union.push(next);
    for (let t = 0; t < tables.length; t++) {
      const table = tables[t];
      while (table.x[cursors[t] ?? 0] === next) cursors[t] = (cursors[t] ?? 0) + 1;
    }
  }
  const ys = tables.map((table) => {
    const column = new Array(union.length).fill(null);
    let j = 0;
    for (let i = 0; i < table.x.length; i++) {
      const v = table.x[i];
      while (j < union.length && union[j] < v) j++;
      if (j < union.length && union[j] === v) column[j] = table.y[i] ?? null;
    }
    return column;
  });
  return { x: union, ys };
}
export { alignColumns, create, resolveColor };
