/**
 * The one message contract between the run webview page (media/main.ts) and its host
 * (src/ui/panel/runPanel.ts). Both sides import this file; it stays free of `vscode`, Node and DOM
 * types. Neither side trusts the other: the page validates every host message
 * ({@link parseHostMessage}) and the host every page message ({@link parsePageMessage}).
 *
 * The handshake: the page says `ready` (on load, and again after a reload of the webview); the
 * host answers with a full `snapshot` (the page keeps nothing it cannot rebuild from one), then
 * sends `append` batches (coalesced, at most every 100 ms) and `status` updates (every second
 * while the panel is visible, and whenever the run changes).
 */

/** The buttons of the page. Each maps to an existing command with `{ dir: <run dir> }`. */
export const RUN_ACTIONS = [
  'stop',
  'cancel',
  'keep',
  'release',
  'remove',
  'resume',
  'openOutput',
] as const;
export type RunAction = (typeof RUN_ACTIONS)[number];

/** A run's points, as aligned columns: one entry per step, null where a value is missing. */
export interface SeriesColumns {
  step: number[];
  loss: (number | null)[];
  evalLoss: (number | null)[];
  learningRate: (number | null)[];
  /** The trainer's clock (Unix seconds) at each step's first log: the chart's wall-time x. */
  time?: (number | null)[];
}

/** What the header and the progress area show; every text is computed by the host. */
export interface RunStatusView {
  runId: string;
  /** The display state word (`running`, `succeeded`, `pod kept`, …). */
  state: string;
  /** `running · target pod · RTX 4090` etc. */
  summary: string;
  /** The run's last message (why it failed, …), or null. */
  message: string | null;
  /** `step 120 / 600`, null before the first metric. */
  stepText: string | null;
  /** 0..1 when the total is known. */
  progress: number | null;
  epochText: string | null;
  /** `ETA 3h 05m`, null while the pace is unknown or the job is over. */
  etaText: string | null;
  /** `4h 12m until the deadline`, `deadline passed`, or null (kept pod, none). */
  deadlineText: string | null;
  /** `$1.23 so far · about $4.56 at the ETA · max_cost_usd $20.00`, or null without a rate. */
  spendText: string | null;
  /** The overrun warning while it applies, else null. */
  overrun: string | null;
  /** The run's pods when one died mid-job (`attempt 1: pod abc · from the start · …`), else null. */
  attemptsText?: string | null;
  /** The buttons that apply to the run now. */
  actions: RunAction[];
  /**
   * While the run's pod provisions: the last lines of its boot log (redacted by the host), shown
   * in place of the chart; null or absent once the pod answers SSH (the chart takes its place).
   */
  bootLog?: string[] | null;
  /**
   * The GPUs' newest sample while the run was followed, one line per GPU (`GPU 0 · 97 % · 18.7 of
   * 24.0 GiB · 68 °C · 369 W`), or null / absent before any.
   */
  gpuText?: string[] | null;
  /** What was found of the GPUs' use (an idle GPU, a card too large), or null. */
  gpuWarning?: string | null;
}

/** The most GPU lines a status carries. */
export const MAX_GPU_LINES = 16;

/** The most boot log lines a status carries. */
export const MAX_BOOT_LOG_LINES = 40;

/** One run's points in a snapshot. */
export interface RunSeriesView {
  runId: string;
  columns: SeriesColumns;
}

/**
 * How the chart reads the runs (the page's controls), remembered per workspace: the loss's
 * smoothing (an EMA's weight on the past, 0 = none, up to 0.99), its axis on a log scale, and x
 * by step or by wall time.
 */
export interface ChartPrefs {
  smoothing: number;
  logLoss: boolean;
  x: 'step' | 'time';
}

/** TensorBoard's default smoothing, a linear loss axis, x by step. */
export const DEFAULT_CHART_PREFS: Readonly<ChartPrefs> = Object.freeze({
  smoothing: 0.6,
  logLoss: false,
  x: 'step',
});

export const MAX_SMOOTHING = 0.99;

/** The prefs `value` holds, each field checked (a bad or missing one takes its default). */
export function parseChartPrefs(value: unknown): ChartPrefs {
  const o = isObject(value) ? value : {};
  const smoothing =
    typeof o.smoothing === 'number' && Number.isFinite(o.smoothing)
      ? Math.min(MAX_SMOOTHING, Math.max(0, Math.round(o.smoothing * 100) / 100))
      : DEFAULT_CHART_PREFS.smoothing;
  return {
    smoothing,
    logLoss: typeof o.logLoss === 'boolean' ? o.logLoss : DEFAULT_CHART_PREFS.logLoss,
    x: o.x === 'time' || o.x === 'step' ? o.x : DEFAULT_CHART_PREFS.x,
  };
}

/** Messages the host sends to the page. */
export type HostMessage =
  | {
      type: 'snapshot';
      /** `run`: one run with its status; `compare`: several runs' loss curves on one chart. */
      mode: 'run' | 'compare';
      title: string;
      runs: RunSeriesView[];
      /** The run's status in `run` mode; null in `compare` mode. */
      status: RunStatusView | null;
      /** What the page keeps with setState, so the serializer restores this panel after a reload. */
      panel: PanelState;
      /** The chart's controls as this workspace last left them (absent: the defaults). */
      chart?: ChartPrefs;
    }
  | { type: 'append'; runId: string; columns: SeriesColumns }
  | { type: 'status'; status: RunStatusView };

/** Messages the page sends to the host. */
export type PageMessage =
  | { type: 'ready' }
  | { type: 'action'; action: RunAction; runId: string }
  /** The user changed the chart's controls: remembered for the workspace. */
  | { type: 'chartPrefs'; prefs: ChartPrefs };

/** More points than this in one message is refused (a run logs far fewer). */
export const MAX_POINTS_PER_MESSAGE = 5_000_000;
/** Runs on one compare chart. */
export const MAX_COMPARE_RUNS = 12;
/** Any text longer than this is refused (ids, messages and summaries are short). */
export const MAX_TEXT_CHARS = 4096;

type Obj = Record<string, unknown>;

function isObject(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isText(value: unknown): value is string {
  return typeof value === 'string' && value.length <= MAX_TEXT_CHARS;
}

function isTextOrNull(value: unknown): value is string | null {
  return value === null || isText(value);
}

/** Run ids as the core makes them (`name_YYYYMMDD-HHMMSS[_n]`): printable, no path parts. */
function isRunId(value: unknown): value is string {
  return typeof value === 'string' && /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/.test(value);
}

function isRunAction(value: unknown): value is RunAction {
  return typeof value === 'string' && (RUN_ACTIONS as readonly string[]).includes(value);
}

function isNumberColumn(value: unknown, length: number): value is number[] {
  if (!Array.isArray(value) || value.length !== length) return false;
  for (const v of value) if (typeof v !== 'number' || !Number.isFinite(v)) return false;
  return true;
}

function isNullableColumn(value: unknown, length: number): value is (number | null)[] {
  if (!Array.isArray(value) || value.length !== length) return false;
  for (const v of value) {
    if (v !== null && (typeof v !== 'number' || !Number.isFinite(v))) return false;
  }
  return true;
}

/** Columns of one length, steps ascending (equal steps allowed), finite numbers or null. */
export function isSeriesColumns(value: unknown): value is SeriesColumns {
  if (!isObject(value) || !Array.isArray(value.step)) return false;
  const length = value.step.length;
  if (length > MAX_POINTS_PER_MESSAGE || !isNumberColumn(value.step, length)) return false;
  for (let i = 1; i < length; i++) {
    if ((value.step[i] as number) < (value.step[i - 1] as number)) return false;
  }
  return (
    isNullableColumn(value.loss, length) &&
    isNullableColumn(value.evalLoss, length) &&
    isNullableColumn(value.learningRate, length) &&
    (value.time === undefined || isNullableColumn(value.time, length))
  );
}

export function isRunStatusView(value: unknown): value is RunStatusView {
  if (!isObject(value)) return false;
  const progress = value.progress;
  return (
    isRunId(value.runId) &&
    isText(value.state) &&
    isText(value.summary) &&
    isTextOrNull(value.message) &&
    isTextOrNull(value.stepText) &&
    (progress === null ||
      (typeof progress === 'number' &&
        Number.isFinite(progress) &&
        progress >= 0 &&
        progress <= 1)) &&
    isTextOrNull(value.epochText) &&
    isTextOrNull(value.etaText) &&
    isTextOrNull(value.deadlineText) &&
    isTextOrNull(value.spendText) &&
    isTextOrNull(value.overrun) &&
    (value.attemptsText === undefined || isTextOrNull(value.attemptsText)) &&
    (value.bootLog === undefined ||
      value.bootLog === null ||
      (Array.isArray(value.bootLog) &&
        value.bootLog.length <= MAX_BOOT_LOG_LINES &&
        value.bootLog.every(isText))) &&
    (value.gpuText === undefined ||
      value.gpuText === null ||
      (Array.isArray(value.gpuText) &&
        value.gpuText.length <= MAX_GPU_LINES &&
        value.gpuText.every(isText))) &&
    (value.gpuWarning === undefined || isTextOrNull(value.gpuWarning)) &&
    Array.isArray(value.actions) &&
    value.actions.length <= RUN_ACTIONS.length &&
    value.actions.every(isRunAction)
  );
}

/** The host message `value` is, or null: the page trusts nothing it is posted. */
export function parseHostMessage(value: unknown): HostMessage | null {
  if (!isObject(value)) return null;
  switch (value.type) {
    case 'snapshot': {
      const { mode, title, runs, status } = value;
      if (mode !== 'run' && mode !== 'compare') return null;
      if (!isText(title) || !Array.isArray(runs) || runs.length > MAX_COMPARE_RUNS) return null;
      let total = 0;
      for (const run of runs as unknown[]) {
        if (!isObject(run) || !isRunId(run.runId) || !isSeriesColumns(run.columns)) return null;
        total += run.columns.step.length;
      }
      if (total > MAX_POINTS_PER_MESSAGE) return null;
      if (mode === 'run' && (runs.length !== 1 || !isRunStatusView(status))) return null;
      if (mode === 'compare' && status !== null) return null;
      const panel = parsePanelState(value.panel);
      if (panel === null || panel.mode !== mode) return null;
      return {
        type: 'snapshot',
        mode,
        title,
        runs: runs as RunSeriesView[],
        status: status as RunStatusView | null,
        panel,
        ...(value.chart === undefined ? {} : { chart: parseChartPrefs(value.chart) }),
      };
    }
    case 'append':
      if (!isRunId(value.runId) || !isSeriesColumns(value.columns)) return null;
      return { type: 'append', runId: value.runId, columns: value.columns };
    case 'status':
      if (!isRunStatusView(value.status)) return null;
      return { type: 'status', status: value.status };
    default:
      return null;
  }
}

/** The page message `value` is, or null: the host trusts the page no more than a file. */
export function parsePageMessage(value: unknown): PageMessage | null {
  if (!isObject(value)) return null;
  switch (value.type) {
    case 'ready':
      return { type: 'ready' };
    case 'action':
      if (!isRunAction(value.action) || !isRunId(value.runId)) return null;
      return { type: 'action', action: value.action, runId: value.runId };
    case 'chartPrefs':
      if (!isObject(value.prefs)) return null;
      return { type: 'chartPrefs', prefs: parseChartPrefs(value.prefs) };
    default:
      return null;
  }
}

/** What the serializer stores for a panel (`getState`/`setState`): which runs it shows. */
export interface PanelState {
  mode: 'run' | 'compare';
  /** Run directories (absolute): the host resolves them again after a reload. */
  dirs: string[];
}

export function parsePanelState(value: unknown): PanelState | null {
  if (!isObject(value)) return null;
  const { mode, dirs } = value;
  if (mode !== 'run' && mode !== 'compare') return null;
  if (!Array.isArray(dirs) || dirs.length === 0 || dirs.length > MAX_COMPARE_RUNS) return null;
  if (!dirs.every((d) => isText(d) && d !== '')) return null;
  if (mode === 'run' && dirs.length !== 1) return null;
  return { mode, dirs: dirs as string[] };
}
