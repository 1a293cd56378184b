/**
 * The GPUs of a job's target, as `nvidia-smi` reports them: the one query the product makes, the
 * parsing of its answer (one CSV line per GPU), and the judge that names a GPU the job leaves
 * idle or a card far larger than the job needs, while the pod bills.
 *
 * Sampling itself costs no SSH session: the pod's watcher of a followed job
 * (./podWatcher.ts) runs the query every `gpuSampleMs` and pushes its answer on the metrics
 * stream it already speaks on.
 */
import type { GpuFinding, GpuReading, GpuSample } from '../runs/gpuRecord';

/** The fields asked for, in the order they are parsed. */
export const GPU_QUERY_FIELDS = [
  'index',
  'name',
  'utilization.gpu',
  'memory.used',
  'memory.total',
  'temperature.gpu',
  'power.draw',
  'power.limit',
] as const;

/** The command (no secret, no path of the user's): its answer is {@link parseNvidiaSmi}'s input. */
export const GPU_QUERY_COMMAND = `nvidia-smi --query-gpu=${GPU_QUERY_FIELDS.join(',')} --format=csv,noheader,nounits`;

export type { GpuFinding, GpuReading, GpuSample } from '../runs/gpuRecord';

/** At most this many GPUs are read from one answer (a Runpod pod has at most 8 or 10). */
export const MAX_GPUS = 16;

function figure(text: string): number | null {
  const t = text.trim();
  // `[N/A]`, `[Not Supported]`, `[Unknown Error]`, `N/A`, or empty.
  if (t === '' || t.startsWith('[') || /^n\/a$/i.test(t)) return null;
  // Units, when a caller forgot `nounits`: `97 %`, `1234 MiB`, `71.23 W`.
  const number = Number(t.replace(/\s*(%|MiB|W|C)$/i, ''));
  return Number.isFinite(number) ? number : null;
}

/**
 * The readings of one answer of {@link GPU_QUERY_COMMAND}: one per line that has an index, a
 * name and the six figures (a name with a comma is kept whole: the figures are read from the
 * end). Lines that are not such (nvidia-smi's own errors, `No devices were found`) are skipped;
 * an answer with none gives an empty list.
 */
export function parseNvidiaSmi(text: string): GpuReading[] {
  const readings: GpuReading[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const fields = raw.split(',');
    if (fields.length < GPU_QUERY_FIELDS.length) continue;
    const index = Number(fields[0]!.trim());
    if (!Number.isSafeInteger(index) || index < 0 || fields[0]!.trim() === '') continue;
    const figures = fields.slice(-6).map(figure);
    const name = fields
      .slice(1, -6)
      .join(',')
      .trim()
      .replace(/[^\x20-\x7e]/g, '')
      .slice(0, 80);
    const [utilization, used, total, temperature, power, limit] = figures;
    // A line whose memory is not a figure is not an answer of this query.
    if (total === null && used === null && utilization === null) continue;
    readings.push({
      index,
      name,
      utilizationPct: utilization ?? null,
      memoryUsedMiB: used ?? null,
      memoryTotalMiB: total ?? null,
      temperatureC: temperature ?? null,
      powerW: power ?? null,
      powerLimitW: limit ?? null,
    });
    if (readings.length >= MAX_GPUS) break;
  }
  return readings;
}

/** Under this utilisation (%) a GPU counts as idle. */
export const IDLE_UTILIZATION_PCT = 5;
/** A job whose peak memory stays under this share of the card uses far less than it pays for. */
export const LOW_MEMORY_SHARE = 0.25;

const GIB = 1024;

function gib(mib: number): string {
  return `${(mib / GIB).toFixed(1)} GiB`;
}

function minutes(ms: number): string {
  const m = Math.round(ms / 60_000);
  return m >= 1 ? `${m} min` : `${Math.max(1, Math.round(ms / 1000))} s`;
}

function usdPerHour(usd: number): string {
  return `$${usd.toFixed(2)}/h`;
}

/**
 * Watches the samples of one followed job. A GPU under {@link IDLE_UTILIZATION_PCT} % in every
 * sample for `windowMs` is idle; peak memory under {@link LOW_MEMORY_SHARE} of every card over
 * `windowMs` of samples is a card too large. Each is found once (`already` holds the codes found
 * before, on an earlier follow of the run). The wasted rate: an idle GPU's share of the pod's
 * rate (rate ÷ GPUs, each); a card too large, the share of the rate its unused memory stands for
 * (rate × (1 − peak ÷ total), averaged over the GPUs).
 */
export class GpuJudge {
  private readonly idleSinceMs = new Map<number, number>();
  private readonly peakMiB = new Map<number, number>();
  private firstMs: number | null = null;
  private readonly found: Set<GpuFinding['code']>;

  constructor(
    private readonly windowMs: number,
    /** The pod's rate (all its GPUs), USD/h; null when unknown. */
    private readonly podUsdPerHour: number | null,
    already: Iterable<GpuFinding['code']> = [],
  ) {
    this.found = new Set(already);
  }

  /** Takes a sample; returns what it newly finds (usually nothing). */
  add(sample: GpuSample): GpuFinding[] {
    const nowMs = sample.timeMs;
    this.firstMs ??= nowMs;
    const count = sample.gpus.length;
    if (count === 0) return [];
    const findings: GpuFinding[] = [];
    const idle: GpuReading[] = [];
    for (const gpu of sample.gpus) {
      if (gpu.utilizationPct !== null && gpu.utilizationPct < IDLE_UTILIZATION_PCT) {
        const since = this.idleSinceMs.get(gpu.index) ?? nowMs;
        this.idleSinceMs.set(gpu.index, since);
        if (nowMs - since >= this.windowMs) idle.push(gpu);
      } else {
        this.idleSinceMs.delete(gpu.index);
      }
      if (gpu.memoryUsedMiB !== null) {
        this.peakMiB.set(gpu.index, Math.max(this.peakMiB.get(gpu.index) ?? 0, gpu.memoryUsedMiB));
      }
    }
    const rate = this.podUsdPerHour;
    if (idle.length > 0 && !this.found.has('gpu_idle')) {
      this.found.add('gpu_idle');
      const wasted = rate === null ? null : (rate * idle.length) / count;
      const which =
        count === 1
          ? 'the GPU is idle'
          : idle.length === count
            ? `all ${count} GPUs are idle`
            : `GPU${idle.length === 1 ? '' : 's'} ${idle.map((g) => g.index).join(', ')} of ${count} ${idle.length === 1 ? 'is' : 'are'} idle`;
      findings.push({
        code: 'gpu_idle',
        message:
          `${which} while the pod bills: is the job waiting on data? ` +
          `(under ${IDLE_UTILIZATION_PCT} % for ${minutes(this.windowMs)}${wasted === null ? '' : `: ${usdPerHour(wasted)} of the pod's ${usdPerHour(rate!)} wasted`})`,
        wastedUsdPerHour: wasted === null ? null : round4(wasted),
      });
    }
    if (!this.found.has('gpu_memory') && nowMs - this.firstMs >= this.windowMs) {
      const cards = sample.gpus.filter(
        (g) => g.memoryTotalMiB !== null && g.memoryTotalMiB > 0 && this.peakMiB.has(g.index),
      );
      const low =
        cards.length === count &&
        cards.every((g) => this.peakMiB.get(g.index)! < LOW_MEMORY_SHARE * g.memoryTotalMiB!);
      if (low) {
        this.found.add('gpu_memory');
        const unused =
          cards.reduce((sum, g) => sum + (1 - this.peakMiB.get(g.index)! / g.memoryTotalMiB!), 0) /
          count;
        const wasted = rate === null ? null : rate * unused;
        const peak = Math.max(...cards.map((g) => this.peakMiB.get(g.index)!));
        const total = cards[0]!.memoryTotalMiB!;
        findings.push({
          code: 'gpu_memory',
          message:
            `the job uses at most ${gib(peak)} of the GPU's ${gib(total)} (under a quarter) while the pod bills: a GPU type with less memory would do` +
            (wasted === null
              ? ''
              : ` (${usdPerHour(wasted)} of the pod's ${usdPerHour(rate!)} pays for memory it leaves unused)`),
          wastedUsdPerHour: wasted === null ? null : round4(wasted),
        });
      }
    }
    return findings;
  }
}

function round4(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}

/** `97 % · 18.7 of 24.0 GiB · 68 °C · 369 W`: one GPU's figures in words both front ends show. */
export function gpuLine(gpu: GpuReading): string {
  const parts: string[] = [];
  if (gpu.utilizationPct !== null) parts.push(`${Math.round(gpu.utilizationPct)} %`);
  if (gpu.memoryUsedMiB !== null && gpu.memoryTotalMiB !== null) {
    parts.push(`${(gpu.memoryUsedMiB / GIB).toFixed(1)} of ${gib(gpu.memoryTotalMiB)}`);
  } else if (gpu.memoryUsedMiB !== null) parts.push(`${gib(gpu.memoryUsedMiB)} used`);
  if (gpu.temperatureC !== null) parts.push(`${Math.round(gpu.temperatureC)} °C`);
  if (gpu.powerW !== null) parts.push(`${Math.round(gpu.powerW)} W`);
  return parts.length === 0 ? 'no figures' : parts.join(' · ');
}
