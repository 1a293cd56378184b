/**
 * What `pod rm` deletes beside a run's recorded pod: its strays and the other pods carrying its
 * marker, each delete sent and confirmed, and what it reports of each pod.
 */
import { isAbortError, rfc3339 } from '../clock';
import type { Pod } from '../runpod/api';
import { log, type PodCtx } from './context';
import { PodError } from './podError';
import { editPodRecord } from './podList';
import { describeError } from '../errors';

/** A pod `pod rm` deleted (confirmed gone), or found already gone. */
export interface RemovedPod {
  podId: string;
  /**
   * Runpod answered 404 to both the look before the delete and the delete itself: the pod was
   * already gone from the account and nothing was deleted (it is recorded gone).
   */
  alreadyGone: boolean;
  /** The time the estimate counts (the run's own pod only, when recorded): never a guess. */
  uptimeMs: number | null;
  /** The estimate: its rate over that time, when both are recorded. */
  estimatedSpendUsd: number | null;
}

/** A pod deleted by the client (`deleted`) or found gone (`already_gone`), as `pod rm` reports it. */
export function removedOf(id: string, outcome: 'deleted' | 'already_gone'): RemovedPod {
  return {
    podId: id,
    alreadyGone: outcome === 'already_gone',
    uptimeMs: null,
    estimatedSpendUsd: null,
  };
}

/** What removing a run's other pods (its strays, those carrying its marker) goes through. */
export interface Sweep {
  ctx: PodCtx;
  runId: string;
  /** The pods confirmed deleted so far. */
  removed: RemovedPod[];
  /** The pods already tried, so none is deleted twice. */
  tried: Set<string>;
  /** Keeps the first failure (the removal goes on past it). */
  note: (error: unknown) => void;
  /** Whether the pod is one to delete (all of them, or only the one `pod rm POD_ID` names). */
  chosen: (id: string) => boolean;
  /** Set when a pod of the run was left because it was not chosen. */
  othersLeft: boolean;
}

/** Deletes each stray of the run, dropping it from `stray_pods` once confirmed gone. */
export async function removeStrays(sweep: Sweep): Promise<void> {
  const { ctx, runId, removed, tried, note, chosen } = sweep;
  let strays: string[];
  try {
    strays = ctx.store.loadPod(runId)?.strayPods ?? [];
  } catch {
    // Unreadable (reported above): every stray carries the run marker, which removeMarked sweeps.
    return;
  }
  for (const id of strays) {
    if (tried.has(id)) continue;
    if (!chosen(id)) {
      sweep.othersLeft = true;
      continue;
    }
    tried.add(id);
    try {
      const gone = await deleteConfirmed(ctx, runId, id, 'duplicate');
      editPodRecord(ctx, runId, (record) =>
        record.setStrayPods(
          record.strayPods.filter((stray) => stray !== id),
          ctx.clock.nowMs(),
        ),
      );
      removed.push(gone);
    } catch (error) {
      log(ctx, 'warn', `cannot confirm the deletion of stray pod ${id}: ${describeError(error)}`);
      note(error);
    }
  }
}

/** Deletes every other listed pod carrying the run's marker; one whose delete fails becomes a stray. */
export async function removeMarked(sweep: Sweep): Promise<void> {
  const { ctx, runId, removed, tried, note, chosen } = sweep;
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
    if (!chosen(pod.id)) {
      sweep.othersLeft = true;
      continue;
    }
    tried.add(pod.id);
    try {
      removed.push(await deleteConfirmed(ctx, runId, pod.id, 'duplicate'));
    } catch (error) {
      const recorded = editPodRecord(ctx, runId, (record) =>
        record.setStrayPods([...record.strayPods, pod.id]),
      );
      log(
        ctx,
        'warn',
        `cannot confirm the deletion of pod ${pod.id}: ${describeError(error)}${recorded ? '' : ' (and it is not recorded as a stray)'}`,
      );
      note(error);
    }
  }
}

/**
 * Deletes the pod `id` (not the run's recorded pod) and confirms it gone: the
 * delete is always sent, then the pod is looked at until Runpod answers its
 * 404, for `deleteConfirmMs`. Already gone when the delete itself answered 404.
 * Throws when the delete fails or stays unconfirmed.
 */
export async function deleteConfirmed(
  ctx: PodCtx,
  runId: string,
  id: string,
  reason: 'duplicate' | 'requested',
): Promise<RemovedPod> {
  ctx.bus.publish({ type: 'pod', runId, status: { kind: 'deleting', podId: id, reason } });
  const deleted = await ctx.client.deletePod(id);
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
        return removedOf(id, deleted ? 'deleted' : 'already_gone');
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
      : `pod ${id} may still exist and bill: it cannot be looked up after its delete: ${describeError(lastError)}`,
    `Check it with "overbrainer pod ls" and run "overbrainer pod rm ${runId}" again.`,
  );
}
