/**
 * What a run's GPUs did, as the run's records keep it (local only, under `.pod/`, never uploaded):
 * `gpu.jsonl`, every sample taken while the run was followed (one JSON line each, up to
 * {@link GPU_SAMPLES_MAX_BYTES}), and `gpu.json`, the summary the run page and `runs show` read:
 * the newest sample and what was found of the GPUs' use (each kind once per run).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { GpuReading, GpuSample } from '../events';
import { writeFileAtomicSync } from './atomic';

export type { GpuReading, GpuSample };

/** What was found of the GPUs' use, once per kind per run. */
export interface GpuFinding {
  code: 'gpu_idle' | 'gpu_memory';
  message: string;
  /** What the pod's rate pays for that the job does not use, USD/h; null without a rate. */
  wastedUsdPerHour: number | null;
}

export interface GpuSummary {
  /** The newest sample, or null before the first. */
  last: GpuSample | null;
  /** Samples taken over all of the run's follows. */
  samples: number;
  findings: (GpuFinding & { timeMs: number })[];
}

export const GPU_SAMPLES_FILE = path.join('.pod', 'gpu.jsonl');
export const GPU_SUMMARY_FILE = path.join('.pod', 'gpu.json');
/** The samples' file stops growing here (a day at one sample per 10 s of 8 GPUs is ~12 MiB). */
export const GPU_SAMPLES_MAX_BYTES = 32 * 1024 * 1024;
const SUMMARY_MAX_BYTES = 256 * 1024;

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function readingOf(value: unknown): GpuReading | null {
  if (typeof value !== 'object' || value === null) return null;
  const o = value as Record<string, unknown>;
  const index = num(o.index);
  if (index === null || !Number.isSafeInteger(index) || index < 0) return null;
  return {
    index,
    name: typeof o.name === 'string' ? o.name.slice(0, 80) : '',
    utilizationPct: num(o.utilization_pct),
    memoryUsedMiB: num(o.memory_used_mib),
    memoryTotalMiB: num(o.memory_total_mib),
    temperatureC: num(o.temperature_c),
    powerW: num(o.power_w),
    powerLimitW: num(o.power_limit_w),
  };
}

/** One GPU's reading in its JSON form (gpu.json(l), `runs show --json`). */
export function gpuReadingJson(g: GpuReading): Record<string, unknown> {
  return {
    index: g.index,
    name: g.name,
    utilization_pct: g.utilizationPct,
    memory_used_mib: g.memoryUsedMiB,
    memory_total_mib: g.memoryTotalMiB,
    temperature_c: g.temperatureC,
    power_w: g.powerW,
    power_limit_w: g.powerLimitW,
  };
}

function sampleJson(sample: GpuSample): Record<string, unknown> {
  return { time_ms: sample.timeMs, gpus: sample.gpus.map(gpuReadingJson) };
}

/** A sample from its JSON form (a line of gpu.jsonl, or gpu.json's `last`), or null. */
export function decodeGpuSample(value: unknown): GpuSample | null {
  if (typeof value !== 'object' || value === null) return null;
  const o = value as Record<string, unknown>;
  const timeMs = num(o.time_ms);
  if (timeMs === null || !Array.isArray(o.gpus)) return null;
  const gpus = o.gpus.map(readingOf).filter((g): g is GpuReading => g !== null);
  return { timeMs, gpus };
}

function decodeSummary(text: string): GpuSummary | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const o = value as Record<string, unknown>;
  const findings: GpuSummary['findings'] = [];
  if (Array.isArray(o.findings)) {
    for (const f of o.findings as Record<string, unknown>[]) {
      if (typeof f !== 'object' || f === null) continue;
      if (f.code !== 'gpu_idle' && f.code !== 'gpu_memory') continue;
      if (typeof f.message !== 'string') continue;
      findings.push({
        code: f.code,
        message: f.message.slice(0, 1000),
        wastedUsdPerHour: num(f.wasted_usd_per_hour),
        timeMs: num(f.time_ms) ?? 0,
      });
    }
  }
  return {
    last: decodeGpuSample(o.last),
    samples: num(o.samples) ?? 0,
    findings,
  };
}

/** The run's GPU summary (`runDir/.pod/gpu.json`), or null when there is none or it is unreadable. */
export function readGpuSummary(runDir: string): GpuSummary | null {
  try {
    const file = path.join(runDir, GPU_SUMMARY_FILE);
    if (fs.statSync(file).size > SUMMARY_MAX_BYTES) return null;
    return decodeSummary(fs.readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

/** Writes the summary whole (the page and `runs show` never read half of it). */
export function writeGpuSummary(runDir: string, summary: GpuSummary): void {
  const dir = path.join(runDir, path.dirname(GPU_SUMMARY_FILE));
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileAtomicSync(
    dir,
    path.basename(GPU_SUMMARY_FILE),
    `${JSON.stringify({
      version: 1,
      samples: summary.samples,
      last: summary.last === null ? null : sampleJson(summary.last),
      findings: summary.findings.map((f) => ({
        code: f.code,
        message: f.message,
        wasted_usd_per_hour: f.wastedUsdPerHour,
        time_ms: f.timeMs,
      })),
    })}\n`,
  );
}

/** Appends a sample to gpu.jsonl, unless the file reached its cap. */
export function appendGpuSample(runDir: string, sample: GpuSample): void {
  const file = path.join(runDir, GPU_SAMPLES_FILE);
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  let size = 0;
  try {
    size = fs.statSync(file).size;
  } catch {
    // none yet
  }
  if (size >= GPU_SAMPLES_MAX_BYTES) return;
  fs.appendFileSync(file, `${JSON.stringify(sampleJson(sample))}\n`, { mode: 0o600 });
}

/** Every sample of gpu.jsonl (lines that do not parse are skipped), oldest first. */
export function readGpuSamples(runDir: string): GpuSample[] {
  let text: string;
  try {
    text = fs.readFileSync(path.join(runDir, GPU_SAMPLES_FILE), 'utf8');
  } catch {
    return [];
  }
  const samples: GpuSample[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      const sample = decodeGpuSample(JSON.parse(line));
      if (sample !== null) samples.push(sample);
    } catch {
      // a line cut by a crash
    }
  }
  return samples;
}
