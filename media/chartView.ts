/**
 * How the run page's chart reads its runs, as TensorBoard's and W&B's do: the loss smoothed by an
 * exponential moving average (a slider, 0 to 0.99) with the raw line faint behind it, the loss
 * axis linear or logarithmic, and x by step or by wall time (seconds since the run's first
 * point). Pure: the page hands it a run's columns (a whole series, or the points appended since)
 * and gets the chart's rows; each run keeps its own smoothing state, so appends cost only their
 * own points.
 */
import type { ChartPrefs, SeriesColumns } from '../src/ui/panel/webviewProtocol';

export {
  DEFAULT_CHART_PREFS,
  MAX_SMOOTHING,
  parseChartPrefs,
  type ChartPrefs,
} from '../src/ui/panel/webviewProtocol';

/**
 * The exponential moving average TensorBoard draws (and W&B's default): `last = last·w +
 * (1 − w)·v`, divided by `1 − w^n` (n values so far) so the curve does not start at zero.
 * A missing value keeps the state and gives null.
 */
export class Ema {
  private last = 0;
  private count = 0;

  constructor(private readonly weight: number) {}

  push(value: number | null): number | null {
    if (value === null || !Number.isFinite(value)) return null;
    const w = this.weight;
    if (w <= 0) return value;
    this.last = this.last * w + (1 - w) * value;
    this.count++;
    return this.last / (1 - w ** this.count);
  }
}

/** The whole of `values` smoothed with weight `w`. */
export function smooth(values: readonly (number | null)[], w: number): (number | null)[] {
  const ema = new Ema(w);
  return values.map((v) => ema.push(v));
}

/** The rows one run adds to the chart: x, and for its loss the raw (faint) and smoothed values. */
export interface RunRows {
  x: number[];
  raw: (number | null)[];
  smoothed: (number | null)[];
  evalLoss: (number | null)[];
  learningRate: (number | null)[];
}

/**
 * One run's transform under `prefs`, with its state: call {@link rows} with the whole series,
 * then with each append (whose first point may repeat the last step: its values fill that point
 * in, as the chart does).
 */
export class RunTransform {
  private readonly ema: Ema;
  private firstTime: number | null = null;
  private lastX: number | null = null;
  private lastStep: number | null = null;
  private lossAtLastStep = false;

  constructor(private readonly prefs: ChartPrefs) {
    this.ema = new Ema(prefs.smoothing);
  }

  rows(columns: SeriesColumns): RunRows {
    const n = columns.step.length;
    const out: RunRows = { x: [], raw: [], smoothed: [], evalLoss: [], learningRate: [] };
    const onLog = (v: number | null): number | null =>
      v === null || (this.prefs.logLoss && v <= 0) ? null : v;
    for (let i = 0; i < n; i++) {
      const step = columns.step[i] as number;
      const repeat = this.lastStep !== null && step === this.lastStep;
      let x: number;
      if (this.prefs.x === 'step') x = step;
      else {
        const time = columns.time?.[i] ?? null;
        if (repeat && this.lastX !== null) x = this.lastX;
        else if (time === null) x = this.lastX ?? 0;
        else {
          this.firstTime ??= time;
          // Ascending whatever the trainer's clock does: a point never goes before the last.
          x = Math.max(this.lastX ?? 0, time - this.firstTime);
        }
      }
      let loss = onLog(columns.loss[i] ?? null);
      // A step's loss is taken once: a repeat of it (a fill-in of its eval loss) adds nothing.
      if (repeat && this.lossAtLastStep) loss = null;
      if (!repeat) this.lossAtLastStep = false;
      if (loss !== null) this.lossAtLastStep = true;
      const smoothed = this.ema.push(loss);
      out.x.push(x);
      // Without smoothing the one line is the raw one, drawn as the smoothed line is.
      out.raw.push(this.prefs.smoothing > 0 ? loss : null);
      out.smoothed.push(smoothed);
      out.evalLoss.push(onLog(columns.evalLoss[i] ?? null));
      out.learningRate.push(columns.learningRate[i] ?? null);
      this.lastX = x;
      this.lastStep = step;
    }
    return out;
  }
}

/** `1h 05m`, `12m 30s`, `45s`: an elapsed time on the wall-time axis. */
export function elapsedLabel(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (h > 0) return `${h}h ${String(m).padStart(2, '0')}m`;
  if (m > 0) return sec === 0 ? `${m}m` : `${m}m ${String(sec).padStart(2, '0')}s`;
  return `${sec}s`;
}

/** `color` at a quarter of its opacity (a hex or rgb() colour; any other is returned as it is). */
export function faded(color: string, alpha = 0.25): string {
  const hex = /^#([0-9a-f]{3}|[0-9a-f]{6})([0-9a-f]{2})?$/i.exec(color.trim());
  if (hex) {
    const h = hex[1]!.length === 3 ? [...hex[1]!].map((c) => c + c).join('') : hex[1]!;
    const [r, g, b] = [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16));
    return `rgba(${r}, ${g}, ${b}, ${alpha})`;
  }
  const rgb = /^rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)/i.exec(color.trim());
  if (rgb) return `rgba(${rgb[1]}, ${rgb[2]}, ${rgb[3]}, ${alpha})`;
  return color;
}
