/**
 * The sweep page drawn from its model (./sweepPageModel.ts), free of `vscode`: a page of inline
 * SVG charts (no script runs in it: its Content-Security-Policy allows inline styles only) in the
 * editor's theme colours: the budget bar, the best value so far over the trials, the value
 * against each parameter, and every trial's intermediate curve, pruned ones drawn dashed.
 */
import type { ParamChart, Point, SweepPageModel, TrialCurve } from './sweepPageModel';

const W = 560;
const H = 220;
const PAD = { left: 56, right: 12, top: 12, bottom: 32 };

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

const usd = (v: number): string => `$${v.toFixed(2)}`;
const num = (v: number): string => String(Number(v.toPrecision(4)));

interface Axis {
  min: number;
  max: number;
  log: boolean;
}

function axisOf(values: readonly number[], log = false): Axis {
  const vs = log ? values.map(Math.log10) : [...values];
  let min = Math.min(...vs);
  let max = Math.max(...vs);
  if (!Number.isFinite(min) || !Number.isFinite(max)) return { min: 0, max: 1, log };
  if (min === max) {
    min -= 0.5;
    max += 0.5;
  }
  return { min, max, log };
}

function scale(axis: Axis, v: number, from: number, to: number): number {
  const x = axis.log ? Math.log10(v) : v;
  return from + ((x - axis.min) / (axis.max - axis.min)) * (to - from);
}

const label = (axis: Axis, at: number): string => num(axis.log ? 10 ** at : at);

/** A chart's frame: its axes with their end values, and `body` (already in pixels) inside it. */
function frame(title: string, xAxis: Axis, yAxis: Axis, body: string, xLabels?: string[]): string {
  const x0 = PAD.left;
  const x1 = W - PAD.right;
  const y0 = H - PAD.bottom;
  const y1 = PAD.top;
  const xs = xLabels ?? [xAxis.min, xAxis.max].map((v) => label(xAxis, v));
  const xTicks =
    xLabels === undefined
      ? `<text x="${x0}" y="${y0 + 16}">${escapeHtml(xs[0]!)}</text><text x="${x1}" y="${y0 + 16}" text-anchor="end">${escapeHtml(xs[1]!)}</text>`
      : xLabels
          .map(
            (l, i) =>
              `<text x="${scale(xAxis, i, x0, x1).toFixed(1)}" y="${y0 + 16}" text-anchor="middle">${escapeHtml(l)}</text>`,
          )
          .join('');
  return `<figure><figcaption>${escapeHtml(title)}</figcaption><svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${escapeHtml(title)}">
<line class="axis" x1="${x0}" y1="${y0}" x2="${x1}" y2="${y0}"/><line class="axis" x1="${x0}" y1="${y0}" x2="${x0}" y2="${y1}"/>
<text x="${x0 - 4}" y="${y1 + 8}" text-anchor="end">${escapeHtml(label(yAxis, yAxis.max))}</text><text x="${x0 - 4}" y="${y0}" text-anchor="end">${escapeHtml(label(yAxis, yAxis.min))}</text>
${xTicks}${body}</svg></figure>`;
}

function polyline(points: readonly Point[], xAxis: Axis, yAxis: Axis, cls: string): string {
  const d = points
    .map(
      (p) =>
        `${scale(xAxis, p.x, PAD.left, W - PAD.right).toFixed(1)},${scale(yAxis, p.y, H - PAD.bottom, PAD.top).toFixed(1)}`,
    )
    .join(' ');
  return `<polyline class="${cls}" points="${d}"/>`;
}

function dots(
  points: readonly (Point & { trial: number })[],
  xAxis: Axis,
  yAxis: Axis,
  best: number | null,
): string {
  return points
    .map(
      (p) =>
        `<circle class="${p.trial === best ? 'dot best' : 'dot'}" cx="${scale(xAxis, p.x, PAD.left, W - PAD.right).toFixed(1)}" cy="${scale(yAxis, p.y, H - PAD.bottom, PAD.top).toFixed(1)}" r="4"><title>trial ${p.trial}: ${num(p.y)}</title></circle>`,
    )
    .join('');
}

const empty = (title: string, why: string): string =>
  `<figure><figcaption>${escapeHtml(title)}</figcaption><p class="empty">${escapeHtml(why)}</p></figure>`;

function bestChart(m: SweepPageModel): string {
  const title = `Best ${m.metric} so far (${m.direction}), by trial`;
  if (m.bestSoFar.length === 0) return empty(title, 'No trial has completed yet.');
  const xAxis = axisOf(m.bestSoFar.map((p) => p.x));
  const yAxis = axisOf(m.bestSoFar.map((p) => p.y));
  return frame(title, xAxis, yAxis, polyline(m.bestSoFar, xAxis, yAxis, 'line best'));
}

function paramChart(m: SweepPageModel, chart: ParamChart): string {
  const title = `${m.metric} against ${chart.param}${chart.log ? ' (log scale)' : ''}`;
  if (chart.points.length === 0) return empty(title, 'No trial has a value yet.');
  const xAxis =
    chart.categories === null
      ? axisOf(
          chart.points.map((p) => p.x),
          chart.log,
        )
      : { min: -0.5, max: chart.categories.length - 0.5, log: false };
  const yAxis = axisOf(chart.points.map((p) => p.y));
  return frame(
    title,
    xAxis,
    yAxis,
    dots(chart.points, xAxis, yAxis, m.best?.trial ?? null),
    chart.categories ?? undefined,
  );
}

function curvesChart(m: SweepPageModel): string {
  const title = `Every trial's ${m.metric} by step (pruned trials dashed)`;
  const drawn = m.curves.filter((c) => c.points.length > 0);
  if (drawn.length === 0) return empty(title, 'No trial has reported a value yet.');
  const all = drawn.flatMap((c) => c.points);
  const xAxis = axisOf(all.map((p) => p.x));
  const yAxis = axisOf(all.map((p) => p.y));
  const body = drawn
    .map((c: TrialCurve) => {
      const cls = `line curve ${c.state}${c.trial === m.best?.trial ? ' best' : ''}`;
      return `<g><title>trial ${c.trial} (${c.state})</title>${polyline(c.points, xAxis, yAxis, cls)}</g>`;
    })
    .join('');
  return frame(title, xAxis, yAxis, body);
}

function budgetBar(m: SweepPageModel): string {
  const { budgetUsd, spentUsd, committedUsd, leftUsd } = m.budget;
  const part = (v: number): string => (budgetUsd <= 0 ? '0' : ((100 * v) / budgetUsd).toFixed(2));
  return `<figure><figcaption>Budget ${usd(budgetUsd)}: spent ${usd(spentUsd)}, committed ${usd(committedUsd)} (running trials' caps), left ${usd(leftUsd)}</figcaption>
<div class="bar" role="img" aria-label="budget"><span class="spent" style="width:${part(Math.min(spentUsd, budgetUsd))}%"></span><span class="committed" style="width:${part(Math.min(committedUsd, Math.max(0, budgetUsd - spentUsd)))}%"></span></div></figure>`;
}

const STYLE = `body{font-family:var(--vscode-font-family);color:var(--vscode-foreground);padding:0 16px}
figure{margin:16px 0}figcaption{font-weight:600;margin-bottom:4px}
svg{width:100%;max-width:${W}px;height:auto}svg text{font-size:11px;fill:var(--vscode-descriptionForeground)}
.axis{stroke:var(--vscode-editorWidget-border,#888)}
.line{fill:none;stroke:var(--vscode-charts-blue);stroke-width:1.5}
.line.best{stroke:var(--vscode-charts-green);stroke-width:2.5}
.curve.pruned{stroke:var(--vscode-charts-orange);stroke-dasharray:4 3}
.curve.fail{stroke:var(--vscode-charts-red)}
.dot{fill:var(--vscode-charts-blue)}.dot.best{fill:var(--vscode-charts-green)}
.bar{display:flex;height:14px;max-width:${W}px;background:var(--vscode-editorWidget-background,#8884);border-radius:3px;overflow:hidden}
.spent{background:var(--vscode-charts-blue)}.committed{background:var(--vscode-charts-yellow)}
.empty{color:var(--vscode-descriptionForeground)}`;

/** The whole page. */
export function renderSweepPage(m: SweepPageModel): string {
  const s = m.trials.byState;
  const counts = `${m.trials.total} of ${m.trials.max} trials: ${s.complete} complete, ${s.pruned} pruned, ${s.fail} failed, ${s.running + s.starting} running`;
  const best =
    m.best === null
      ? 'Best: none yet.'
      : `Best: trial ${m.best.trial}, ${m.metric} ${num(m.best.value)}, ${JSON.stringify(m.best.params)}`;
  return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline';">
<title>Sweep ${escapeHtml(m.name)}</title><style>${STYLE}</style></head><body>
<h1>Sweep ${escapeHtml(m.name)}</h1>
<p class="status">${escapeHtml(m.status)}</p><p>${escapeHtml(counts)}</p><p class="best">${escapeHtml(best)}</p>
${budgetBar(m)}${bestChart(m)}${m.byParam.map((c) => paramChart(m, c)).join('')}${curvesChart(m)}
</body></html>`;
}
