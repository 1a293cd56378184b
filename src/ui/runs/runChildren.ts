/**
 * The children of an expanded run in the Runs view, read when it is expanded: its pod, its
 * attempts, its metrics summary, a record problem, then its files (never the local-only ones).
 */
import { promises as fs, type Dirent } from 'node:fs';
import * as path from 'node:path';
import { isAtomicTemp, LOCAL_ONLY, METRICS_FILE, RUN_FILE } from '../../core/flow/records';
import { readAttempts } from './runAttempts';
import type { RunChild, RunSummary } from './runsModel';
import { isNotFound, readMetricsSummary } from './runsSource';

/** How many entries of an output folder are listed before a "more…" row. */
export const MAX_LISTED_ENTRIES = 200;

/**
 * The children of an expanded run: its pod, its metrics summary (when metrics.jsonl exists),
 * the record problem (with the file to open), then its files (outputs, logs), never the
 * local-only ones (ssh keys, records, lock).
 */
export async function readRunChildren(run: RunSummary): Promise<RunChild[]> {
  const base = { runDir: run.dir, run };
  const children: RunChild[] = [];
  if (run.problem !== null) {
    const file = run.problemFile ?? RUN_FILE;
    children.push({
      ...base,
      kind: 'problem',
      text: run.problem,
      hint: run.problemHint ?? null,
      path: path.join(run.dir, file),
    });
  }
  if (run.pod !== null) children.push({ ...base, kind: 'pod' });
  const cluster = run.cluster ?? null;
  for (const node of cluster?.nodes ?? []) {
    children.push({ ...base, kind: 'node', node, clusterId: cluster?.id ?? '' });
  }
  (await readAttempts(run.dir)).forEach((attempt, index) =>
    children.push({ ...base, kind: 'attempt', attempt, index }),
  );
  const metrics = await readMetricsSummary(path.join(run.dir, METRICS_FILE));
  if (metrics !== null) children.push({ ...base, kind: 'metrics', metrics });
  children.push(...(await readDirChildren(run, run.dir)));
  return children;
}

/** The entries of `dir` (a run directory or one of its folders): folders first, then files. */
export async function readDirChildren(run: RunSummary, dir: string): Promise<RunChild[]> {
  let entries: Dirent[];
  try {
    entries = await fs.readdir(dir, { withFileTypes: true });
  } catch (error) {
    if (isNotFound(error)) return [];
    const code = (error as NodeJS.ErrnoException | undefined)?.code ?? 'error';
    return [
      {
        runDir: run.dir,
        run,
        kind: 'problem',
        text: `${path.basename(dir)} could not be listed (${code})`,
        hint: 'Check its permissions, then refresh the view.',
        path: null,
      },
    ];
  }
  const top = dir === run.dir;
  const shown = entries
    .filter((entry) => !isAtomicTemp(entry.name))
    .filter((entry) => !(top && (LOCAL_ONLY.includes(entry.name) || entry.name === METRICS_FILE)))
    .filter((entry) => entry.isDirectory() || entry.isFile())
    .sort((a, b) =>
      a.isDirectory() !== b.isDirectory()
        ? a.isDirectory()
          ? -1
          : 1
        : a.name < b.name
          ? -1
          : a.name > b.name
            ? 1
            : 0,
    );
  const children: RunChild[] = shown.slice(0, MAX_LISTED_ENTRIES).map((entry) => ({
    runDir: run.dir,
    run,
    kind: 'file',
    path: path.join(dir, entry.name),
    name: entry.name,
    isDir: entry.isDirectory(),
  }));
  if (shown.length > MAX_LISTED_ENTRIES) {
    children.push({
      runDir: run.dir,
      run,
      kind: 'more',
      parent: dir,
      count: shown.length - MAX_LISTED_ENTRIES,
    });
  }
  return children;
}
