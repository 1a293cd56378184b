/**
 * One GPU type's create calls for a run's pod, never re-sent blindly: `pod.json` saved before
 * each; a create with no clear answer (or answered 429) reconciled by the run marker and the
 * attempt's name before another is sent; the pod created or found made the run's pod, its log
 * captured from its boot.
 */
import { isAbortError } from '../clock';
import type { PodRecord } from '../runs/podRecord';
import { createPodBody, type Pod } from '../runpod/api';
import { ApiError } from '../runpod/apiErrors';
import { log, type PodCtx } from './context';
import { PodError } from './podError';
import { startPodLogCapture } from './podLogCapture';
import { podCmd, podEnv } from './podScripts';
import { isUnreachable, noteStrays, sweep, warnUnreachable } from './remove';
import { describeError } from '../errors';
import { minutes, type PodPlan } from './podReady';

/** Ambiguous create calls tried per GPU type before moving on. */
const AMBIGUOUS_TRIES_PER_TYPE = 2;

/**
 * One GPU type: create calls (a second only after an unanswered first, and
 * only once the first was reconciled). The created or adopted pod, or why
 * there is none. Throws for answers that make other types pointless.
 */
export async function createOne(
  ctx: PodCtx,
  plan: PodPlan,
  record: PodRecord,
  gpuType: string,
  signal?: AbortSignal,
): Promise<Pod | 'unavailable' | 'unanswered'> {
  const { target, run } = plan;
  // Creates answered 429 so far: each is reconciled like an unanswered one, never re-sent blindly.
  let limited = 0;
  for (let tries = 0; tries < AMBIGUOUS_TRIES_PER_TYPE; tries++) {
    signal?.throwIfAborted();
    const attempt = record.beginAttempt(gpuType, ctx.clock.nowMs(), plan.limits.maxHours);
    ctx.store.savePod(record);
    ctx.bus.publish({
      type: 'pod',
      runId: run.id,
      status: { kind: 'creating', name: attempt.name, gpuType },
    });
    const body = createPodBody({
      name: attempt.name,
      image: target.image,
      gpuTypeId: gpuType,
      gpuCount: target.gpuCount,
      containerDiskGb: target.containerDiskGb,
      env: podEnv({
        runId: run.id,
        workdir: plan.workdir,
        deadlineUnixS: attempt.deadlineUnixS,
        bootGraceS: target.bootGraceS,
        retrieveGraceS: target.retrieveGraceS,
        keepPod: record.keep,
        volumeDir: target.networkVolumeId === null ? null : '/workspace/data',
        apiUrl: ctx.client.baseUrl,
        authorizedKey: plan.keys.clientPublic,
        claim: plan.keys.hostPublic,
        version: ctx.version,
        hostKey: plan.hostKeyRef,
        timing: ctx.timing,
      }),
      cmd: podCmd(),
      dataCenterIds: target.dataCenterIds === 'auto' ? [] : target.dataCenterIds,
      networkVolumeId: target.networkVolumeId,
    });
    let pod: Pod;
    try {
      pod = await ctx.client.createPod(body, { signal });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      switch (error.kind) {
        case 'capacity':
        case 'forbidden': {
          const reason =
            error.kind === 'capacity'
              ? 'no capacity for this GPU type'
              : 'the API key or account may not use this GPU type';
          record.endAttempt(error.kind === 'capacity' ? 'unavailable' : 'forbidden', reason);
          ctx.store.savePod(record);
          ctx.bus.publish({
            type: 'pod',
            runId: run.id,
            status: { kind: 'unavailable', gpuType, reason },
          });
          return 'unavailable';
        }
        case 'no_credits':
          record.endAttempt('rejected', 'insufficient balance');
          ctx.store.savePod(record);
          throw new PodError(
            'no_credits',
            'Runpod refused the pod: the account balance is too low',
            'Add funds in the Runpod console, then train again.',
            { cause: error },
          );
        case 'rate_limited': {
          // Runpod's document says a 429 was not processed, but a gateway may answer it for a
          // create it carried out: after the wait Runpod asked for, the attempt's pod is looked
          // for by run marker and name (as after an unanswered create), and only when none is
          // listed is the create sent again, as a new attempt.
          record.endAttempt('ambiguous', 'Runpod answered 429 (rate limited): the pod may exist');
          ctx.store.savePod(record);
          const waitMs = Math.max(
            error.retryAfterMs ??
              Math.min(ctx.timing.retryMaxMs, ctx.timing.retryBaseMs * 2 ** limited),
            ctx.timing.reconcileFirstWaitMs,
          );
          log(
            ctx,
            'warn',
            `create of ${attempt.name} answered 429 (rate limited): waiting ${(waitMs / 1000).toFixed(1)} s as Runpod asked, then looking for it by its run marker before creating again`,
          );
          const adopted = await reconcile(ctx, plan, record, attempt.name, signal, waitMs);
          if (adopted) {
            adoptPod(ctx, record, adopted, 'adopted');
            return adopted;
          }
          signal?.throwIfAborted();
          if (++limited > ctx.timing.retries) {
            throw new PodError(
              'api',
              `Runpod answered 429 (rate limited) to ${limited} create requests in a row, and no pod of run ${run.id} was found by its marker`,
              'Wait a few minutes (another client may be using the same API key heavily), then train again.',
              { cause: error },
            );
          }
          // Not an unanswered try of this GPU type: the account was throttled, the type was not.
          tries--;
          continue;
        }
        case 'ambiguous': {
          record.endAttempt('ambiguous', 'no usable answer: the pod may exist');
          ctx.store.savePod(record);
          log(
            ctx,
            'warn',
            `create of ${attempt.name} went unanswered: looking for it by its run marker`,
          );
          const adopted = await reconcile(ctx, plan, record, attempt.name, signal);
          if (adopted) {
            adoptPod(ctx, record, adopted, 'adopted');
            return adopted;
          }
          continue;
        }
        default:
          record.endAttempt('rejected', `Runpod answered ${error.status ?? error.kind}`);
          ctx.store.savePod(record);
          throw PodError.api(error);
      }
    }
    adoptPod(ctx, record, pod, 'created');
    return pod;
  }
  return 'unanswered';
}

/** Makes `pod` the run's pod in pod.json (saved before anything else happens to it). */
function adoptPod(ctx: PodCtx, record: PodRecord, pod: Pod, result: 'created' | 'adopted'): void {
  record.created(
    {
      id: pod.id,
      gpuTypeId: pod.gpu?.id ?? null,
      dataCenterId: pod.dataCenterId,
      costPerHourUsd: pod.costPerHourUsd,
      createdAt: pod.createdAt,
    },
    result,
    ctx.clock.nowMs(),
  );
  // The pod bills from now on: if its record cannot be saved, the failure path of startPod
  // deletes it by the ID held in memory, and the error names it.
  try {
    ctx.store.savePod(record);
  } catch (error) {
    throw new PodError(
      'runs',
      `pod ${pod.id} was created but its record cannot be saved (${describeError(error)}), so the client deletes it`,
      `Free the disk or fix the permissions of the runs folder, then train again. If a warning says pod ${pod.id} may still exist, remove it in Runpod's console or with "overbrainer pod rm ${record.runId}".`,
      { cause: error },
    );
  }
  ctx.bus.publish({
    type: 'pod',
    runId: record.runId,
    status: {
      kind: 'created',
      podId: pod.id,
      gpuType: record.gpuType ?? pod.gpu?.id ?? '',
      dataCenter: pod.dataCenterId,
      costPerHourUsd: record.costPerHourUsd,
    },
  }); // From now on the pod's log (its boot first) is kept in the run directory.
  startPodLogCapture(ctx, record.runId, pod.id);
}

/**
 * After an unanswered create (or one answered 429, whose first wait is Runpod's Retry-After):
 * waits, then looks for the attempt's pod by the run marker and its unique name (twice, the second time after a longer wait).
 * Other pods of the run found then are duplicates: deleted, unconfirmed ones
 * noted as strays. A list that fails is no look: it is retried, and the create
 * never sent again meanwhile, until `reconcileListLimitMs` gives the run up.
 * After an abort the waits are skipped and the list is read once.
 */
async function reconcile(
  ctx: PodCtx,
  plan: PodPlan,
  record: PodRecord,
  name: string,
  signal?: AbortSignal,
  firstWaitMs = ctx.timing.reconcileFirstWaitMs,
): Promise<Pod | null> {
  const pause = async (waitMs: number): Promise<void> => {
    if (signal?.aborted) return;
    await ctx.clock.sleep(waitMs, signal).catch((error: unknown) => {
      if (!isAbortError(error)) throw error;
    });
  };
  const giveUpAtMs = ctx.clock.nowMs() + ctx.timing.reconcileListLimitMs;
  for (const waitMs of [firstWaitMs, ctx.timing.reconcileSecondWaitMs]) {
    await pause(waitMs);
    let listed: Pod[] | null = null;
    while (listed === null) {
      try {
        listed = await ctx.client.listPods({ runMarker: record.runId });
      } catch (error) {
        // The exit path sweeps again, and records what it cannot list.
        if (signal?.aborted) return null;
        const nowMs = ctx.clock.nowMs();
        if (isUnreachable(error) && nowMs < giveUpAtMs) {
          warnUnreachable(
            ctx,
            record.runId,
            error,
            `the create of ${name} got no clear answer and the pods of run ${record.runId} cannot be listed, so it is not sent again`,
            Math.min(ctx.timing.reconcileSecondWaitMs, giveUpAtMs - nowMs),
            giveUpAtMs,
            `a pod that create may have made is deleted by its own watchdog after boot_grace_minutes (${minutes(plan.target.bootGraceS * 1000)}) without a job`,
          );
        } else {
          log(ctx, 'warn', `cannot list pods to reconcile ${name}: ${describeError(error)}`);
        }
        if (nowMs >= giveUpAtMs) {
          throw new PodError(
            'unanswered',
            `Runpod did not answer the create of ${name}, and the pods of run ${record.runId} could not be listed for ${minutes(ctx.timing.reconcileListLimitMs)}: a pod of it may exist`,
            `Check "overbrainer pod ls" (or the Pods view) once Runpod answers, and remove it with "overbrainer pod rm ${record.runId}"; its watchdog deletes it after boot_grace_minutes without a job.`,
            { cause: error },
          );
        }
        await pause(Math.min(ctx.timing.reconcileSecondWaitMs, giveUpAtMs - nowMs));
      }
    }
    const mine = listed.find((pod) => pod.name === name && pod.runMarker === record.runId);
    if (mine) {
      const stray = await sweep(ctx, record.runId, mine.id, undefined, record);
      if (stray === null || stray.length > 0) noteStrays(ctx, record, stray);
      return mine;
    }
    if (signal?.aborted) return null;
  }
  return null;
}
