import { closeSync, fstatSync, openSync, promises as fs, readSync, type Dirent } from 'node:fs';
import * as path from 'node:path';
import {
  RECORD_MAX_BYTES,
  isRunsError,
  isValidRunId,
  lineColumn,
  scanJson,
  decodePodRecord,
  POD_FILE,
  type PodRecord,
  decodeRunRecord,
  RUN_FILE,
  parseMetricLine,
} from '../../core/flow/records';
import {
  compareRunsNewestFirst,
  type MetricsSummary,
  type NewestRuns,
  type PodSummary,
  type RunSummary,
} from './runsModel';

/**
 * Reads `runs/<id>/run.json` (+ `pod.json`) of the workspace folders for the Runs view, through
 * the core's record codecs (the same schemas the run store saves and loads with), read-only:
 * nothing here writes, locks or touches the network. Lenient on purpose: one damaged record
 * becomes an item saying where it is damaged and what to do (the core's message and hint, by
 * position only — a record may hold anything and its content is never echoed); it never hides
 * the other runs. Reading is cheap: two small files per run, read synchronously (for files of a
 * few KiB that is several times faster than the thread pool's four calls per file) in batches
 * of READ_BATCH runs, yielding to the event loop between batches so the extension host never
 * stalls; metrics and outputs are read only when a run is expanded.
 */

export interface RunsFolder {
  /** Absolute path of the runs folder (e.g. `<workspace>/runs`). */
  dir: string;
  workspaceName: string;
}

/** How many run directories are read between two yields to the event loop. */
export const READ_BATCH = 50;

/** How much of the end of metrics.jsonl is read for the summary. */
export const METRICS_TAIL_BYTES = 256 * 1024;

/** Lists every run directory of the given folders. A missing runs folder is simply empty. */
export async function readRuns(folders: readonly RunsFolder[]): Promise<RunSummary[]> {
  const all = await Promise.all(folders.map((folder) => readRunsFolder(folder)));
  return all.flat();
}

async function readRunsFolder(folder: RunsFolder): Promise<RunSummary[]> {
  const names = await listRunDirs(folder);
  const runs: RunSummary[] = [];
  for (let start = 0; start < names.length; start += READ_BATCH) {
    if (start > 0) await yieldToEventLoop();
    for (const name of names.slice(start, start + READ_BATCH)) {
      const run = readRunDirSync(path.join(folder.dir, name), name, folder);
      if (run !== null) runs.push(run);
    }
  }
  return runs;
}

/** The names of the run directories of a folder (one readdir); none when it is missing. */
async function listRunDirs(folder: RunsFolder): Promise<string[]> {
  let entries: Dirent[];
  try {
    entries = await fs.readdir(folder.dir, { withFileTypes: true });
  } catch (error) {
    if (isNotFound(error)) return [];
    throw error;
  }
  return entries
    .filter((entry) => entry.isDirectory() && isValidRunId(entry.name))
    .map((entry) => entry.name);
}

/**
 * The newest `count` runs of the folders, newest first, and how many run directories there are:
 * the first rows of the Runs view, without reading every record first. The directories are
 * ordered by the creation time their IDs carry (what a record's `created` says, as the store
 * names a run when it creates it) and only the first ones' records are read; the whole list
 * (readRuns) orders them by the records themselves. `total` counts directories: one without a
 * run.json beyond the first `count` (a run being created) is in it until the whole list is read.
 */
export async function readNewestRuns(
  folders: readonly RunsFolder[],
  count: number,
): Promise<NewestRuns> {
  const listed = await Promise.all(
    folders.map(async (folder) =>
      (await listRunDirs(folder)).map((name) => ({ folder, name, stamp: idStamp(name) })),
    ),
  );
  const dirs = listed.flat().sort((a, b) => {
    if (a.stamp !== b.stamp) return a.stamp < b.stamp ? 1 : -1;
    return a.name < b.name ? 1 : a.name > b.name ? -1 : 0;
  });
  const runs: RunSummary[] = [];
  let next = 0;
  for (; next < dirs.length && runs.length < count; next++) {
    const { folder, name } = dirs[next]!;
    const run = readRunDirSync(path.join(folder.dir, name), name, folder);
    if (run !== null) runs.push(run);
  }
  return { runs: runs.sort(compareRunsNewestFirst), total: runs.length + (dirs.length - next) };
}

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

interface Problem {
  problem: string;
  hint: string | null;
}

/** Null when the directory has no run.json (not a run, or one being created). */
function readRunDirSync(dir: string, id: string, folder: RunsFolder): RunSummary | null {
  const base: RunSummary = {
    id,
    dir,
    workspaceName: folder.workspaceName,
    target: null,
    // Until run.json says otherwise: the time its ID was made at, so a damaged run keeps its place.
    createdUnixS: createdFromId(id),
    state: null,
    message: null,
    pod: null,
    problem: null,
    problemHint: null,
    problemFile: null,
  };
  const runFile = path.join(dir, RUN_FILE);
  const podFile = path.join(dir, POD_FILE);
  const runText = readRecordText(runFile);
  if (runText === null) return null;
  if (typeof runText !== 'string') return withProblem(base, runText, RUN_FILE);
  let summary: RunSummary;
  try {
    const record = decodeRunRecord(runText, runFile);
    if (record.id !== id) {
      return withProblem(
        base,
        {
          problem: 'run.json is the record of another run (line 1, column 1)',
          hint: 'Rename the folder back to its run ID, or remove the copy.',
        },
        RUN_FILE,
      );
    }
    summary = {
      ...base,
      state: record.state,
      target: record.target,
      createdUnixS: rfc3339ToUnixS(record.created) ?? base.createdUnixS,
      message: record.message,
      snapshot: record.snapshot ?? null,
      resumedFrom: record.resumedFrom ?? null,
      ...(record.attempts === undefined ? {} : { attempts: record.attempts }),
      ...(record.cluster === undefined ? {} : { cluster: record.cluster }),
    };
  } catch (error) {
    return withProblem(base, recordProblem(error, runFile, RUN_FILE), RUN_FILE);
  }
  const podText = readRecordText(podFile);
  if (podText === null) return summary;
  if (typeof podText !== 'string') return withProblem(summary, podText, POD_FILE);
  try {
    const pod = decodePodRecord(podText, podFile);
    if (pod.runId !== id) {
      return withProblem(
        summary,
        {
          problem: 'pod.json is the pod record of another run (line 1, column 1)',
          hint: 'Rename the folder back to its run ID, or remove the copy.',
        },
        POD_FILE,
      );
    }
    summary.pod = podSummary(pod);
  } catch (error) {
    return withProblem(summary, recordProblem(error, podFile, POD_FILE), POD_FILE);
  }
  return summary;
}

function withProblem(
  summary: RunSummary,
  problem: Problem,
  file: 'run.json' | 'pod.json',
): RunSummary {
  return { ...summary, problem: problem.problem, problemHint: problem.hint, problemFile: file };
}

/** The core's error for a damaged record, with the file's name instead of its whole path. */
function recordProblem(error: unknown, file: string, name: string): Problem {
  if (isRunsError(error)) {
    return { problem: error.message.split(file).join(name), hint: error.hint };
  }
  return { problem: `${name} could not be read`, hint: 'Repair or restore the file.' };
}

export function podSummary(record: PodRecord): PodSummary {
  return {
    podId: record.podId,
    state: record.state,
    gpuType: record.gpuType,
    costPerHourUsd: record.costPerHourUsd,
    deadlineUnixS: record.deadlineUnixS,
    estimatedSpendUsd: record.estimatedSpendUsd,
    keep: record.keep,
    strayPodIds: [...record.strayPods],
    createdUnixS: record.createdUnixS,
    billedFromMs: record.billedFromMs,
    deletedBy: record.deletedBy,
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

/** The creation time in a run ID (`…_20260101-010000`, `…_20260101-010000_2`). */
const ID_STAMP = /_(\d{8}-\d{6})(?:_\d+)?$/;

/**
 * The creation time a run ID carries as text that sorts as the times do (`20260101-010000`), ''
 * for an ID without one (sorted after every other): the order of readNewestRuns's listing without
 * a Date per directory (createdFromId's parse was 10–28 ms of CPU for 10,000 IDs, this 1–5 ms).
 */
export function idStamp(id: string): string {
  return ID_STAMP.exec(id)?.[1] ?? '';
}

/** The creation time a run ID (`<slug>_YYYYMMDD-HHMMSS[_n]`) carries; null for another name. */
export function createdFromId(id: string): number | null {
  const match = /_(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})(?:_\d+)?$/.exec(id);
  if (match === null) return null;
  const [, y, mo, d, h, mi, sec] = match.map(Number);
  const ms = Date.UTC(y!, mo! - 1, d!, h!, mi!, sec!);
  return Number.isFinite(ms) ? ms / 1000 : null;
}

function rfc3339ToUnixS(value: string): number | null {
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : null;
}

/**
 * The text of a record file, null when absent, or why it cannot be read. Bounded like the run
 * store's reads: anything but a small regular file is a problem, not a read.
 */
function readRecordText(file: string): string | null | Problem {
  const name = path.basename(file);
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (error) {
    if (isNotFound(error)) return null;
    return ioProblem(name, error);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile() || stat.size > RECORD_MAX_BYTES) {
      return {
        problem: `${name} is not a valid ${name === POD_FILE ? 'pod' : 'run'} record (line 1, column 1): it is not a small regular file`,
        hint: 'Remove or restore it.',
      };
    }
    // One byte more than its size: a file that grew meanwhile still ends up complete.
    const buffer = Buffer.alloc(stat.size + 1);
    let length = 0;
    for (;;) {
      const n = readSync(fd, buffer, length, buffer.length - length, length);
      if (n === 0) break;
      length += n;
      if (length === buffer.length) {
        return {
          problem: `${name} changed while it was read`,
          hint: 'Refresh the view.',
        };
      }
    }
    return buffer.toString('utf8', 0, length);
  } catch (error) {
    return ioProblem(name, error);
  } finally {
    try {
      closeSync(fd);
    } catch {
      // Closing a descriptor only read from cannot lose anything.
    }
  }
}

function ioProblem(name: string, error: unknown): Problem {
  const code = (error as NodeJS.ErrnoException | undefined)?.code ?? 'error';
  return {
    problem: `${name} could not be read (${code})`,
    hint:
      code === 'EACCES' || code === 'EPERM'
        ? 'Check the permissions of the runs folder.'
        : code === 'EISDIR'
          ? 'Remove or restore it: it should be a file.'
          : 'Check the runs folder, then refresh the view.',
  };
}

export function isNotFound(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/**
 * The summary of metrics.jsonl from its last METRICS_TAIL_BYTES (a bounded read, whatever the
 * file's size), parsed with the trainer protocol's parser; null when there is no such file.
 */
export async function readMetricsSummary(file: string): Promise<MetricsSummary | null> {
  let handle: import('node:fs/promises').FileHandle;
  try {
    handle = await fs.open(file, 'r');
  } catch {
    return null;
  }
  let bytes: Buffer;
  let partial: boolean;
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) return null;
    const length = Math.min(stat.size, METRICS_TAIL_BYTES);
    partial = stat.size > length;
    bytes = Buffer.alloc(length);
    const { bytesRead } = await handle.read(bytes, 0, length, stat.size - length);
    bytes = bytes.subarray(0, bytesRead);
  } catch {
    return null;
  } finally {
    await handle.close().catch(() => undefined);
  }
  return summarizeMetrics(bytes, partial);
}

/** The summary of metrics lines; `partial` when `bytes` starts mid-file (its first line is cut). */
export function summarizeMetrics(bytes: Uint8Array, partial: boolean): MetricsSummary {
  const summary: MetricsSummary = {
    step: null,
    maxSteps: null,
    epoch: null,
    loss: null,
    evalLoss: null,
    learningRate: null,
    ended: false,
    skippedLines: 0,
    partial,
  };
  let start = 0;
  if (partial) {
    const firstNewline = bytes.indexOf(0x0a);
    start = firstNewline === -1 ? bytes.length : firstNewline + 1;
  }
  while (start < bytes.length) {
    const end = bytes.indexOf(0x0a, start);
    // A last line without its newline may still be being written: only a complete one counts.
    if (end === -1) break;
    let line = bytes.subarray(start, end);
    if (line.length > 0 && line[line.length - 1] === 0x0d) line = line.subarray(0, -1);
    start = end + 1;
    const parsed = parseMetricLine(line);
    switch (parsed.kind) {
      case 'metric': {
        const m = parsed.metric;
        summary.step = m.step;
        summary.maxSteps = m.maxSteps ?? summary.maxSteps;
        summary.epoch = m.epoch ?? summary.epoch;
        summary.loss = m.loss ?? summary.loss;
        summary.evalLoss = m.evalLoss ?? summary.evalLoss;
        summary.learningRate = m.learningRate ?? summary.learningRate;
        break;
      }
      case 'begin':
        if (parsed.maxSteps !== null) summary.maxSteps = parsed.maxSteps;
        summary.ended = false;
        break;
      case 'end':
        summary.ended = true;
        break;
      case 'skip':
        if (parsed.reason !== 'blank') summary.skippedLines += 1;
        break;
      default:
        break;
    }
  }
  return summary;
}
