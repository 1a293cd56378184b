/**
 * `pod rm` (spec §9) and the pod listing it builds on (./podList.ts, re-exported here): nothing
 * deletes a pod without `pod rm`, and every delete is sent and confirmed.
 */
import { HintedError } from '../errors';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isAbortError, rfc3339 } from '../clock';
import type { RunState } from '../events';
import { isRunsError } from '../runs/errors';
import { noPodLeft, SSH_DIR } from '../runs/store';
import { isValidRunId } from '../runs/ids';
import type { RunLock } from '../runs/lock';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import type { Pod } from './api';
import { HOST_KEY_SECRET_PREFIX, log, type PodCtx } from './context';
import { forgetClientKey } from './keys';
import { PodError } from './podError';
import { forgetKeys, messageOf, remove } from './remove';
import {
  editPodRecord,
  FAILED_BY_POD_RM,
  isOrphan,
  listPods,
  POD_RM_OWNER,
  type PodRow,
} from './podList';

export * from './podList';

// ---------------------------------------------------------------------------
// pod rm

export type PodAdminErrorKind =
  /** The run is not in this project's runs/ (its pods may belong to another checkout). */
  | 'not_in_runs'
  /** The run is still starting its pod: a pod being provisioned is never put at risk. */
  | 'still_starting'
  /** The run is in progress but its training pod is not recorded: any pod of it may be training. */
  | 'pod_not_recorded'
  /** The run is in progress (or followed by another client): its training pod was kept. */
  | 'run_still_running';

/** A `pod rm` refusal: what was (not) done, and the next action. */
export class PodAdminError extends HintedError {
  constructor(
    readonly kind: PodAdminErrorKind,
    message: string,
    hint: string | null = null,
  ) {
    super(message, hint);
    this.name = 'PodAdminError';
  }
}

/** A pod `pod rm` deleted (confirmed gone). */
export interface RemovedPod {
  podId: string;
  /** How long it existed, when recorded (the run's own pod only). */
  uptimeMs: number | null;
  /** Its rate times its uptime, when both are recorded. */
  estimatedSpendUsd: number | null;
}

/** What `pod rm` did: the pods it deleted, even when it failed, and how it ended. */
export interface Removal {
  runId: string;
  removed: RemovedPod[];
  /** Null on success; a {@link PodAdminError} refusal, or the first failure (a PodError, an ApiError, a RunsError). */
  error: unknown;
}

export interface RemoveOptions {
  /** Delete even the training pod of a run in progress, and the pods of a run not in runs/. */
  force?: boolean;
}

/**
 * `pod rm RUN_ID`: deletes the run's recorded pod (even kept; `deleted_by:
 * pod_rm`), its strays, and any other pod carrying its marker; every delete is
 * sent and confirmed. Without `force`, it refuses a run not in runs/
 * (`not_in_runs`), a run still starting its pod (`still_starting`: preparing,
 * or running with a last create call that has no pod), and a run in progress
 * whose pod is not recorded (`pod_not_recorded`), deleting nothing; for a run
 * in progress with a recorded pod it deletes only the other pods and fails with
 * `run_still_running` naming what it kept and deleted. A run another client
 * follows (its lock is held) counts as in progress. Forced, a run in progress
 * whose pod was deleted is saved `failed` ({@link FAILED_BY_POD_RM}). The run's
 * keys are forgotten once every pod is gone. Never throws: see {@link Removal}.
 */
export async function removePods(
  ctx: PodCtx,
  runId: string,
  options: RemoveOptions = {},
): Promise<Removal> {
  const removed: RemovedPod[] = [];
  const held: { lock: RunLock | null } = { lock: null };
  try {
    const outcome = await removeChecked(ctx, runId, options.force ?? false, removed, held);
    return { runId, removed, error: outcome };
  } catch (error) {
    return { runId, removed, error };
  } finally {
    held.lock?.dispose();
  }
}

/**
 * Deletes one pod by its ID, confirmed gone like every delete: the Pods view's Remove on a pod
 * of no run (no run marker, so `pod rm RUN_ID` cannot name it). A pod of a known run goes
 * through {@link removePods} instead, with its rules. Throws when the delete fails or stays
 * unconfirmed (a PodError `not_deleted`: it may still bill).
 */
export async function removePodById(ctx: PodCtx, podId: string): Promise<RemovedPod> {
  await deleteConfirmed(ctx, '', podId, 'requested');
  return { podId, uptimeMs: null, estimatedSpendUsd: null };
}

async function removeChecked(
  ctx: PodCtx,
  runId: string,
  force: boolean,
  removed: RemovedPod[],
  held: { lock: RunLock | null },
): Promise<unknown> {
  ctx.store.runDir(runId); // an ID that would leave runs/ throws here
  let run: RunRecord | null = null;
  try {
    run = ctx.store.loadRun(runId);
  } catch (error) {
    if (!isRunsError(error, 'not_found')) {
      // A damaged run.json never blocks a forced removal either.
      if (!force) throw error;
      log(ctx, 'warn', `${messageOf(error)}: looking for the pods of run ${runId} by their marker`);
    } else if (!force) {
      return new PodAdminError(
        'not_in_runs',
        `run ${runId} is not in this project's runs/: its pods may belong to another checkout; if none owns it, pass --force`,
        `Check "overbrainer pod ls"; if no other checkout owns run ${runId}, run "overbrainer pod rm ${runId} --force".`,
      );
    }
  }
  // Another live client following the run (a VS Code window, another CLI) makes it a run in
  // progress: without --force its pod stays; with it, the follower finds the pod gone.
  let follower: string | null = null;
  if (run !== null) {
    const lock = ctx.store.lock(runId, POD_RM_OWNER);
    if (lock === null) {
      const holder = ctx.store.lockHolder(runId);
      follower = holder
        ? `${holder.owner ?? 'another client'}, pid ${holder.pid ?? '?'}`
        : 'another client';
    } else {
      held.lock = lock;
    }
  }
  const state: RunState | null = run?.state ?? null;
  const runInProgress = state === 'preparing' || state === 'running';
  const inProgress = runInProgress || follower !== null;
  let record: PodRecord | null = null;
  try {
    record = run === null ? null : ctx.store.loadPod(runId);
  } catch (error) {
    // A damaged pod.json never blocks removal: forced, the run's pods are found by their marker.
    if (!force) throw error;
    log(ctx, 'warn', `${messageOf(error)}: looking for the pods of run ${runId} by their marker`);
  }
  if (!force && starting(state, record)) {
    return new PodAdminError(
      'still_starting',
      `run ${runId} is still starting its pod; wait for it, or use \`overbrainer train cancel ${runId}\` once it runs, or \`pod rm ${runId} --force\``,
      'A pod being provisioned is deleted by its own run if it fails; nothing was deleted.',
    );
  }
  const keepTraining = inProgress && !force;
  const training =
    record !== null && record.state !== 'deleted' && record.podId !== null ? record.podId : null;
  if (keepTraining && training === null) {
    return new PodAdminError(
      'pod_not_recorded',
      `run ${runId} is in progress but its pod is not recorded, so its pods are left alone; if the run is really dead, use \`overbrainer pod rm ${runId} --force\``,
      null,
    );
  }
  let failed: unknown = null;
  const note = (error: unknown): void => {
    if (failed === null) failed = error;
  };
  if (!keepTraining && record !== null && training !== null) {
    const uptimeMs = record.uptimeMs(ctx.clock.nowMs());
    try {
      await remove(ctx, record, 'requested', 'pod_rm');
      removed.push({ podId: training, uptimeMs, estimatedSpendUsd: record.estimatedSpendUsd });
    } catch (error) {
      note(error);
    }
  }
  const tried = new Set<string>(training === null ? [] : [training]);
  const sweep: Sweep = { ctx, runId, removed, tried, note };
  if (run !== null) await removeStrays(sweep);
  await removeMarked(sweep);
  if (runInProgress && !keepTraining && removed.length > 0) {
    try {
      const fresh = ctx.store.loadRun(runId);
      fresh.state = 'failed';
      fresh.message = FAILED_BY_POD_RM;
      ctx.store.saveRun(fresh);
      ctx.bus.publish({ type: 'runState', runId, state: 'failed', message: FAILED_BY_POD_RM });
    } catch (error) {
      note(error);
    }
  }
  if (failed !== null) return failed;
  if (keepTraining) {
    const others = removed.map((pod) => pod.podId);
    const deleted = others.length === 0 ? '' : `its other pods ${others.join(', ')} were deleted`;
    const kept =
      training === null
        ? deleted === ''
          ? ''
          : `: ${deleted}`
        : `: its training pod ${training} was kept${deleted === '' ? '' : `, and ${deleted}`}`;
    const subject =
      runInProgress || follower === null
        ? `run ${runId} is still running`
        : `run ${runId} is followed by another client (${follower})`;
    return new PodAdminError(
      'run_still_running',
      `${subject}${kept}; stop it with \`overbrainer train cancel ${runId}\` first, or pass --force`,
      null,
    );
  }
  if (run !== null) await forgetKeys(ctx, runId);
  return null;
}

/**
 * Whether the run is still starting its pod: preparing, or running with a last
 * create call that has no pod yet. Provisioning sweeps its own duplicates.
 */
function starting(state: RunState | null, record: PodRecord | null): boolean {
  if (state === 'preparing') return true;
  if (state !== 'running') return false;
  const last = record?.attempts[record.attempts.length - 1];
  return last !== undefined && last.podId === undefined;
}

/** What removing a run's other pods (its strays, those carrying its marker) goes through. */
interface Sweep {
  ctx: PodCtx;
  runId: string;
  /** The pods confirmed deleted so far. */
  removed: RemovedPod[];
  /** The pods already tried, so none is deleted twice. */
  tried: Set<string>;
  /** Keeps the first failure (the removal goes on past it). */
  note: (error: unknown) => void;
}

/** Deletes each stray of the run, dropping it from `stray_pods` once confirmed gone. */
async function removeStrays({ ctx, runId, removed, tried, note }: Sweep): Promise<void> {
  let strays: string[];
  try {
    strays = ctx.store.loadPod(runId)?.strayPods ?? [];
  } catch {
    // Unreadable (reported above): every stray carries the run marker, which removeMarked sweeps.
    return;
  }
  for (const id of strays) {
    if (tried.has(id)) continue;
    tried.add(id);
    try {
      await deleteConfirmed(ctx, runId, id, 'duplicate');
      editPodRecord(ctx, runId, (record) =>
        record.setStrayPods(record.strayPods.filter((stray) => stray !== id)),
      );
      removed.push({ podId: id, uptimeMs: null, estimatedSpendUsd: null });
    } catch (error) {
      log(ctx, 'warn', `cannot confirm the deletion of stray pod ${id}: ${messageOf(error)}`);
      note(error);
    }
  }
}

/** Deletes every other listed pod carrying the run's marker; one whose delete fails becomes a stray. */
async function removeMarked({ ctx, runId, removed, tried, note }: Sweep): Promise<void> {
  let pods: Pod[];
  try {
    pods = await ctx.client.listPods({ runMarker: runId });
  } catch (error) {
    note(error);
    return;
  }
  // Listed: a create that went unanswered is unconfirmed no more (its pod, if any, is below).
  editPodRecord(ctx, runId, (record) => {
    if (!record.unconfirmedCreate) return false;
    record.unconfirmedCreate = false;
    if (record.podId === null && record.state === 'creating') {
      record.state = 'deleted';
      record.deletedAt = rfc3339(ctx.clock.nowMs());
    }
    return true;
  });
  for (const pod of pods) {
    if (pod.runMarker !== runId || tried.has(pod.id)) continue;
    tried.add(pod.id);
    try {
      await deleteConfirmed(ctx, runId, pod.id, 'duplicate');
      removed.push({ podId: pod.id, uptimeMs: null, estimatedSpendUsd: null });
    } catch (error) {
      const recorded = editPodRecord(ctx, runId, (record) =>
        record.setStrayPods([...record.strayPods, pod.id]),
      );
      log(
        ctx,
        'warn',
        `cannot confirm the deletion of pod ${pod.id}: ${messageOf(error)}${recorded ? '' : ' (and it is not recorded as a stray)'}`,
      );
      note(error);
    }
  }
}

/**
 * Deletes the pod `id` (not the run's recorded pod) and confirms it gone: the
 * delete is always sent, then the pod is looked at until Runpod answers its
 * 404, for `deleteConfirmMs`. Throws when the delete fails or stays unconfirmed.
 */
async function deleteConfirmed(
  ctx: PodCtx,
  runId: string,
  id: string,
  reason: 'duplicate' | 'requested',
): Promise<void> {
  ctx.bus.publish({ type: 'pod', runId, status: { kind: 'deleting', podId: id, reason } });
  await ctx.client.deletePod(id);
  const untilMs = ctx.clock.nowMs() + ctx.timing.deleteConfirmMs;
  let lastError: unknown;
  for (;;) {
    try {
      if ((await ctx.client.getPod(id)) === null) {
        ctx.bus.publish({
          type: 'pod',
          runId,
          status: { kind: 'deleted', podId: id, uptimeMs: null, estimatedSpendUsd: null },
        });
        return;
      }
      lastError = undefined;
    } catch (error) {
      if (isAbortError(error)) throw error;
      lastError = error;
    }
    if (ctx.clock.nowMs() >= untilMs) break;
    await ctx.clock.sleep(ctx.timing.deletePollMs);
  }
  throw new PodError(
    'not_deleted',
    lastError === undefined
      ? `pod ${id} may still exist and bill: it still shows ${Math.round(ctx.timing.deleteConfirmMs / 1000)} s after its delete`
      : `pod ${id} may still exist and bill: it cannot be looked up after its delete: ${messageOf(lastError)}`,
    `Check it with "overbrainer pod ls" and run "overbrainer pod rm ${runId}" again.`,
  );
}

/**
 * At `train`'s start (after the orphan warning): deletes the host-key secret (a pod's private
 * host key, kept as an account secret) of every run of runs/ that ended and has no pod left,
 * with its private client key: a client killed before it could forget them leaves them behind.
 * A run is left alone while it is preparing or running, while a client holds its lock, while its
 * records say a pod may exist, while `rows` (the pods Runpod lists) show a pod carrying its
 * marker, and when it is not in runs/ (another checkout may own it). Returns the runs swept.
 */
export async function sweepHostKeySecrets(ctx: PodCtx, rows: readonly PodRow[]): Promise<string[]> {
  const listed = new Set(rows.map((row) => row.runId));
  const swept: string[] = [];
  for (const secret of await ctx.client.listSecrets()) {
    if (!secret.name.startsWith(HOST_KEY_SECRET_PREFIX)) continue;
    const runId = secret.name.slice(HOST_KEY_SECRET_PREFIX.length);
    if (!isValidRunId(runId) || listed.has(runId)) continue;
    let run: RunRecord;
    try {
      run = ctx.store.loadRun(runId);
    } catch {
      continue; // not in runs/, or unreadable: not ours to judge
    }
    if (run.state === 'preparing' || run.state === 'running') continue;
    if (ctx.store.lockHolder(runId) !== null || !noPodLeft(ctx.store, runId)) continue;
    try {
      await ctx.client.deleteSecret(secret.id);
    } catch (error) {
      log(
        ctx,
        'warn',
        `cannot delete the host-key secret of ended run ${runId}: ${messageOf(error)}`,
      );
      continue;
    }
    forgetClientKey(path.join(ctx.store.runDir(runId), SSH_DIR));
    swept.push(runId);
  }
  return swept;
}

/**
 * `pod rm ID` for an ID that names no run of runs/: when Runpod lists a pod with that ID (as
 * `pod ls` shows it), that one pod is deleted, confirmed gone, after the same refusals as
 * `pod rm RUN_ID`: a stray, a pod of an ended run, of a run not in runs/ or without a marker goes
 * at once; the pod a run trains on, or a kept or awaiting pod, is its run's: without `force` that
 * is refused naming the run, with it the run's own `pod rm RUN_ID --force` does it (its records
 * follow). Otherwise the ID is taken as a run's ({@link removePods}). Never throws.
 */
export async function removeRunOrPod(
  ctx: PodCtx,
  id: string,
  options: RemoveOptions = {},
): Promise<Removal> {
  let isRun: boolean;
  try {
    isRun = fs.existsSync(ctx.store.runDir(id));
  } catch {
    // Not an ID runs/ can hold (it would leave runs/): refused there, without an API call.
    isRun = true;
  }
  if (isRun) return removePods(ctx, id, options);
  let rows: PodRow[];
  try {
    rows = await listPods(ctx, { lookUpUnlisted: false });
  } catch (error) {
    return { runId: id, removed: [], error };
  }
  const row = rows.find((r) => r.podId === id && r.status !== 'GONE');
  if (row === undefined) return removePods(ctx, id, options);
  const runId = row.runId;
  if (runId !== null && !isOrphan(row.kind) && row.kind !== 'stray') {
    if (!options.force) {
      return {
        runId,
        removed: [],
        error: new PodAdminError(
          'run_still_running',
          `pod ${id} is the pod of run ${runId} (${row.note || row.kind}): nothing was deleted`,
          `Remove it with "overbrainer pod rm ${runId}", or pass --force.`,
        ),
      };
    }
    return removePods(ctx, runId, { force: true });
  }
  try {
    const removed = await removePodById(ctx, id);
    if (runId !== null && isValidRunId(runId)) {
      editPodRecord(ctx, runId, (record) => {
        if (!record.strayPods.includes(id)) return false;
        record.setStrayPods(record.strayPods.filter((stray) => stray !== id));
        return true;
      });
    }
    return { runId: runId ?? id, removed: [removed], error: null };
  } catch (error) {
    return { runId: runId ?? id, removed: [], error };
  }
}
