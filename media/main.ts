import {
  parseHostMessage,
  type HostMessage,
  type PageMessage,
  type PanelState,
  type RunAction,
  type RunStatusView,
  type SeriesColumns,
} from '../src/ui/panel/webviewProtocol';
import { alignColumns, create, type Chart, type ChartData, type ChartSeriesSpec } from './chart';
import {
  DEFAULT_CHART_PREFS,
  parseChartPrefs,
  RunTransform,
  type ChartPrefs,
  type RunRows,
} from './chartView';

/**
 * The run page. It renders what the host sends and keeps nothing it cannot rebuild from the
 * host's snapshot: after a reload it says `ready` and gets everything again. Only the panel's
 * identity (which runs it shows) is saved with setState, for the host's serializer.
 * Every text goes in with textContent, never innerHTML: run ids and messages come from files
 * anyone could edit.
 */

interface VsCodeApi {
  postMessage(message: PageMessage): void;
  getState(): unknown;
  setState(state: unknown): void;
}

declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();

/** Theme colours of VS Code's chart palette, in the order runs get them. */
const PALETTE = [
  '--vscode-charts-blue',
  '--vscode-charts-orange',
  '--vscode-charts-green',
  '--vscode-charts-purple',
  '--vscode-charts-red',
  '--vscode-charts-yellow',
];

/** Run mode: the loss (smoothed, its raw line faint behind it), the eval loss, the learning rate. */
function runSeries(prefs: ChartPrefs): ChartSeriesSpec[] {
  return [
    ...(prefs.smoothing > 0
      ? [{ label: 'loss (raw)', color: '--vscode-charts-blue', axis: 'loss', faint: true } as const]
      : []),
    { label: 'loss', color: '--vscode-charts-blue', axis: 'loss' },
    { label: 'eval loss', color: '--vscode-charts-orange', axis: 'loss', sparse: true },
    { label: 'learning rate', color: '--vscode-charts-green', axis: 'lr', dash: [4, 4] },
  ];
}

const byId = (id: string): HTMLElement => {
  const element = document.getElementById(id);
  if (!element) throw new Error(`the page has no #${id}`);
  return element;
};

const chartElement = byId('chart');

interface PageModel {
  mode: 'run' | 'compare';
  /** Each run's columns as received (compare mode re-aligns them on every change). */
  runs: Map<string, SeriesColumns>;
  status: RunStatusView | null;
}

let model: PageModel | null = null;
let chart: Chart | null = null;
/** The chart's controls, as the host last sent them or the user set them. */
let prefs: ChartPrefs = { ...DEFAULT_CHART_PREFS };
/** Each run's transform (smoothing state, wall-time origin), rebuilt with the chart's data. */
let transforms = new Map<string, RunTransform>();
/** The chart's last x (compare mode appends after it without aligning again). */
let chartLastX: number | undefined;

function text(id: string, value: string | null): void {
  const element = byId(id);
  element.textContent = value ?? '';
  element.hidden = value === null || value === '';
}

function renderStatus(status: RunStatusView): void {
  byId('run-title').textContent = status.runId;
  const state = byId('run-state');
  state.textContent = status.state;
  state.dataset.state = status.state;
  byId('run-summary').textContent = status.summary;
  text('overrun', status.overrun);
  text('run-message', status.message);
  text('run-attempts', status.attemptsText ?? null);
  byId('stats').hidden = false;
  text('step', status.stepText);
  text('epoch', status.epochText);
  text('eta', status.etaText);
  text('deadline', status.deadlineText);
  text('spend', status.spendText);
  const bar = byId('progress-bar');
  bar.parentElement?.toggleAttribute('hidden', status.progress === null);
  // A CSSOM width (not a style attribute): the CSP allows no inline styles.
  bar.style.width = `${Math.round((status.progress ?? 0) * 1000) / 10}%`;
  const actions = byId('actions');
  let any = false;
  for (const button of actions.querySelectorAll<HTMLButtonElement>('button[data-action]')) {
    const shown = status.actions.includes(button.dataset.action as RunAction);
    button.hidden = !shown;
    any ||= shown;
  }
  actions.hidden = !any;
  renderBootLog(status.bootLog ?? null);
  renderGpus(status.gpuText ?? null);
  text('gpu-warning', status.gpuWarning ?? null);
}

/** The GPUs' newest figures beside the loss: a line each. */
function renderGpus(lines: string[] | null): void {
  const list = byId('gpus');
  list.replaceChildren(
    ...(lines ?? []).map((line) => {
      const item = document.createElement('li');
      item.textContent = line;
      return item;
    }),
  );
  list.hidden = lines === null || lines.length === 0;
}

/** While the pod provisions, its boot log's last lines in place of the chart. */
function renderBootLog(lines: string[] | null): void {
  const booting = lines !== null && lines.length > 0;
  byId('boot').hidden = !booting;
  byId('boot-log').textContent = booting ? lines.join('\n') : '';
  byId('chart').hidden = booting;
  if (booting) byId('empty').hidden = true;
  else if (model) byId('empty').hidden = pointsIn(model) > 0;
}

function chartSeries(current: PageModel): ChartSeriesSpec[] {
  if (current.mode === 'run') return runSeries(prefs);
  // Runs log at their own steps: a run's line joins across the other runs' steps; with
  // smoothing, its raw line goes faint behind it.
  return [...current.runs.keys()].flatMap((runId, i): ChartSeriesSpec[] => {
    const color = PALETTE[i % PALETTE.length] as string;
    const line: ChartSeriesSpec = { label: runId, color, axis: 'loss', joinGaps: true };
    if (prefs.smoothing === 0) return [line];
    return [{ label: `${runId} (raw)`, color, axis: 'loss', joinGaps: true, faint: true }, line];
  });
}

/** A run's rows as the chart's columns in run mode. */
function runYs(rows: RunRows): (number | null)[][] {
  const smoothed = prefs.smoothing > 0 ? [rows.raw, rows.smoothed] : [rows.smoothed];
  return [...smoothed, rows.evalLoss, rows.learningRate];
}

/** The chart's data from the model, every run's transform started afresh. */
function chartData(current: PageModel): ChartData {
  transforms = new Map();
  const rowsOf = (runId: string, columns: SeriesColumns): RunRows => {
    const transform = new RunTransform(prefs);
    transforms.set(runId, transform);
    return transform.rows(columns);
  };
  let data: ChartData;
  if (current.mode === 'run') {
    const [runId, columns] = [...current.runs.entries()][0] ?? [];
    if (runId === undefined || columns === undefined) {
      data = { x: [], ys: runSeries(prefs).map(() => []) };
    } else {
      const rows = rowsOf(runId, columns);
      data = { x: rows.x, ys: runYs(rows) };
    }
  } else {
    const all = [...current.runs.entries()].map(([runId, columns]) => rowsOf(runId, columns));
    const smoothed = alignColumns(all.map((r) => ({ x: r.x, y: r.smoothed })));
    if (prefs.smoothing === 0) data = smoothed;
    else {
      const raw = alignColumns(all.map((r) => ({ x: r.x, y: r.raw })));
      data = { x: smoothed.x, ys: smoothed.ys.flatMap((ys, i) => [raw.ys[i] ?? [], ys]) };
    }
  }
  chartLastX = data.x[data.x.length - 1];
  return data;
}

function pointsIn(current: PageModel): number {
  let total = 0;
  for (const columns of current.runs.values()) total += columns.step.length;
  return total;
}

function renderChart(current: PageModel): void {
  cancelRealign?.();
  cancelRealign = null;
  chart?.dispose();
  chartElement.replaceChildren();
  chart = create(chartElement, {
    series: chartSeries(current),
    logLoss: prefs.logLoss,
    xKind: prefs.x,
  });
  chart.setData(chartData(current));
  chartElement.dataset.smoothing = prefs.smoothing.toFixed(2);
  chartElement.dataset.logLoss = String(prefs.logLoss);
  chartElement.dataset.x = prefs.x;
  byId('empty').hidden = pointsIn(current) > 0 || !byId('boot').hidden;
}

/** A pending re-alignment of every run on the compare chart (at most one per frame). */
let cancelRealign: (() => void) | null = null;

/**
 * Compare mode: a run's rows at or past the chart's last x are appended as they are (the other
 * runs have no value there: the same rows as aligning all the runs again); rows of a run behind
 * another need every run aligned again, done once per frame however many arrive.
 */
function appendCompare(current: PageModel, runId: string, rows: RunRows): void {
  if (!chart || rows.x.length === 0) return;
  const first = rows.x[0] as number;
  if (cancelRealign === null && (chartLastX === undefined || first >= chartLastX)) {
    const none = rows.x.map(() => null);
    const ys = [...current.runs.keys()].flatMap((id) => {
      const mine = id === runId;
      const line = mine ? rows.smoothed : none;
      return prefs.smoothing === 0 ? [line] : [mine ? rows.raw : none, line];
    });
    chart.append({ x: rows.x, ys });
    chartLastX = rows.x[rows.x.length - 1];
    return;
  }
  if (cancelRealign !== null) return; // The pending re-alignment reads the model: it has these.
  const id = requestAnimationFrame(() => {
    cancelRealign = null;
    if (model?.mode === 'compare') chart?.setData(chartData(model));
  });
  cancelRealign = () => cancelAnimationFrame(id);
}

/** Appends `columns` to the run's kept copy; a first step equal to the last fills that point in. */
function mergeColumns(into: SeriesColumns, columns: SeriesColumns): void {
  let from = 0;
  const last = into.step.length - 1;
  if (last >= 0 && columns.step[0] === into.step[last]) {
    const fill = (target: (number | null)[], source: (number | null)[]): void => {
      const value = source[0] ?? null;
      if (value !== null) target[last] = value;
    };
    fill(into.loss, columns.loss);
    fill(into.evalLoss, columns.evalLoss);
    fill(into.learningRate, columns.learningRate);
    from = 1;
  }
  into.time ??= into.step.map(() => null);
  for (let i = from; i < columns.step.length; i++) {
    into.step.push(columns.step[i] as number);
    into.loss.push(columns.loss[i] ?? null);
    into.evalLoss.push(columns.evalLoss[i] ?? null);
    into.learningRate.push(columns.learningRate[i] ?? null);
    into.time.push(columns.time?.[i] ?? null);
  }
}

function handle(message: HostMessage): void {
  switch (message.type) {
    case 'snapshot': {
      model = {
        mode: message.mode,
        runs: new Map(message.runs.map((run) => [run.runId, run.columns])),
        status: message.status,
      };
      document.body.dataset.mode = message.mode;
      const saved: PanelState = message.panel;
      vscode.setState(saved);
      prefs = parseChartPrefs(message.chart);
      showPrefs();
      if (message.status) renderStatus(message.status);
      else {
        byId('run-title').textContent = message.title;
        byId('run-summary').textContent = 'loss of each run against its step';
      }
      renderChart(model);
      return;
    }
    case 'append': {
      const columns = model?.runs.get(message.runId);
      if (!model || !columns) return;
      if (
        columns.step.length > 0 &&
        (message.columns.step[0] ?? Infinity) < (columns.step[columns.step.length - 1] ?? 0)
      ) {
        return; // Out of order: the host sends a snapshot when a series starts over.
      }
      mergeColumns(columns, message.columns);
      const transform = transforms.get(message.runId);
      if (transform === undefined) return; // Not charted yet: the next snapshot draws it.
      const rows = transform.rows(message.columns);
      if (model.mode === 'run' && chart) {
        chart.append({ x: rows.x, ys: runYs(rows) });
      } else {
        appendCompare(model, message.runId, rows);
      }
      byId('empty').hidden = pointsIn(model) > 0 || !byId('boot').hidden;
      return;
    }
    case 'status':
      if (model?.mode !== 'run' || model.status?.runId !== message.status.runId) return;
      model.status = message.status;
      renderStatus(message.status);
      return;
  }
}

const smoothingInput = byId('smoothing') as HTMLInputElement;
const logLossInput = byId('log-loss') as HTMLInputElement;
const xAxisSelect = byId('x-axis') as HTMLSelectElement;

/** The controls show `prefs`. */
function showPrefs(): void {
  smoothingInput.value = String(prefs.smoothing);
  byId('smoothing-value').textContent = prefs.smoothing.toFixed(2);
  logLossInput.checked = prefs.logLoss;
  xAxisSelect.value = prefs.x;
}

/** The user moved a control: the chart is drawn again, the host remembers it for the workspace. */
function onPrefs(): void {
  prefs = parseChartPrefs({
    smoothing: Number(smoothingInput.value),
    logLoss: logLossInput.checked,
    x: xAxisSelect.value,
  });
  showPrefs();
  if (model) renderChart(model);
  vscode.postMessage({ type: 'chartPrefs', prefs });
}

smoothingInput.addEventListener('input', onPrefs);
logLossInput.addEventListener('change', onPrefs);
xAxisSelect.addEventListener('change', onPrefs);
byId('chart-controls').addEventListener('submit', (event) => event.preventDefault());

window.addEventListener('message', (event: MessageEvent<unknown>) => {
  const message = parseHostMessage(event.data);
  if (message !== null) handle(message);
});

byId('actions').addEventListener('click', (event) => {
  const button = (event.target as Element | null)?.closest<HTMLButtonElement>(
    'button[data-action]',
  );
  const runId = model?.status?.runId;
  if (!button || runId === undefined) return;
  vscode.postMessage({ type: 'action', action: button.dataset.action as RunAction, runId });
});

// A theme change swaps VS Code's CSS variables and the body's class: redraw in the new colours.
new MutationObserver(() => chart?.restyle()).observe(document.body, {
  attributes: true,
  attributeFilter: ['class'],
});

vscode.postMessage({ type: 'ready' });
