/**
 * The checkpoints a run streamed home (`runs/<id>/checkpoints/`), as a recovery on a new pod uses
 * them: each copy has the pod's SHA-256 of its files next to it (`checkpoint-20.sha256.json`),
 * and is hashed again against that list before it is trusted; the newest copy that matches is
 * taken, one that does not is skipped for the one before it. The run's metrics are mirrored next
 * to them (`checkpoints/metrics.jsonl`, read on from its size at each streamed checkpoint), so the
 * new pod's metrics file can start with the curve up to the checkpoint's step.
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { appendFile, rename, stat, writeFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import type { Executor } from '../exec/executor';
import { ExecError } from '../exec/executor';
import { CHECKPOINTS_DIR } from '../runs/store';
import { METRICS_FILE } from '../train/job';
import type { ManifestEntry } from '../train/retrieval';

/** Next to `checkpoint-<step>/`: `{"files": {"model.json": "<sha256>", …}}`. */
export const HASHES_SUFFIX = '.sha256.json';

/** Bytes of the metrics mirror read from the pod in one call. */
const MIRROR_READ_BYTES = 4 * 1024 * 1024;

/** Writes the hash list of the copy `name` from the manifest {@link retrieve} checked it with. */
export async function writeHashes(
  checkpointsDir: string,
  name: string,
  manifest: readonly ManifestEntry[],
): Promise<void> {
  const files: Record<string, string> = {};
  for (const entry of manifest) {
    if (!entry.path.startsWith(`${name}/`)) continue;
    files[entry.path.slice(name.length + 1)] = entry.sha256;
  }
  const file = join(checkpointsDir, `${name}${HASHES_SUFFIX}`);
  await writeFile(`${file}.tmp`, `${JSON.stringify({ files })}\n`);
  await rename(`${file}.tmp`, file);
}

/**
 * Reads the run's metrics.jsonl on from the mirror's size into `checkpoints/metrics.jsonl`. Never
 * throws; false when the read failed (the checkpoint just streamed is then not accepted yet: a
 * checkpoint taken for a recovery must have its curve up to its step mirrored).
 */
export async function mirrorMetrics(
  executor: Executor,
  remoteRunDir: string,
  localRunDir: string,
  signal?: AbortSignal,
): Promise<boolean> {
  const mirror = join(localRunDir, CHECKPOINTS_DIR, METRICS_FILE);
  try {
    let size = existsSync(mirror) ? (await stat(mirror)).size : 0;
    for (;;) {
      if (signal?.aborted) return false;
      const chunk = await executor.readRange(
        `${remoteRunDir}/${METRICS_FILE}`,
        size,
        MIRROR_READ_BYTES,
      );
      if (chunk.length === 0) return true;
      await appendFile(mirror, chunk);
      size += chunk.length;
      if (chunk.length < MIRROR_READ_BYTES) return true;
    }
  } catch (error) {
    return error instanceof ExecError && error.kind === 'not_found';
  }
}

/** A streamed checkpoint that matched its hash list: what a recovery resumes from. */
export interface HomeCheckpoint {
  /** Relative to the run directory: `checkpoints/checkpoint-20`. */
  path: string;
  step: number;
}

/** A streamed checkpoint passed over, and why. */
export interface SkippedCheckpoint {
  path: string;
  why: string;
}

/**
 * The newest streamed checkpoint of the run in `localRunDir` whose files hash to the pod's list
 * (no file missing, none more, none different), and the newer ones skipped; null when none
 * matches (the run then starts over from step 0).
 */
export async function newestVerified(
  localRunDir: string,
): Promise<{ checkpoint: HomeCheckpoint | null; skipped: SkippedCheckpoint[] }> {
  const dir = join(localRunDir, CHECKPOINTS_DIR);
  const skipped: SkippedCheckpoint[] = [];
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => /^checkpoint-\d+$/.test(n));
  } catch {
    return { checkpoint: null, skipped };
  }
  const stepOf = (name: string): number => Number(name.slice('checkpoint-'.length));
  for (const name of names.sort((a, b) => stepOf(b) - stepOf(a))) {
    const path = `${CHECKPOINTS_DIR}/${name}`;
    const why = await mismatch(join(dir, name), join(dir, `${name}${HASHES_SUFFIX}`));
    if (why === null) return { checkpoint: { path, step: stepOf(name) }, skipped };
    skipped.push({ path, why });
  }
  return { checkpoint: null, skipped };
}

/** Why the copy in `copyDir` does not match its hash list, or null when it does. */
async function mismatch(copyDir: string, hashesFile: string): Promise<string | null> {
  let expected: Record<string, string>;
  try {
    const parsed = JSON.parse(readFileSync(hashesFile, 'utf8')) as { files?: unknown };
    if (typeof parsed.files !== 'object' || parsed.files === null)
      return 'its hash list is damaged';
    expected = parsed.files as Record<string, string>;
  } catch {
    return 'it has no hash list from the pod';
  }
  const found = listFiles(copyDir);
  const wanted = Object.keys(expected);
  if (wanted.length === 0) return 'its hash list names no file';
  for (const file of wanted) {
    if (!found.includes(file)) return `${file} is missing`;
  }
  for (const file of found) {
    if (!(file in expected)) return `${file} is not in the pod's list`;
    if ((await sha256(join(copyDir, file))) !== expected[file]) {
      return `${file} does not match the pod's SHA-256`;
    }
  }
  return null;
}

function listFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (at: string): void => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const full = join(at, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.isFile() || statSync(full).isFile())
        out.push(relative(dir, full).split(sep).join('/'));
    }
  };
  walk(dir);
  return out;
}

function sha256(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    createReadStream(file)
      .on('data', (chunk) => hash.update(chunk))
      .on('error', reject)
      .on('end', () => resolve(hash.digest('hex')));
  });
}

/**
 * The mirrored metrics up to `step` (lines without a step, such as `begin`, kept), for the new
 * pod's metrics.jsonl: the resumed job appends from the next step, so the curve continues.
 * Empty when there is no mirror or `step` is null (starting over).
 */
export function metricsUpTo(localRunDir: string, step: number | null): Buffer {
  if (step === null) return Buffer.alloc(0);
  let text: string;
  try {
    text = readFileSync(join(localRunDir, CHECKPOINTS_DIR, METRICS_FILE), 'utf8');
  } catch {
    return Buffer.alloc(0);
  }
  const kept: string[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let lineStep: unknown;
    try {
      lineStep = (JSON.parse(line) as { step?: unknown }).step;
    } catch {
      continue; // a torn last line
    }
    if (typeof lineStep === 'number' && lineStep > step) continue;
    kept.push(line);
  }
  return Buffer.from(kept.length === 0 ? '' : `${kept.join('\n')}\n`, 'utf8');
}
