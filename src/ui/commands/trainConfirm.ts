import { type RunpodTargetConfig } from '../../core/flow/config';
import { type GpuType } from '../../core/flow/pods';
import { quoteForTarget, quoteLines } from '../../core/flow';
import { PRODUCTION_TIMING, type Timing } from '../../core/timing';

/**
 * The words of Train's modal confirmation, free of `vscode`: the GPU types tried, `max_hours`,
 * the hourly rate from the live catalog and the deadline the pod's watchdog enforces.
 */

export interface TrainConfirmation {
  message: string;
  detail: string;
}

/** `$0.69/h`; a rate Runpod does not give is said so. */
function usdPerHour(value: number | null): string {
  return value === null ? 'price n/a' : `$${value.toFixed(2)}/h`;
}

/**
 * The hourly rate of the pod: one line per GPU type tried (in order), the list price of one GPU
 * times the target's gpu_count. `catalog` null: the catalog could not be read.
 */
export function rateText(target: RunpodTargetConfig, catalog: readonly GpuType[] | null): string {
  const count = target.gpuCount;
  const times = count > 1 ? ` (${count} GPUs)` : '';
  if (target.gpuTypes === 'auto') {
    const cap =
      target.maxPricePerHourUsd === null
        ? ''
        : `, at most ${usdPerHour(target.maxPricePerHourUsd * count)}`;
    return `the cheapest GPU type in stock when the run starts${cap}${times}`;
  }
  if (catalog === null) return `unknown (the Runpod catalog could not be read)${times}`;
  const parts = target.gpuTypes.map((id) => {
    const gpu = catalog.find((g) => g.id === id);
    const price = gpu?.securePricePerHourUsd ?? null;
    return `${usdPerHour(price === null ? null : price * count)} on ${id}`;
  });
  return `${parts.join(', then ')}${times}`;
}

/**
 * The quote's lines (`overbrainer train --dry-run` prints the same): expected cost and worst case
 * at the catalog's rates; `historyS` the pod durations of earlier runs of the target. Empty when
 * the catalog could not be read or names none of the types.
 */
export function quoteText(
  target: RunpodTargetConfig,
  catalog: readonly GpuType[] | null,
  historyS: readonly number[],
  timing: Timing = PRODUCTION_TIMING,
  /** Seconds of work after training (the LoRA merge). */
  afterS = 0,
): string[] {
  if (catalog === null) return [];
  const q = quoteForTarget(target, catalog, historyS, timing, target.maxCostUsd, afterS);
  // The rates are on the Hourly rate line already.
  return quoteLines(q).filter(
    (line) =>
      line.startsWith('Expected:') || line.startsWith('Worst case:') || line.startsWith('Merge:'),
  );
}

/** What the run does (the Axolotl config, generated or the user's; the merge), and the merge's time. */
export interface TrainPlan {
  lines: readonly string[];
  afterS: number;
}

/** The confirmation of `Train` on `targetName`, as of `nowMs`. */
export function trainConfirmation(
  targetName: string,
  target: RunpodTargetConfig,
  catalog: readonly GpuType[] | null,
  nowMs: number,
  historyS: readonly number[] = [],
  /** The timing the pod's watchdog is given (the worst case depends on it). */
  timing: Timing = PRODUCTION_TIMING,
  plan: TrainPlan = { lines: [], afterS: 0 },
): TrainConfirmation {
  const gpus = target.gpuTypes === 'auto' ? 'auto' : target.gpuTypes.join(', ');
  const deadline = new Date(nowMs + target.maxHours * 3_600_000);
  const lines = [
    `GPU types: ${gpus}`,
    `Hourly rate: ${rateText(target, catalog)}`,
    `max_hours: ${target.maxHours}`,
    `Deadline: ${deadline.toLocaleString()} (max_hours: past it the pod's watchdog asks for a snapshot and deletes the pod, within the worst case below; unless it is kept)`,
  ];
  if (target.maxCostUsd !== null) lines.push(`max_cost_usd: $${target.maxCostUsd.toFixed(2)}`);
  lines.push(...quoteText(target, catalog, historyS, timing, plan.afterS));
  lines.push('Train and Keep Pod leaves the pod running after the job: nothing deletes it then.');
  if (plan.lines.length > 0) lines.push('', ...plan.lines);
  return { message: `Train on "${targetName}"?`, detail: lines.join('\n') };
}
