/**
 * Snapshots (the trainer protocol's stop-and-save): the client or the pod's watchdog asks for
 * one with `snapshot.request`; the trainer saves a checkpoint at its next step end, writes
 * `snapshot.json` and exits 0; the run then ends `stopped` with that checkpoint brought home.
 */
import { z } from 'zod';
import type { Executor } from '../exec/executor';
import { unsafeRelativePath } from '../exec/pathRules';
import type { RunSnapshot, SnapshotReason } from '../runs/runRecord';
import { noRunDirSh, shQuote, SNAPSHOT_JSON, SNAPSHOT_REASONS, SNAPSHOT_REQUEST } from './job';

export type RequestResult =
  /** The request is written: the trainer stops at its next step end. */
  | { kind: 'requested'; reason: SnapshotReason }
  /** A request was already there (its reason is kept: a request is never replaced). */
  | { kind: 'already_requested'; reason: SnapshotReason }
  /** The job has ended (exit_code or cancelled exists): there is nothing to stop. */
  | { kind: 'ended' };

export function parseReason(text: string): SnapshotReason {
  const word = text.trim();
  return (SNAPSHOT_REASONS as readonly string[]).includes(word)
    ? (word as SnapshotReason)
    : 'requested';
}

/**
 * The sh that writes the request once: temp file, then `ln` (which fails when the name exists,
 * so a request already written by the watchdog or another client is never replaced).
 */
export function requestScript(runDir: string, reason: SnapshotReason): string {
  const tmp = `.${SNAPSHOT_REQUEST}.$$.tmp`;
  return [
    `cd ${shQuote(runDir)} 2>/dev/null || { ${noRunDirSh(runDir)}; exit 93; }`,
    `if [ -e ${SNAPSHOT_REQUEST} ]; then printf 'already '; cat ${SNAPSHOT_REQUEST}; exit 0; fi`,
    'if [ -e exit_code ] || [ -e cancelled ]; then echo ended; exit 0; fi',
    `printf '%s\\n' ${shQuote(reason)} > "${tmp}" || exit 94`,
    `if ln "${tmp}" ${SNAPSHOT_REQUEST} 2>/dev/null; then rm -f "${tmp}"; echo requested; exit 0; fi`,
    `rm -f "${tmp}"`,
    `printf 'already '; cat ${SNAPSHOT_REQUEST}`,
  ].join('\n');
}

/** Asks the job on `executor` for a snapshot. Throws ExecError, or an Error when the script fails. */
export async function requestSnapshot(
  executor: Executor,
  runDir: string,
  reason: SnapshotReason,
  options: { signal?: AbortSignal } = {},
): Promise<RequestResult> {
  const result = await executor.exec(requestScript(runDir, reason), {
    signal: options.signal,
    timeoutMs: 30_000,
    maxOutputBytes: 4096,
  });
  const out = result.stdout.toString('utf8').trim();
  if (result.code !== 0) {
    const why = result.stderr.toString('utf8').trim().slice(0, 300);
    throw new Error(
      `could not ask the job in ${runDir} for a snapshot: ${why || `exit ${result.code ?? result.signal}`}`,
    );
  }
  if (out === 'requested') return { kind: 'requested', reason };
  if (out === 'ended') return { kind: 'ended' };
  if (out.startsWith('already')) {
    return { kind: 'already_requested', reason: parseReason(out.slice('already'.length)) };
  }
  throw new Error(`the snapshot request in ${runDir} answered ${JSON.stringify(out.slice(0, 60))}`);
}

const SnapshotJson = z.object({
  checkpoint: z.string().min(1).max(4000),
  step: z.number().int().min(0),
  time: z.number().optional(),
  reason: z.string().optional(),
});

/**
 * A trainer's `snapshot.json`, or an Error saying what is wrong with it. The checkpoint must
 * be a relative path inside the run directory (no `..`, no absolute path): it is retrieved
 * from there, and a resumed run uploads it.
 */
export function parseSnapshotJson(text: string): RunSnapshot {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new Error(`${SNAPSHOT_JSON} is not JSON`);
  }
  const parsed = SnapshotJson.safeParse(raw);
  if (!parsed.success) {
    throw new Error(
      `${SNAPSHOT_JSON} needs {"checkpoint": "<path in the run directory>", "step": <whole number>}`,
    );
  }
  const checkpoint = parsed.data.checkpoint.replace(/^\.\//, '').replace(/\/+$/, '');
  const problem = unsafeRelativePath(checkpoint);
  if (problem !== undefined) {
    throw new Error(
      `${SNAPSHOT_JSON} names checkpoint ${JSON.stringify(parsed.data.checkpoint.slice(0, 200))}, which is not a path inside the run directory (it ${problem})`,
    );
  }
  return { checkpoint, step: parsed.data.step, reason: parseReason(parsed.data.reason ?? '') };
}

/**
 * The job's `snapshot.json` on `executor`: null when there is none, an Error (not thrown) when it
 * cannot be used. Throws ExecError when the target cannot be reached.
 */
export async function readSnapshot(
  executor: Executor,
  runDir: string,
  options: { signal?: AbortSignal } = {},
): Promise<RunSnapshot | Error | null> {
  const result = await executor.exec(
    `cd ${shQuote(runDir)} 2>/dev/null || exit 3\n[ -f ${SNAPSHOT_JSON} ] || exit 4\ncat ${SNAPSHOT_JSON}`,
    { signal: options.signal, timeoutMs: 30_000, maxOutputBytes: 64 * 1024 },
  );
  if (result.code === 3 || result.code === 4) return null;
  if (result.code !== 0 || result.truncated) {
    return new Error(
      `${SNAPSHOT_JSON} could not be read (${result.truncated ? 'larger than 64 KiB' : `exit ${result.code ?? result.signal}`})`,
    );
  }
  try {
    return parseSnapshotJson(result.stdout.toString('utf8'));
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}
