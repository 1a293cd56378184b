/**
 * `pod rm` and the pod listing it builds on (./podList.ts, re-exported here): nothing
 * deletes a pod without `pod rm`, and every delete is sent and confirmed.
 */
import { describeError, HintedError } from '../errors';
import * as fs from 'node:fs';
import type { RunState } from '../events';
import { isRunsError } from '../runs/runsError';
import { noPodLeft } from '../runs/store';
import { isValidRunId } from '../runs/ids';
import type { RunLock } from '../runs/lock';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import { endRun } from '../runs/runEnd';
import { log, type PodCtx } from './context';
import { forgetKeys, remove } from './remove';
import { removeClusterById, removeClusterRun } from './clusterRemove';
import { FAILED_BY_POD_RM, listPods, POD_RM_OWNER, type PodRow } from './podList';
import {
  deleteConfirmed,
  removedOf,
  removeMarked,
  removeStrays,
  type RemovedPod,
  type Sweep,
} from './podRmSweep';

export * from './podList';
export { sweepHostKeySecrets } from './hostKeySweep';
export type { RemovedPod } from './podRmSweep';

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
export class PodAdminError extends HintedError<PodAdminErrorKind> {
  constructor(kind: PodAdminErrorKind, message: string, hint: string) {
    super(kind, message, hint);
    this.name = 'PodAdminError';
  }
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
  /**
   * Delete only this pod of the run (`pod rm POD_ID`), after the same refusals as the whole
   * run's: a stray of a run in progress goes, its training pod does not without `force`.
   */
  only?: string;
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
    const outcome = await removeChecked(ctx, runId, options, removed, held);
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
  return deleteConfirmed(ctx, '', podId, 'requested');
}

/**
 * The run's recorded pod as `remove` left it: already gone (nothing said of its time or cost), or
 * deleted, with the spend estimated in pod.json and the time that estimate counts (its spend at
 * its rate: from when its create was sent to when its deletion was confirmed), never a time of
 * our own.
 */
function removedRecord(
  record: PodRecord,
  id: string,
  outcome: 'deleted' | 'already_gone',
): RemovedPod {
  if (outcome === 'already_gone') return removedOf(id, outcome);
  const usd = record.estimatedSpendUsd;
  const rate = record.costPerHourUsd;
  return {
    podId: id,
    alreadyGone: false,
    uptimeMs: usd === null || rate === null ? null : Math.round((usd / rate) * 3_600_000),
    estimatedSpendUsd: usd,
  };
}

async function removeChecked(
  ctx: PodCtx,
  runId: string,
  options: RemoveOptions,
  removed: RemovedPod[],
  held: { lock: RunLock | null },
): Promise<unknown> {
  const force = options.force ?? false;
  const only = options.only ?? null;
  const chosen = (id: string): boolean => only === null || id === only;
  ctx.store.runDir(runId); // an ID that would leave runs/ throws here
  let run: RunRecord | null = null;
  try {
    run = ctx.store.loadRun(runId);
  } catch (error) {
    if (!isRunsError(error, 'not_found')) {
      // A damaged run.json never blocks a forced removal either.
      if (!force) throw error;
      log(
        ctx,
        'warn',
        `${describeError(error)}: looking for the pods of run ${runId} by their marker`,
      );
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
  // A run on a cluster: its members go only as their whole cluster (./clusterRemove.ts); a
  // forced run not in runs/ may have clusters too (by their name), then pods (by their marker).
  if (run?.cluster || run === null) {
    const outcome = await removeClusterRun(
      ctx,
      {
        runId,
        run,
        force,
        runInProgress,
        follower,
        only,
        removed,
        failedMessage: FAILED_BY_POD_RM,
      },
      (kind, message, hint) => new PodAdminError(kind, message, hint),
    );
    if (run !== null) {
      if (outcome === null && !(inProgress && !force)) await forgetKeys(ctx, runId);
      return outcome;
    }
    if (outcome !== null) return outcome;
  }
  let record: PodRecord | null = null;
  try {
    record = run === null ? null : ctx.store.loadPod(runId);
  } catch (error) {
    // A damaged pod.json never blocks removal: forced, the run's pods are found by their marker.
    if (!force) throw error;
    log(
      ctx,
      'warn',
      `${describeError(error)}: looking for the pods of run ${runId} by their marker`,
    );
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
      `Check \`overbrainer pod ls\` for the pods of run ${runId}; once no client follows it, \`overbrainer pod rm ${runId} --force\` deletes them.`,
    );
  }
  let failed: unknown = null;
  const note = (error: unknown): void => {
    if (failed === null) failed = error;
  };
  let trainingRemoved = false;
  if (!keepTraining && record !== null && training !== null && chosen(training)) {
    try {
      const outcome = await remove(ctx, record, 'requested', 'pod_rm');
      removed.push(removedRecord(record, training, outcome));
      trainingRemoved = true;
    } catch (error) {
      note(error);
    }
  }
  const tried = new Set<string>(training === null ? [] : [training]);
  const sweep: Sweep = { ctx, runId, removed, tried, note, chosen, othersLeft: false };
  if (run !== null) await removeStrays(sweep);
  await removeMarked(sweep);
  // Forced: the run's pods (or, with `only`, its training pod) are gone under its job.
  if (runInProgress && !keepTraining && (only === null ? removed.length > 0 : trainingRemoved)) {
    try {
      const fresh = ctx.store.loadRun(runId);
      endRun(fresh, 'failed', 'pod_removed', FAILED_BY_POD_RM);
      ctx.store.saveRun(fresh);
      ctx.bus.publish({
        type: 'runState',
        runId,
        state: 'failed',
        message: FAILED_BY_POD_RM,
        cause: 'pod_removed',
      });
    } catch (error) {
      note(error);
    }
  }
  if (failed !== null) return failed;
  // `pod rm POD_ID` of a stray of a run in progress did what it was asked: no refusal.
  if (keepTraining && (only === null || only === training)) {
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
      `Cancel it first (\`overbrainer train cancel ${runId}\`); \`overbrainer pod rm ${runId} --force\` deletes its pod now, losing what is not home.`,
    );
  }
  if (run !== null && (only === null || (!sweep.othersLeft && noPodLeft(ctx.store, runId)))) {
    await forgetKeys(ctx, runId);
  }
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

/**
 * `pod rm ID` for an ID that names no run of runs/: when Runpod lists a pod with that ID (as
 * `pod ls` shows it), that one pod is deleted, confirmed gone, under the rules of `pod rm RUN_ID`
 * for the run it belongs to (its marker, or the run recording it), with the same refusals and
 * messages: a pod of a run not in runs/ (another checkout's), of a run still starting, or the pod
 * a run in progress trains on is refused without `force`; a stray, the pod of an ended run or a
 * kept one goes, its records following. A pod without a marker goes at once. Otherwise the ID
 * is taken as a run's ({@link removePods}). Never throws.
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
  const row = rows.find((r) => (r.podId === id || r.cluster?.id === id) && r.status !== 'GONE');
  // A member or a cluster ID: its run's rules, for its whole cluster (members go only with it).
  if (row?.cluster && row.runId !== null && isValidRunId(row.runId) && row.kind !== 'no_marker') {
    return removePods(ctx, row.runId, { ...options, only: row.cluster.id });
  }
  if (row === undefined || row.cluster) {
    // A cluster none of whose members is listed (yet), or one of no run: by its ID.
    const byCluster = await removeClusterById(
      ctx,
      row?.cluster?.id ?? id,
      options.force ?? false,
      (runId) =>
        isValidRunId(runId) && fs.existsSync(ctx.store.runDir(runId))
          ? removePods(ctx, runId, { ...options, only: row?.cluster?.id ?? id })
          : null,
      (runId) =>
        new PodAdminError(
          'not_in_runs',
          `cluster ${id} belongs to run ${runId}, which is not in this project's runs/: another checkout may own it; if none does, pass --force`,
          `Check "overbrainer pod ls"; if no other checkout owns run ${runId}, run "overbrainer pod rm ${id} --force".`,
        ),
    );
    if (byCluster !== null) return byCluster;
    if (row === undefined) return removePods(ctx, id, options);
  }
  const runId = row.runId;
  // A pod of a run (by its marker, or the run recording it): that run's rules, for this pod only.
  if (runId !== null && isValidRunId(runId) && row.kind !== 'no_marker') {
    return removePods(ctx, runId, { ...options, only: id });
  }
  try {
    return { runId: id, removed: [await removePodById(ctx, id)], error: null };
  } catch (error) {
    return { runId: id, removed: [], error };
  }
}
