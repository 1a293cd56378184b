/**
 * Deleting pods with confirmation, and sweeping strays (the looks that find a pod gone are in
 * ./looks.ts and exported from here too).
 * Nothing here ever deletes a pod on the ground that it "looks gone".
 */
import { drainPodLog } from './podLogCapture';
import * as path from 'node:path';
import type { DeleteReason } from '../events';
import type { DeletedBy, PodRecord } from '../runs/podRecord';
import { recordBilled, recordOtherBills } from './billing';
import { SSH_DIR } from '../runs/store';
import { forgetClientKey } from './keys';
import type { Pod } from '../runpod/api';
import { hostKeySecretName, log, warn, type PodCtx } from './context';
import { ApiError } from '../runpod/apiErrors';
import { PodError } from './podError';
import { describeError } from '../errors';

export { lookAgain, lookUp, lookUpAll, lookUpSettled, type GoneSeen, type Look } from './looks';

/**
 * Deletes the current pod of `pod` and confirms it is gone: `deleting` is saved
 * first, one look sees whether it is already gone, the delete is always sent,
 * then the pod is looked at until Runpod answers 404 (within
 * `deleteConfirmMs`). Recorded `deleted` (by the watchdog when both the look
 * and the delete found it already gone). Resolves `already_gone` when both did (nothing was
 * deleted), `deleted` otherwise (and when there was no pod to delete). Throws `not_deleted` when
 * the deletion cannot be confirmed: the record stays `deleting` and the pod may be billing.
 */
export async function remove(
  ctx: PodCtx,
  pod: PodRecord,
  reason: DeleteReason,
  by: DeletedBy,
  signal?: AbortSignal,
  options: GoneOptions = {},
): Promise<'deleted' | 'already_gone'> {
  const id = pod.podId;
  if (id === null || pod.state === 'deleted') return 'deleted';
  ctx.bus.publish({
    type: 'pod',
    runId: pod.runId,
    status: { kind: 'deleting', podId: id, reason },
  });
  pod.state = 'deleting';
  // Who deletes it, written before the call: a client following the pod that finds it gone
  // meanwhile reads who did (a `pod rm` is no death to recover from).
  pod.deletedBy = by;
  // A record that cannot be written never stops a delete: the pod's ID is in memory.
  trySave(ctx, pod, `as deleting pod ${id}`);
  let lookedGone = false;
  // When Runpod confirmed the pod gone, the spend estimate's end: the first 404 seen (the look
  // before the delete, or the delete's own), else the delete's answer (the pod was deleted
  // during that call). The confirming looks that follow only make sure.
  let goneAtMs: number | null = null;
  // Read TERMINATED: being deleted already (its watchdog found the retrieved marker), no more
  // billing from that look on.
  let terminatedAtMs: number | null = null;
  try {
    const first = await ctx.client.lookPod(id, { signal });
    lookedGone = first.pod === null;
    if (lookedGone) goneAtMs = first.seenByMs;
    else if (first.pod?.status === 'TERMINATED') terminatedAtMs = first.seenByMs;
  } catch (error) {
    log(ctx, 'debug', `cannot look at pod ${id} before deleting it: ${describeError(error)}`);
  }
  // What the pod logged (a failed boot's reason) is kept: its log stream is drained alongside the
  // delete (the stream holds every line up to the delete), never delaying it.
  const draining = drainPodLog(ctx, pod.runId, id);
  const deleteSaidGone = !(await deleteWhileUnreachable(ctx, pod, id, reason, signal));
  if (!deleteSaidGone || goneAtMs === null) goneAtMs = ctx.clock.nowMs();
  if (terminatedAtMs !== null) goneAtMs = Math.min(goneAtMs, terminatedAtMs);
  await confirmGone(ctx, id, pod.runId, signal);
  await draining;
  const alreadyGone = lookedGone && deleteSaidGone;
  markGone(ctx, pod, id, alreadyGone ? 'watchdog' : by, options, goneAtMs);
  // Confirmed gone: what Runpod billed it, and the run's earlier pods whose bill is not read yet
  // (a recovery's first attempt), beside our estimate (best effort, never throws).
  await recordBilled(ctx, pod, signal);
  await recordOtherBills(ctx, pod, signal);
  return alreadyGone ? 'already_gone' : 'deleted';
}

/** Failures that say nothing about the pod, only that the API cannot answer now. */
const UNREACHABLE_KINDS: readonly string[] = ['transport', 'server', 'rate_limited'];

/** Whether `error` only says the API cannot answer now (no answer, 5xx, 429 after the retries). */
export function isUnreachable(error: unknown): boolean {
  return error instanceof ApiError && UNREACHABLE_KINDS.includes(error.kind);
}

/**
 * The one `api_unreachable` warning of every lifecycle path that keeps trying while the API
 * cannot be reached (the delete, the follow, the reconcile of a create), repeated before each
 * wait: the API's base URL and the failure, `what` waits on it, the countdown to the next try
 * and when the client stops trying, and `meanwhile`, what the pod's watchdog does without it.
 */
export function warnUnreachable(
  ctx: PodCtx,
  runId: string,
  error: unknown,
  what: string,
  waitMs: number,
  untilMs: number,
  meanwhile: string,
): void {
  warn(
    ctx,
    runId,
    'api_unreachable',
    `the Runpod API at ${ctx.client.baseUrl} cannot be reached (${describeError(error)}): ${what}, trying again in ${Math.max(1, Math.round(waitMs / 1000))} s (until ${new Date(untilMs).toISOString()}); meanwhile ${meanwhile}`,
  );
}

/**
 * Sends the delete of pod `id`; while the API cannot be reached (no answer, 5xx, 429 after the
 * client's own retries) it keeps trying, every `retryMaxMs`, until the pod's deadline (when its
 * watchdog deletes it by itself; at least `reconcileListLimitMs`), and before each wait publishes
 * an `api_unreachable` warning with the countdown to the next try and what the watchdog does
 * meanwhile (after a retrieval it deletes the pod at its next check; else at the deadline). Any other failure, or the limit, is `not_deleted`. Resolves deletePod's answer.
 */
async function deleteWhileUnreachable(
  ctx: PodCtx,
  pod: PodRecord,
  id: string,
  reason: DeleteReason,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  const deadlineMs = pod.deadlineUnixS === null ? null : pod.deadlineUnixS * 1000;
  const untilMs = Math.max(
    ctx.clock.nowMs() + ctx.timing.reconcileListLimitMs,
    deadlineMs ?? Number.NEGATIVE_INFINITY,
  );
  for (;;) {
    try {
      return await ctx.client.deletePod(id, { signal });
    } catch (error) {
      if (signal?.aborted || !isUnreachable(error) || ctx.clock.nowMs() >= untilMs) {
        throw notDeleted(id, pod.runId, `the delete failed: ${describeError(error)}`, error);
      }
      const waitMs = Math.min(ctx.timing.retryMaxMs, untilMs - ctx.clock.nowMs());
      const watchdog =
        reason === 'retrieved'
          ? `the results are retrieved: the pod's watchdog deletes it by itself within ${ctx.timing.watchdogIntervalS} s`
          : pod.deadline === null
            ? 'the pod is kept: nothing deletes it but "overbrainer pod rm"'
            : `the pod's watchdog deletes it by itself at its deadline (${pod.deadline}) even if the API never answers`;
      warnUnreachable(
        ctx,
        pod.runId,
        error,
        `pod ${id} is not deleted yet`,
        waitMs,
        untilMs,
        watchdog,
      );
      await ctx.clock.sleep(waitMs, signal);
    }
  }
}

export interface GoneOptions {
  /**
   * Keep the run's private client key: the provisioning walk deletes a pod that never got ready
   * and goes on to the next GPU type, whose pod needs the same key (its authorized key).
   */
  keepClientKey?: boolean;
}

/** Looks at pod `id` until Runpod answers 404, for `deleteConfirmMs`. */
async function confirmGone(
  ctx: PodCtx,
  id: string,
  runId: string,
  signal?: AbortSignal,
): Promise<void> {
  const untilMs = ctx.clock.nowMs() + ctx.timing.deleteConfirmMs;
  let lastError: unknown;
  for (;;) {
    try {
      if ((await ctx.client.getPod(id, { signal })) === null) return;
      lastError = null;
    } catch (error) {
      if (signal?.aborted) throw error;
      lastError = error;
    }
    if (ctx.clock.nowMs() >= untilMs) break;
    await ctx.clock.sleep(ctx.timing.deletePollMs, signal);
  }
  throw notDeleted(
    id,
    runId,
    lastError === null || lastError === undefined
      ? `it still shows ${Math.round(ctx.timing.deleteConfirmMs / 1000)} s after the delete`
      : `it cannot be looked up: ${describeError(lastError)}`,
    lastError,
  );
}

function notDeleted(id: string, runId: string, why: string, cause: unknown): PodError {
  return new PodError(
    'not_deleted',
    `pod ${id} may still exist and bill: ${why}`,
    `Check it with "overbrainer pod ls" (or the Pods view) and remove it with "overbrainer pod rm ${runId}".`,
    { cause },
  );
}

/**
 * Records the pod `id` deleted by `by`, confirmed gone at `goneAtMs` (now when not given),
 * forgets the client key (unless the walk goes on, see {@link GoneOptions}), publishes `deleted`.
 */
export function markGone(
  ctx: PodCtx,
  pod: PodRecord,
  id: string,
  by: DeletedBy,
  options: GoneOptions = {},
  goneAtMs: number | null = null,
): void {
  // Whoever deleted it (its watchdog too, after a limit), Runpod billed it until it was gone:
  // the estimate ends when the API confirmed that, never at the limit that passed before.
  const nowMs = Math.min(goneAtMs ?? ctx.clock.nowMs(), ctx.clock.nowMs());
  const uptimeMs = pod.uptimeMs(nowMs);
  pod.deleted(by, nowMs);
  trySave(ctx, pod, `that pod ${id} is deleted`);
  if (!pod.mayHaveOtherPods() && !options.keepClientKey) {
    forgetClientKey(ctx.store.sshDir(pod.runId));
  }
  ctx.bus.publish({
    type: 'pod',
    runId: pod.runId,
    status: { kind: 'deleted', podId: id, uptimeMs, estimatedSpendUsd: pod.estimatedSpendUsd },
  });
}

/**
 * Deletes every pod carrying the run marker `runId` except `keepPodId`, each
 * confirmed; returns the IDs whose deletion could not be confirmed (strays), or
 * null when the pods could not be listed (nothing is known: never "no stray").
 * Each pod it finds is noted in `record`'s other pods with its money (saved by the caller).
 */
export async function sweep(
  ctx: PodCtx,
  runId: string,
  keepPodId: string | null,
  signal?: AbortSignal,
  record?: PodRecord,
): Promise<string[] | null> {
  let listed: Pod[];
  try {
    listed = await ctx.client.listPods({ runMarker: runId, signal });
  } catch (error) {
    log(
      ctx,
      'warn',
      `cannot list the pods of run ${runId} to sweep strays: ${describeError(error)}`,
    );
    return null;
  }
  const stray: string[] = [];
  for (const other of listed) {
    if (other.id === keepPodId || other.runMarker !== runId) continue;
    ctx.bus.publish({
      type: 'pod',
      runId,
      status: { kind: 'deleting', podId: other.id, reason: 'duplicate' },
    });
    // Each bills until it is gone: the run's record counts it (saved by noteStrays).
    record?.noteOtherPod(other, null);
    try {
      // Answered 204 (deleted during the call) or 404 (gone before it): gone by the answer.
      await ctx.client.deletePod(other.id, { signal });
      const goneAtMs = ctx.clock.nowMs();
      await confirmGone(ctx, other.id, runId, signal);
      record?.otherPodGone(other.id, goneAtMs);
      ctx.bus.publish({
        type: 'pod',
        runId,
        status: { kind: 'deleted', podId: other.id, uptimeMs: null, estimatedSpendUsd: null },
      });
    } catch (error) {
      log(
        ctx,
        'warn',
        `cannot confirm stray pod ${other.id} of run ${runId} deleted: ${describeError(error)}`,
      );
      stray.push(other.id);
    }
  }
  return stray;
}

/**
 * Records what a sweep found in pod.json: the strays (replacing the list), warned about. A sweep
 * that could not list (`null`) changes nothing known, except after a create that went unanswered:
 * then a pod of the run may exist that nothing names, and the record says so until a sweep lists.
 */
export function noteStrays(ctx: PodCtx, pod: PodRecord, stray: readonly string[] | null): void {
  if (stray === null) {
    if (!pod.attempts.some((a) => a.result === 'ambiguous') || pod.unconfirmedCreate) return;
    pod.unconfirmedCreate = true;
    ctx.store.savePod(pod);
    ctx.bus.publish({
      type: 'warning',
      runId: pod.runId,
      code: 'strays',
      message: `run ${pod.runId} may have a pod Runpod has not listed (a create went unanswered and its pods could not be listed): check "overbrainer pod ls" and remove it with "overbrainer pod rm ${pod.runId}"; its watchdog deletes it after boot_grace_minutes without a job`,
    });
    return;
  }
  pod.setStrayPods(stray, ctx.clock.nowMs());
  pod.unconfirmedCreate = false;
  ctx.store.savePod(pod);
  if (stray.length > 0) {
    ctx.bus.publish({
      type: 'warning',
      runId: pod.runId,
      code: 'strays',
      message: `run ${pod.runId} has pods whose deletion is not confirmed: ${stray.join(', ')}; remove them with "overbrainer pod rm ${pod.runId}"`,
    });
  }
}

/**
 * Forgets the run's secrets once no pod of it may exist: the private client
 * key, and the account secret holding the pod's host key. Best effort: a
 * failure is logged and retried by the next sweep.
 */
export async function forgetKeys(ctx: PodCtx, runId: string): Promise<void> {
  // Never creates the directory (sshDir would): a run without keys is left as it is.
  const sshDir = path.join(ctx.store.runDir(runId), SSH_DIR);
  if (!forgetClientKey(sshDir)) {
    log(ctx, 'warn', `cannot remove the private key of run ${runId} in ${sshDir}`);
  }
  try {
    const secret = await ctx.client.findSecret(hostKeySecretName(runId));
    if (secret) await ctx.client.deleteSecret(secret.id);
  } catch (error) {
    log(ctx, 'debug', `cannot remove the host-key secret of run ${runId}: ${describeError(error)}`);
  }
}

/** Saves pod.json; a failure is logged (naming what could not be recorded), never thrown. */
function trySave(ctx: PodCtx, pod: PodRecord, what: string): void {
  try {
    ctx.store.savePod(pod);
  } catch (error) {
    log(ctx, 'warn', `cannot record ${what} (run ${pod.runId}): ${describeError(error)}`);
  }
}
