/**
 * Checkpoints streamed home while a run is followed: the pod's watcher pushes a look at the run
 * directory on the metrics stream whenever the checkpoints the trainer saved changed
 * (`checkpoint-<step>` directories, `output/checkpoint-20`; train/podWatcher.ts), or, while that
 * stream is down, the client looks itself every `checkpointPollMs`; the newest finished one is
 * copied to
 * `runs/<id>/checkpoints/checkpoint-<step>/` with {@link retrieve} (verified against the pod's
 * SHA-256 manifest; an interrupted copy resumes from its staged files at the next tick). A
 * checkpoint still being written is not taken: one is finished when a newer one exists, when the
 * trainer's `snapshot.json` names it, or when its files and sizes are the same at two looks.
 * The newest verified copy is recorded in `checkpoints/latest.json` (written atomically), and
 * older copies beyond one are deleted only after a newer one verified. It runs alongside the
 * lease holder and never fails the follow: its failures are logged and tried again.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { cp, mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isAbortError } from '../clock';
import type { Executor } from '../exec/executor';
import { resolveInside, unsafeRelativePath } from '../exec/pathRules';
import { CHECKPOINTS_DIR } from '../runs/store';
import type { RunRecord } from '../runs/runRecord';
import { lookScript } from '../train/podWatcher';
import { RetrieveSpaceError, STAGING_DIR } from '../train/retrieval';
import { retrieveReported } from '../train/retrievalTransfer';
import { log, warn, type PodCtx } from './context';
import { HASHES_SUFFIX, mirrorMetrics, writeHashes } from './checkpointHome';
import type { PodPushes, Pushed } from './podPushes';
import { describeError } from '../errors';

export { lookScript } from '../train/podWatcher';

/** The record of the newest verified local checkpoint, in `runs/<id>/checkpoints/`. */
export const LATEST_FILE = 'latest.json';

export interface StreamedCheckpoint {
  /** Local path relative to the run directory: `checkpoints/checkpoint-20`. */
  path: string;
  step: number;
  /** Where it was on the pod, relative to the run directory: `output/checkpoint-20`. */
  remote: string;
  /** When it verified (unix ms). */
  timeMs: number;
  files: number;
  bytes: number;
}

/** Names the stream accepts (relative to the run dir); anything else is not a checkpoint of ours. */
const CHECKPOINT_PATH = /^(?:[A-Za-z0-9_.-]+\/){0,3}checkpoint-(\d{1,12})$/;

export interface Look {
  /** Checkpoint path (relative) → signature of its files and sizes. */
  checkpoints: Map<string, string>;
  /** The checkpoint `snapshot.json` names, if any. */
  snapshot: string | null;
}

export function parseLook(out: string): Look {
  const checkpoints = new Map<string, string>();
  let current: string | null = null;
  let snapshot: string | null = null;
  for (const line of out.split('\n')) {
    if (line.startsWith('D ./')) {
      const path = line.slice(4);
      current = isCheckpointPath(path) ? path : null;
      if (current !== null) checkpoints.set(current, '');
    } else if (line.startsWith('F ') && current !== null) {
      checkpoints.set(current, `${checkpoints.get(current)}${line.trim().replace(/\s+/g, ' ')}\n`);
    } else if (line.startsWith('S ')) {
      try {
        const parsed = JSON.parse(line.slice(2)) as { checkpoint?: unknown };
        if (typeof parsed.checkpoint === 'string') snapshot = parsed.checkpoint;
      } catch {
        // A torn snapshot.json: the next look reads it whole.
      }
    }
  }
  return { checkpoints, snapshot };
}

/**
 * A checkpoint path the stream takes: `checkpoint-<step>` up to three folders down, a name every
 * platform reads alike (no `..` that would point the copy's retrieval out of the run directory).
 */
export function isCheckpointPath(path: string): boolean {
  return CHECKPOINT_PATH.test(path) && unsafeRelativePath(path) === undefined;
}

export function stepOf(path: string): number {
  return Number(CHECKPOINT_PATH.exec(path)?.[1] ?? NaN);
}

/**
 * The newest checkpoint that is finished: newest first, one counts when a newer one exists, the
 * snapshot names it, or its signature is the same as at the previous look (and has files).
 */
export function finishedCheckpoint(look: Look, previous: Look | null): string | null {
  const sorted = [...look.checkpoints.keys()].sort((a, b) => stepOf(b) - stepOf(a));
  for (const [index, path] of sorted.entries()) {
    const signature = look.checkpoints.get(path)!;
    if (signature === '') continue;
    if (index > 0 || look.snapshot === path) return path;
    if (previous?.checkpoints.get(path) === signature) return path;
  }
  return null;
}

/** The newest verified local checkpoint of a run (`localRunDir`), or null. */
export function readLatest(localRunDir: string): StreamedCheckpoint | null {
  try {
    const parsed = JSON.parse(
      readFileSync(join(localRunDir, CHECKPOINTS_DIR, LATEST_FILE), 'utf8'),
    ) as StreamedCheckpoint;
    if (typeof parsed.path !== 'string' || !Number.isInteger(parsed.step)) return null;
    return parsed;
  } catch {
    return null;
  }
}

async function writeLatest(localRunDir: string, latest: StreamedCheckpoint): Promise<void> {
  const path = join(localRunDir, CHECKPOINTS_DIR, LATEST_FILE);
  const temp = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(temp, `${JSON.stringify(latest, null, 2)}\n`);
  await rename(temp, path);
}

/** Deletes local checkpoint copies (and their hash lists) but the newest and the one before it. */
async function prune(localRunDir: string, keep: readonly string[]): Promise<void> {
  const dir = join(localRunDir, CHECKPOINTS_DIR);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const name = entry.name.endsWith(HASHES_SUFFIX)
      ? entry.name.slice(0, -HASHES_SUFFIX.length)
      : entry.name;
    if (!/^checkpoint-\d+$/.test(name)) continue;
    if (keep.includes(name)) continue;
    await rm(join(dir, entry.name), { recursive: true, force: true });
  }
}

/**
 * Streams the checkpoints of `run` home until `signal` aborts, as `pushes` bring the pod's looks
 * (without them, or while the stream is down, a look every `checkpointPollMs`); resolves then,
 * never rejects. `localRunDir` is the run's directory in the runs store.
 */
export async function watchCheckpoints(
  ctx: PodCtx,
  executor: Executor,
  run: RunRecord,
  signal: AbortSignal,
  pushes?: PodPushes,
  maxRetrieveGb?: number,
): Promise<void> {
  const localRunDir = ctx.store.runDir(run.id);
  let latest = readLatest(localRunDir);
  let older: string | null = null;
  let previous: Look | null = null;
  /** Checkpoints refused as over the limit or the free space: not tried again. */
  const tooBig = new Set<string>();

  /** The pod's look: pushed (with the one pushed before it), else asked for now. */
  const lookAt = async (
    pushed: Pushed | null,
  ): Promise<{ look: Look; previous: Look | null } | null> => {
    if (pushed !== null) {
      return {
        look: parseLook(pushed.value),
        previous: pushed.previous === null ? previous : parseLook(pushed.previous),
      };
    }
    const result = await executor.exec(lookScript(run.remoteDir), {
      signal,
      timeoutMs: 5 * 60_000,
      maxOutputBytes: 4 * 1024 * 1024,
    });
    if (result.code !== 0) return null;
    return { look: parseLook(result.stdout.toString('utf8')), previous };
  };

  /** One look and the copy it calls for; false when it should be tried again. */
  const tick = async (pushed: Pushed | null): Promise<boolean> => {
    const seen = await lookAt(pushed);
    if (seen === null) return false;
    const { look } = seen;
    const chosen = finishedCheckpoint(look, seen.previous);
    previous = look;
    if (chosen === null) return true;
    const step = stepOf(chosen);
    if (latest !== null && (latest.remote === chosen || latest.step >= step)) return true;
    if (tooBig.has(chosen)) return true;
    const slash = chosen.lastIndexOf('/');
    const name = chosen.slice(slash + 1);
    const parent = slash < 0 ? '' : chosen.slice(0, slash);
    const home = join(localRunDir, CHECKPOINTS_DIR);
    await mkdir(home, { recursive: true });
    // The metrics up to its step (a recovery's new pod continues the curve from them) are
    // mirrored beside the copy, at the same time: the checkpoint was saved, so the file holds
    // its step already. Never rejects.
    const mirrored = mirrorMetrics(executor, run.remoteDir, localRunDir, signal);
    const got = await retrieveReported(ctx, run.id, 'checkpoint', {
      executor,
      remoteRunDir: parent === '' ? run.remoteDir : `${run.remoteDir}/${parent}`,
      localRunDir: home,
      entries: [name],
      signal,
      clock: ctx.clock,
      ...(maxRetrieveGb === undefined ? {} : { maxRetrieveGb }),
    })
      .catch((error: unknown) => {
        // Over the limit or the free space: said once, and that checkpoint is not tried again.
        if (!(error instanceof RetrieveSpaceError)) throw error;
        tooBig.add(chosen);
        warn(
          ctx,
          run.id,
          'checkpoint_too_big',
          `run ${run.id}: checkpoint ${chosen} is not streamed home: ${error.message}; raise max_retrieve_gb under [targets.${run.target}] for the next run`,
        );
        return null;
      })
      .finally(() => mirrored);
    if (got === null) return true;
    if (!got.verified || got.files === 0) {
      log(ctx, 'debug', `run ${run.id}: checkpoint ${chosen} did not verify yet; tried again`);
      return false;
    }
    // The metrics mirrored, then the pod's SHA-256 of every file next to the copy: a recovery
    // hashes the copy again against it before it trusts it. Written before latest.json names it.
    if (!(await mirrored)) return false;
    await writeHashes(home, name, got.manifest);
    const before = latest;
    latest = {
      path: `${CHECKPOINTS_DIR}/${name}`,
      step,
      remote: chosen,
      timeMs: ctx.clock.nowMs(),
      files: got.files,
      bytes: got.bytes,
    };
    await writeLatest(localRunDir, latest);
    if (before !== null && before.path !== latest.path) older = before.path.split('/').pop()!;
    await prune(localRunDir, older === null ? [name] : [name, older]);
    log(
      ctx,
      'info',
      `run ${run.id}: checkpoint ${chosen} (step ${step}) is home, verified (${got.transferredBytes} bytes fetched)`,
    );
    return true;
  };

  // With pushes: each look as it comes; one whose copy failed is tried again after
  // `checkpointLookMs` (the pod pushes only what changed), and while the stream is down the
  // client looks itself every `checkpointPollMs`.
  let lastPushed: Pushed | null = null;
  let done = true;
  while (!signal.aborted) {
    let pushed: Pushed | null = null;
    if (pushes !== undefined) {
      let next;
      try {
        next = await pushes.look.next(
          ctx.timing.checkpointPollMs,
          signal,
          done ? Infinity : ctx.timing.checkpointLookMs,
        );
      } catch {
        return;
      }
      if (next === 'waited') pushed = lastPushed;
      else if (next !== 'down') pushed = lastPushed = next;
    }
    try {
      done = await tick(pushed);
    } catch (error) {
      done = false;
      if (isAbortError(error) || signal.aborted) return;
      log(
        ctx,
        'debug',
        `run ${run.id}: streaming checkpoints failed this time: ${describeError(error)}`,
      );
    }
    if (pushes !== undefined) continue;
    try {
      await ctx.clock.sleep(ctx.timing.checkpointPollMs, signal);
    } catch {
      return;
    }
  }
}

/**
 * Before the results of a stopped run are retrieved: when its snapshot checkpoint (`kept`,
 * relative to the run directory, `output/checkpoint-12`) was streamed home already, its files are
 * copied into the retrieval's staging directory, where {@link retrieve} hashes them against the
 * pod's manifest and fetches only the files that differ. Returns the bytes placed there (0 when
 * no streamed copy matches the path). Never throws: without a seed everything is fetched.
 */
export async function seedFromStream(localRunDir: string, kept: string): Promise<number> {
  try {
    const latest = readLatest(localRunDir);
    if (latest === null || latest.remote !== kept || !isCheckpointPath(kept)) return 0;
    const from = resolveInside(localRunDir, latest.path);
    const to = resolveInside(join(localRunDir, STAGING_DIR, 'files'), kept);
    await rm(to, { recursive: true, force: true });
    await mkdir(join(to, '..'), { recursive: true });
    await cp(from, to, { recursive: true, errorOnExist: false, verbatimSymlinks: true });
    let bytes = 0;
    for (const file of await readdir(to, { recursive: true, withFileTypes: true })) {
      if (file.isFile()) bytes += (await stat(join(file.parentPath, file.name))).size;
    }
    return bytes;
  } catch {
    return 0;
  }
}
