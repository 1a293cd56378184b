/**
 * The CLI's words for the core's events and records: `pod: …`
 * lines, durations, the `runs ls` and `pod gpus` tables. Pure functions, so
 * the unit tests pin every text.
 */
import type { DeleteReason, JobStatus, PodStatusEvent } from '../core/events';
import { type GpuType, inStock, cell, type RemovedPod } from '../core/flow/pods';
import { type PodRecord, type RunRecord } from '../core/flow/records';

/** A duration to the second below an hour, to the minute above: `45s`, `3m41s`, `1h12m`. */
export function durationWords(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600)
    return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
  return `${Math.floor(seconds / 3600)}h${String(Math.floor((seconds % 3600) / 60)).padStart(2, '0')}m`;
}

/** `$0.53` */
export function usd(value: number): string {
  return `$${value.toFixed(2)}`;
}

/** Why a pod is deleted, in words. */
export function deleteReasonWords(reason: DeleteReason): string {
  switch (reason) {
    case 'retrieved':
      return 'results retrieved';
    case 'not_ready':
      return 'not ready in time';
    case 'refused':
      return 'its watchdog cannot delete it';
    case 'bootstrap_failed':
      return 'its bootstrap failed';
    case 'interrupted':
      return 'interrupted before the job started';
    case 'deadline':
      return 'max_hours reached';
    case 'requested':
      return 'requested';
    case 'duplicate':
      return "duplicate of this run's pod";
    case 'local_ssh':
      return 'the local ssh client cannot reach it';
    case 'cost_cap':
      return 'max_cost_usd reached';
    case 'cost_cap_unset':
      return 'max_cost_usd cannot be applied';
    case 'died':
      return 'it died while its job ran';
  }
}

/** `k3x9abc deleted after 1h12m, about $0.64` (the parts that are known). */
export function deletedWords(
  podId: string,
  uptimeMs: number | null,
  estimatedSpendUsd: number | null,
): string {
  const after = uptimeMs === null ? '' : ` after ${durationWords(uptimeMs)}`;
  const spend = estimatedSpendUsd === null ? '' : `, about ${usd(estimatedSpendUsd)}`;
  return `${podId} deleted${after}${spend}`;
}

/** A pod event in words, after `pod: `. */
export function podLine(status: PodStatusEvent): string {
  switch (status.kind) {
    case 'creating':
      return `creating ${status.name} (${status.gpuType})`;
    case 'unavailable':
      return `${status.gpuType} unavailable (${status.reason})`;
    case 'created': {
      const parts = [status.gpuType];
      if (status.dataCenter) parts.push(status.dataCenter);
      if (status.costPerHourUsd !== null) parts.push(`${usd(status.costPerHourUsd)}/h`);
      return `created ${status.podId} (${parts.join(', ')}); waiting for SSH`;
    }
    case 'ready':
      return status.deadline === null
        ? `${status.podId} ready after ${durationWords(status.afterMs)}; watchdog armed, kept with no time limit (--keep-pod)`
        : `${status.podId} ready after ${durationWords(status.afterMs)}; watchdog armed, deletes it by ${status.deadline} at the latest`;
    case 'deleting':
      return `deleting ${status.podId} (${deleteReasonWords(status.reason)})`;
    case 'deleted':
      return deletedWords(status.podId, status.uptimeMs, status.estimatedSpendUsd);
    case 'kept':
      return `${status.podId} kept (--keep-pod)`;
  }
}

/**
 * A run's pod as Runpod last showed it when that is not what pod.json recorded (it stopped under
 * the job): Runpod's own status named, and what it means for the bill.
 */
export function podStatusWords(podId: string, status: string): string {
  switch (status) {
    case 'TERMINATED':
      return `pod ${podId} TERMINATED in Runpod (being deleted: it bills no more)`;
    case 'EXITED':
    case 'ERROR':
      return `pod ${podId} ${status} in Runpod (stopped: the job no longer runs, its disk still bills)`;
    default:
      return `pod ${podId} ${status} in Runpod`;
  }
}

/** A job status in words, after `train: job `. */
export function jobStatusWords(status: JobStatus): string {
  switch (status.kind) {
    case 'running':
      return 'running';
    case 'exited':
      return `exited with code ${status.code}`;
    case 'cancelled':
      return 'cancelled';
    case 'lost':
      return 'lost (stopped without an exit code)';
  }
}

/** The line `pod rm` prints for each pod it deleted. */
export function removedLine(pod: RemovedPod): string {
  if (pod.alreadyGone) {
    return `pod: pod ${pod.podId} was already gone from the account; nothing deleted`;
  }
  return `pod: ${deletedWords(pod.podId, pod.uptimeMs, pod.estimatedSpendUsd)}`;
}

/** Left-aligned columns, two spaces apart; the last column is not padded. */
export function table(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((text, index) => {
      widths[index] = Math.max(widths[index] ?? 0, text.length);
    });
  }
  return rows.map((row) =>
    row
      .map((text, index) => (index === row.length - 1 ? text : text.padEnd(widths[index] ?? 0)))
      .join('  ')
      .trimEnd(),
  );
}

/** One run of `runs ls`: what it is, where it stands, and its pod (from pod.json, no API call). */
export interface RunLine {
  run: RunRecord;
  pod: PodRecord | null;
  /** Set when pod.json cannot be read. */
  podProblem: string | null;
}

/** The `runs ls` table, header first; nothing when there is no run. */
export function runsTable(lines: readonly RunLine[]): string[] {
  if (lines.length === 0) return [];
  const rows = lines.map(({ run, pod, podProblem }) => {
    const notes: string[] = [];
    if (podProblem !== null) notes.push(podProblem);
    else if (pod !== null) notes.push(pod.summary());
    if (run.message) notes.push(run.message);
    return [run.id, run.state, cell(run.target), run.created, notes.join('; ') || '-'];
  });
  return table([['RUN', 'STATE', 'TARGET', 'CREATED', 'SUMMARY'], ...rows]);
}

export interface GpuFilter {
  minVramGb: number | null;
  maxPricePerHourUsd: number | null;
  inStockOnly: boolean;
}

/** The Secure-cloud GPU types matching `filter`, cheapest first (ties: more VRAM, then ID). */
export function filterGpus(gpus: readonly GpuType[], filter: GpuFilter): GpuType[] {
  const stocked = (gpu: GpuType): boolean =>
    inStock(gpu.availability) || gpu.dataCenters.some((dc) => inStock(dc.availability));
  return gpus
    .filter((gpu) => gpu.secureCloud && gpu.securePricePerHourUsd !== null)
    .filter((gpu) => filter.minVramGb === null || gpu.memoryInGb >= filter.minVramGb)
    .filter(
      (gpu) =>
        filter.maxPricePerHourUsd === null ||
        (gpu.securePricePerHourUsd ?? Infinity) <= filter.maxPricePerHourUsd,
    )
    .filter((gpu) => !filter.inStockOnly || stocked(gpu))
    .sort(
      (a, b) =>
        (a.securePricePerHourUsd ?? 0) - (b.securePricePerHourUsd ?? 0) ||
        b.memoryInGb - a.memoryInGb ||
        (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    );
}

/** The `pod gpus` table, header first; nothing when there is no GPU type. */
export function gpusTable(gpus: readonly GpuType[]): string[] {
  if (gpus.length === 0) return [];
  const rows = gpus.map((gpu) => {
    const stock =
      gpu.availability ??
      (gpu.dataCenters.some((dc) => inStock(dc.availability)) ? 'in stock' : 'NONE');
    const dcs = gpu.dataCenters.filter((dc) => inStock(dc.availability)).map((dc) => dc.id);
    return [
      cell(gpu.id),
      `${gpu.memoryInGb} GB`,
      gpu.securePricePerHourUsd === null ? '-' : gpu.securePricePerHourUsd.toFixed(2),
      cell(String(stock)),
      cell(dcs.join(',')) || '-',
    ];
  });
  return table([['GPU', 'VRAM', '$/H', 'STOCK', 'DATA CENTERS'], ...rows]);
}
