import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { RunState } from '../core/events';
import { isValidRunId } from '../core/runs/ids';
import { lineColumn, scanJson } from '../core/runs/jsonPositions';
import {
  POD_RECORD_STATES,
  RUN_STATES,
  type PodRecordState,
  type PodSummary,
  type RunSummary,
} from './runsModel';

/**
 * Reads `runs/<id>/run.json` (+ `pod.json`) of a workspace folder, read-only, for the Runs view
 * until the core's run store feeds the model. Lenient on purpose: the view shows what it can and
 * marks a record it cannot read as unreadable (by position only — a record may hold anything and
 * its content is never echoed). Nothing here writes, locks or touches the network.
 */

export interface RunsFolder {
  /** Absolute path of the runs folder (e.g. `<workspace>/runs`). */
  dir: string;
  workspaceName: string;
}

/** Lists every run directory of the given folders. A missing runs folder is simply empty. */
export async function readRuns(folders: readonly RunsFolder[]): Promise<RunSummary[]> {
  const all = await Promise.all(folders.map((folder) => readRunsFolder(folder)));
  return all.flat();
}

async function readRunsFolder(folder: RunsFolder): Promise<RunSummary[]> {
  let entries: import('node:fs').Dirent[];
  try {
    entries = await fs.readdir(folder.dir, { withFileTypes: true });
  } catch (error) {
    if (isNotFound(error)) return [];
    throw error;
  }
  const dirs = entries.filter((entry) => entry.isDirectory() && isValidRunId(entry.name));
  const runs = await Promise.all(
    dirs.map((entry) => readRunDir(path.join(folder.dir, entry.name), entry.name, folder)),
  );
  return runs.filter((run): run is RunSummary => run !== null);
}

/** Null when the directory has no run.json (not a run, or one being created). */
export async function readRunDir(
  dir: string,
  id: string,
  folder: RunsFolder,
): Promise<RunSummary | null> {
  const base: RunSummary = {
    id,
    dir,
    workspaceName: folder.workspaceName,
    target: null,
    createdUnixS: null,
    state: null,
    message: null,
    pod: null,
    problem: null,
  };
  const runText = await readOptional(path.join(dir, 'run.json'));
  if (runText === null) return null;
  if (typeof runText !== 'string') return { ...base, problem: runText.problem };
  const run = parseJsonObject(runText, 'run.json');
  if (!run.ok) return { ...base, problem: run.problem };
  const state = run.value.state;
  if (typeof state !== 'string' || !(RUN_STATES as readonly string[]).includes(state)) {
    return { ...base, problem: 'run.json has no known state' };
  }
  const summary: RunSummary = {
    ...base,
    state: state as RunState,
    target: stringOrNull(run.value.target),
    createdUnixS: rfc3339ToUnixS(run.value.created),
    message: stringOrNull(run.value.message),
  };
  const podText = await readOptional(path.join(dir, 'pod.json'));
  if (podText !== null && typeof podText !== 'string')
    return { ...summary, problem: podText.problem };
  if (podText !== null) {
    const pod = parseJsonObject(podText, 'pod.json');
    if (!pod.ok) return { ...summary, problem: pod.problem };
    summary.pod = podSummary(pod.value);
  }
  return summary;
}

function podSummary(record: Record<string, unknown>): PodSummary | null {
  const state = record.state;
  if (typeof state !== 'string' || !(POD_RECORD_STATES as readonly string[]).includes(state)) {
    return null;
  }
  const strays = Array.isArray(record.stray_pods)
    ? record.stray_pods.filter((id): id is string => typeof id === 'string')
    : [];
  return {
    podId: stringOrNull(record.pod_id),
    state: state as PodRecordState,
    gpuType: stringOrNull(record.gpu_type),
    costPerHourUsd: numberOrNull(record.cost_per_hour),
    deadlineUnixS: numberOrNull(record.deadline_unix) ?? rfc3339ToUnixS(record.deadline),
    estimatedSpendUsd: numberOrNull(record.estimated_spend),
    keep: record.keep === true,
    strayPodIds: strays,
  };
}

type Parsed = { ok: true; value: Record<string, unknown> } | { ok: false; problem: string };

/**
 * Parses a JSON object. The error names the position (line and column) only: V8's own message
 * may quote the file's content, which could hold anything.
 */
export function parseJsonObject(text: string, fileName: string): Parsed {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    const scan = scanJson(text);
    if (scan.ok) return { ok: false, problem: `${fileName} is not valid JSON` };
    const { line, column } = lineColumn(text, scan.errorAt);
    return {
      ok: false,
      problem: `${fileName} is not valid JSON at line ${line} column ${column}`,
    };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, problem: `${fileName} is not a JSON object` };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

function rfc3339ToUnixS(value: unknown): number | null {
  if (typeof value !== 'string') return null;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : null;
}

function stringOrNull(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** The file's text, null when absent, or why it could not be read (one bad run must not hide the others). */
async function readOptional(file: string): Promise<string | null | { problem: string }> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (error) {
    if (isNotFound(error)) return null;
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    return { problem: `${path.basename(file)} could not be read (${code})` };
  }
}

function isNotFound(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
