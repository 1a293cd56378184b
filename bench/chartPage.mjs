/* global document, window, performance, setTimeout */
/**
 * The chart benchmark's page (bundled by esbuild for the browser, see chart.bench.ts): the real
 * chart module of the run page (media/chart.ts, decimating) and three baselines drawing the same
 * data — the chart module as it was before it decimated (chartUndecimated.mjs, same API), uPlot
 * with its default options, and a naive Canvas2D polyline. Exposes `window.bench`.
 */
import uPlot from 'uplot';
import { create } from '../media/chart.ts';
import { create as createUndecimated } from './chartUndecimated.mjs';

/** The chart modules with the create()/setData()/append() API, by kind. */
const CHARTS = { ours: create, undecimated: createUndecimated };

const WIDTH = 900;
const HEIGHT = 400;

/** Training-like columns: step, loss (noisy decay), eval loss every 500 steps, learning rate. */
function columns(n) {
  const x = new Array(n);
  const loss = new Array(n);
  const evalLoss = new Array(n);
  const lr = new Array(n);
  let seed = 1;
  const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  for (let i = 0; i < n; i++) {
    x[i] = i + 1;
    loss[i] = 2 * Math.exp(-i / (n / 5)) + 0.1 + 0.05 * random();
    evalLoss[i] = i % 500 === 0 ? loss[i] + 0.02 : null;
    lr[i] = 1e-4 * (1 - i / n);
  }
  return { x, ys: [loss, evalLoss, lr] };
}

const SERIES = [
  { label: 'loss', color: '#3794ff', axis: 'loss' },
  { label: 'eval loss', color: '#f14c4c', axis: 'loss', sparse: true },
  { label: 'learning rate', color: '#89d185', axis: 'lr', dash: [4, 4] },
];

function freshContainer() {
  document.body.innerHTML = '';
  const el = document.createElement('div');
  el.style.width = `${WIDTH}px`;
  el.style.height = `${HEIGHT + 40}px`;
  document.body.appendChild(el);
  return el;
}

// The page's own frame loop uses the browser's requestAnimationFrame; a chart's frame callbacks
// (the decimating chart draws appends in them) go through a wrapper that times them, so each
// append's main-thread work counts its draw wherever it runs.
const ownFrame = window.requestAnimationFrame.bind(window);
let chartFrameMs = 0;
window.requestAnimationFrame = (callback) =>
  ownFrame((now) => {
    const t0 = performance.now();
    try {
      callback(now);
    } finally {
      chartFrameMs += performance.now() - t0;
    }
  });

function nextFrame() {
  return new Promise((resolve) => ownFrame(() => resolve(performance.now())));
}

/** Draws n points with `kind`; returns ms for the synchronous draw and to the next frame. */
async function render(kind, n) {
  const data = columns(n);
  const el = freshContainer();
  await nextFrame();
  const start = performance.now();
  let dispose;
  if (CHARTS[kind]) {
    const chart = CHARTS[kind](el, {
      series: SERIES,
      width: WIDTH,
      height: HEIGHT,
      autoResize: false,
    });
    chart.setData(data);
    if (chart.points() !== n) throw new Error(`drew ${chart.points()} of ${n} points`);
    dispose = () => chart.dispose();
  } else if (kind === 'uplot-default') {
    const plot = new uPlot(
      {
        width: WIDTH,
        height: HEIGHT,
        scales: { x: { time: false } },
        series: [{}, { stroke: '#3794ff' }, { stroke: '#f14c4c' }, { stroke: '#89d185' }],
      },
      [data.x, ...data.ys],
      el,
    );
    // uPlot draws in a microtask after construction: wait for it inside the timing.
    await Promise.resolve();
    dispose = () => plot.destroy();
  } else {
    const canvas = document.createElement('canvas');
    canvas.width = WIDTH;
    canvas.height = HEIGHT;
    el.appendChild(canvas);
    const ctx = canvas.getContext('2d');
    const xMax = data.x[n - 1];
    for (const [s, column] of data.ys.entries()) {
      let min = Infinity;
      let max = -Infinity;
      for (const v of column) {
        if (v === null) continue;
        if (v < min) min = v;
        if (v > max) max = v;
      }
      ctx.beginPath();
      ctx.strokeStyle = SERIES[s].color;
      let started = false;
      for (let i = 0; i < n; i++) {
        const v = column[i];
        if (v === null) continue;
        const px = (data.x[i] / xMax) * WIDTH;
        const py = HEIGHT - ((v - min) / (max - min || 1)) * HEIGHT;
        if (started) ctx.lineTo(px, py);
        else {
          ctx.moveTo(px, py);
          started = true;
        }
      }
      ctx.stroke();
    }
    dispose = () => canvas.remove();
  }
  const drawnMs = performance.now() - start;
  const framed = (await nextFrame()) - start;
  // Rows handed to uPlot (the chart modules mark them; the decimating one fewer than points).
  const rows = Number(el.dataset.rows ?? n);
  dispose();
  return { drawnMs, framedMs: framed, rows };
}

/**
 * Appends one point every 100 ms (10 Hz) for `seconds` to a chart already holding `n` points
 * (kind 'idle': no chart, the same frame loop — the machine's own noise); returns every frame
 * interval, each append call's time, each append's main-thread work (the call plus the chart's
 * frame callbacks until the next append: the decimating chart draws at the next frame).
 */
async function appendRun(kind, n, seconds) {
  const data = columns(n);
  const el = freshContainer();
  let chart = null;
  if (CHARTS[kind]) {
    chart = CHARTS[kind](el, { series: SERIES, width: WIDTH, height: HEIGHT, autoResize: false });
    chart.setData(data);
  }
  await nextFrame();
  await nextFrame();
  const frames = [];
  const appends = [];
  let running = true;
  let last = performance.now();
  const loop = (now) => {
    frames.push(now - last);
    last = now;
    if (running) ownFrame(loop);
  };
  ownFrame(loop);
  const workAt = [];
  let step = n;
  const ticks = seconds * 10;
  const start = performance.now();
  for (let t = 0; t < ticks; t++) {
    const due = start + t * 100;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
    step++;
    workAt.push(chartFrameMs);
    const t0 = performance.now();
    if (chart) chart.append({ x: [step], ys: [[0.1], [null], [1e-5]] });
    appends.push(performance.now() - t0);
  }
  running = false;
  // Appends draw at the next frame: let the last one be drawn before counting.
  await nextFrame();
  await nextFrame();
  workAt.push(chartFrameMs);
  const workMs = appends.map((ms, t) => ms + workAt[t + 1] - workAt[t]);
  const points = chart ? chart.points() : 0;
  chart?.dispose();
  return { framesMs: frames, appendsMs: appends, workMs, points };
}

window.bench = { render, appendRun };
window.benchReady = true;
