/**
 * Shared parts of the benchmarks: the report shape every benchmark returns to
 * bench/run.ts, statistics (medians, percentiles), formatting, the machine
 * description, and a counter of SSH requests made through SshExecutor.
 *
 * Ratio convention, everywhere: baseline ÷ ours for costs (time, bytes,
 * requests, memory), so above 1 means ours is better.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { systemClock } from '../src/core/clock';
import { SshExecutor } from '../src/core/exec/ssh';
import { PodPushes } from '../src/core/pod/podPushes';
import { PRODUCTION_TIMING } from '../src/core/timing';
import type { PodPushSink } from '../src/core/train/podWatcher';

export interface BenchOptions {
  /** CI mode: tiny sizes, one repetition; checks the benchmark still runs. */
  quick: boolean;
  /** Repetitions (medians are taken over them). */
  runs: number;
  /** Retrieval sizes when a loaded machine cannot move 1 GiB / 10,000 files in time. */
  retrievalBigMiB?: number;
  retrievalSmallFiles?: number;
}

export interface BenchRow {
  /** What is measured, e.g. "p95 metric → event at 10 lines/s". */
  measure: string;
  baseline: string;
  ours: string;
  /** baseline ÷ ours (above 1: ours better), or '' when there is no comparable baseline. */
  ratio: string;
  target: string;
  /** 'met', 'NOT met (…)', or '' when the row has no target. */
  verdict: string;
}

export interface BenchReport {
  /** Issue item number and short name, e.g. "1. Metric-to-event latency". */
  title: string;
  /** What the baseline is, in a sentence. */
  baseline: string;
  rows: BenchRow[];
  notes: string[];
  /** What bounds the figures (and why a target is missed, when one is). */
  bounds?: string;
  /** Raw figures for the JSON dump. */
  raw?: unknown;
}

/**
 * Waits until the writes of the step before are on disk (and the blocks of the files it deleted
 * released): otherwise the next step pays for them. On this VM (ext4 mounted with discard) a
 * 1 GiB write took 0.2-7.6 s depending on the writeback and discards still pending.
 */
export function settleDisk(): void {
  execFileSync('sync');
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Nearest-rank percentile (p in 0..100). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export function ms(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (value >= 10_000) return `${(value / 1000).toFixed(1)} s`;
  if (value >= 1000) return `${(value / 1000).toFixed(2)} s`;
  if (value >= 10) return `${value.toFixed(0)} ms`;
  return `${value.toFixed(1)} ms`;
}

export function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

export function kib(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}

/** baseline ÷ ours with two decimals ('' when either is missing). */
export function ratio(baseline: number, ours: number): string {
  if (!Number.isFinite(baseline) || !Number.isFinite(ours) || ours === 0) return '';
  return `${(baseline / ours).toFixed(2)}`;
}

/** 'met' or 'NOT met (by X)' for "value must stay below limit". */
export function below(value: number, limit: number, format: (v: number) => string): string {
  if (!Number.isFinite(value)) return 'not measured';
  return value < limit ? 'met' : `NOT met (${format(value)} is ${format(value - limit)} over)`;
}

export function atMost(value: number, limit: number, format: (v: number) => string): string {
  if (!Number.isFinite(value)) return 'not measured';
  return value <= limit ? 'met' : `NOT met (${format(value)} is ${format(value - limit)} over)`;
}

export interface Machine {
  cpu: string;
  cores: number;
  ramGiB: number;
  loadAverage: [number, number, number];
  node: string;
  date: string;
}

export function machine(): Machine {
  const [one, five, fifteen] = loadavg() as [number, number, number];
  return {
    cpu: cpus()[0]?.model ?? 'unknown CPU',
    cores: cpus().length,
    ramGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    loadAverage: [one, five, fifteen].map((v) => Math.round(v * 100) / 100) as [
      number,
      number,
      number,
    ],
    node: process.version,
    date: new Date().toISOString(),
  };
}

export function describeMachine(m: Machine): string {
  return (
    `${m.cores} × ${m.cpu}, ${m.ramGiB} GiB RAM, load average ${m.loadAverage.join(' / ')} ` +
    `(1/5/15 min), Node ${m.node}, ${m.date}`
  );
}

/** A markdown table. */
export function table(header: string[], rows: string[][]): string {
  const escape = (cell: string): string => cell.replace(/\|/g, '\\|');
  return [header, header.map(() => '---'), ...rows]
    .map((row) => `| ${row.map(escape).join(' | ')} |`)
    .join('\n');
}

export function sleep(delayMs: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, delayMs));
}

/** Resolves once `probe` holds (polled every 10 ms), or rejects after `timeoutMs`. */
export async function waitUntil(
  what: string,
  probe: () => boolean,
  timeoutMs: number,
): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (!probe()) {
    if (performance.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** SSH requests made through every SshExecutor of this process, by kind. */
export interface SshCounts {
  exec: number;
  stream: number;
  readRange: number;
  writeFileAtomic: number;
  upload: number;
  download: number;
}

const sshCounts: SshCounts = {
  exec: 0,
  stream: 0,
  readRange: 0,
  writeFileAtomic: 0,
  upload: 0,
  download: 0,
};
let instrumented = false;

/**
 * Counts the calls of SshExecutor's request methods in this process (a
 * measuring wrapper around the prototype; the logic is untouched). Returns
 * the live counters.
 */
export function countSshRequests(): Readonly<SshCounts> {
  if (!instrumented) {
    instrumented = true;
    const proto = SshExecutor.prototype as unknown as Record<
      string,
      (...args: unknown[]) => unknown
    >;
    for (const name of Object.keys(sshCounts) as (keyof SshCounts)[]) {
      const original = proto[name]!;
      proto[name] = function (this: unknown, ...args: unknown[]): unknown {
        sshCounts[name]++;
        return original.apply(this, args);
      };
    }
  }
  return sshCounts;
}

export function snapshotSsh(): SshCounts {
  return { ...countSshRequests() };
}

export function sshTotal(c: SshCounts): number {
  return c.exec + c.stream + c.readRange + c.writeFileAtomic + c.upload + c.download;
}

export function sshDelta(after: SshCounts, before: SshCounts): SshCounts {
  const out = { ...after };
  for (const key of Object.keys(out) as (keyof SshCounts)[]) out[key] = after[key] - before[key];
  return out;
}

/** This process's CPU time (user + system) in ms. */
export function cpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

/** Resident set size of a process from /proc (KiB), or NaN. */
export function rssKiBOf(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /VmRSS:\s+(\d+) kB/.exec(status);
    return match ? Number(match[1]) : NaN;
  } catch {
    return NaN;
  }
}

/**
 * The pushes a followed run has the pod's watcher send in production (checkpoint looks every
 * `checkpointLookMs`, a disk sample every `diskPollMs`), taken by a sink as the flow's is: the
 * follower's cost then includes them.
 */
export function productionPushes(): PodPushSink {
  return new PodPushes(systemClock).sink({
    lookMs: PRODUCTION_TIMING.checkpointLookMs,
    diskMs: PRODUCTION_TIMING.diskPollMs,
    volumeDir: null,
  });
}
