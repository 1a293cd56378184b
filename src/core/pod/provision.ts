/**
 * Provisioning a run's pod: keys, `pod.json` before
 * every create, GPU types in order (or `"auto"` from the catalog), ambiguous
 * creates reconciled by run marker and attempt name (never re-sent blindly),
 * readiness = SSH with the pinned host key, then the watchdog's verdict.
 */
import { isAbortError, rfc3339 } from '../clock';
import type { RunpodTargetConfig } from '../config/types';
import { workdirFor } from '../config/types';
import { newPodRecord, type PodRecord } from '../runs/podRecord';
import { noPodLeft } from '../runs/store';
import type { RunRecord } from '../runs/runRecord';
import { endRun } from '../runs/runEnd';
import { startPodLogCapture } from './podLogCapture';
import { createPodBody, inStock, secretReference, type GpuType, type Pod } from '../runpod/api';
import { hostKeySecretName, log, type PodCtx } from './context';
import { ApiError } from '../runpod/errors';
import { alias, generateRunKeys } from './keys';
import { asPodError, PodError, runMessageFor } from './podError';
import { podCmd, podEnv } from './podScripts';
import { forgetKeys, isUnreachable, noteStrays, remove, sweep, warnUnreachable } from './remove';
import {
  becomeReady,
  minutes,
  NotReady,
  type OnReachable,
  type PodPlan,
  type Provisioned,
} from './podReady';
import { describeError } from '../errors';

export type { OnReachable, Provisioned };

/** Ambiguous create calls tried per GPU type before moving on. */
const AMBIGUOUS_TRIES_PER_TYPE = 2;

/**
 * Creates the pod of the new run `run` and waits until it is ready. On failure
 * the run is saved `failed` with the reason (`interrupted before the job
 * started` after an abort), whatever pod was created is deleted, and once every
 * pod of the run is confirmed deleted, the run's keys are forgotten.
 */
export async function startPod(
  ctx: PodCtx,
  target: RunpodTargetConfig,
  run: RunRecord,
  keep: boolean,
  signal?: AbortSignal,
  onReachable?: OnReachable,
  earlier?: PodRecord,
): Promise<{ record: PodRecord; provisioned: Provisioned }> {
  let record: PodRecord | null = null;
  try {
    const dir = ctx.store.sshDir(run.id);
    const keys = generateRunKeys(dir, alias(run.id));
    record = newPodRecord(run.id, keep, target.gpuCount, keys.hostPublic, {
      maxCostUsd: keep ? null : target.maxCostUsd,
      networkVolumeId: target.networkVolumeId,
      maxVolumeGb: target.maxVolumeGb,
    });
    // A run going on on a new pod: its earlier pods stay counted, its attempt names count on.
    if (earlier !== undefined) record.carryOver(earlier);
    ctx.store.savePod(record);
    const hostKeyRef = await storeHostKey(ctx, run.id, keys.hostPrivateB64, signal);
    const plan: PodPlan = {
      run,
      target,
      keys,
      hostKeyRef,
      workdir: workdirFor(target),
      onReachable,
    };
    const provisioned = await provision(ctx, plan, record, signal);
    return { record, provisioned };
  } catch (caught) {
    const error = signal?.aborted ? interrupted(caught) : asPodError(caught);
    if (record !== null && record.podId !== null && record.state !== 'deleted') {
      // Shielded from the abort: the pod must go whatever the user pressed.
      await remove(ctx, record, signal?.aborted ? 'interrupted' : 'not_ready', 'client').catch(
        (removeError: unknown) => log(ctx, 'error', describeError(removeError)),
      );
    }
    if (record !== null) settleNoPod(ctx, record);
    const cause = error.kind === 'interrupted' ? 'interrupted' : 'provision_failed';
    endRun(run, 'failed', cause, runMessageFor(error));
    try {
      ctx.store.saveRun(run);
    } catch (saveError) {
      log(ctx, 'warn', `cannot record run ${run.id} as failed: ${describeError(saveError)}`);
    }
    ctx.bus.publish({
      type: 'runState',
      runId: run.id,
      state: 'failed',
      message: run.message,
      cause,
    });
    // pod.json may be stale (a write that failed): the record in memory knows the pod too, and
    // the keys stay while either says a pod of the run may exist.
    const podInMemory =
      record !== null && record.podId !== null && record.state !== 'deleted' ? record.podId : null;
    const otherInMemory = record !== null && record.mayHaveOtherPods();
    if (podInMemory === null && !otherInMemory && noPodLeft(ctx.store, run.id)) {
      await forgetKeys(ctx, run.id);
    } else {
      log(
        ctx,
        'warn',
        `run ${run.id} may have a pod left${podInMemory === null ? '' : ` (pod ${podInMemory})`}: check "overbrainer pod ls" and remove it with "overbrainer pod rm ${run.id}"`,
      );
    }
    throw error;
  }
}

/**
 * A failed provisioning whose last pod is gone (or that never got one) ends pod.json in a
 * terminal state: `deleted`, its time now, `pod_id` null when no pod was ever adopted. Left
 * `creating` with no pod, readers could not tell a create in flight from a walk that ended. A
 * record still `deleting` (a delete not confirmed) or holding a live pod is left as it is: it
 * says a pod may bill, and so is one whose create went unanswered while the run's pods could
 * not be listed (`unconfirmed_create`): a pod nothing names may exist.
 */
function settleNoPod(ctx: PodCtx, record: PodRecord): void {
  if (record.podId !== null || record.state !== 'creating' || record.unconfirmedCreate) return;
  record.state = 'deleted';
  record.deletedAt = rfc3339(ctx.clock.nowMs());
  try {
    ctx.store.savePod(record);
  } catch (error) {
    log(ctx, 'warn', `cannot record that run ${record.runId} has no pod: ${describeError(error)}`);
  }
}

function interrupted(cause: unknown): PodError {
  return new PodError(
    'interrupted',
    'interrupted before the job started',
    'Start the run again when you are ready.',
    { cause },
  );
}

/**
 * Stores the pod's private host key as an account secret, so the create call's
 * env (which the API shows to anyone holding the account key) only references
 * it. Returns the reference.
 */
async function storeHostKey(
  ctx: PodCtx,
  runId: string,
  hostPrivateB64: string,
  signal?: AbortSignal,
): Promise<string> {
  const name = hostKeySecretName(runId);
  try {
    await ctx.client.createSecret(name, hostPrivateB64, { signal });
  } catch (error) {
    if (error instanceof ApiError && error.kind === 'forbidden') {
      throw new PodError(
        'secrets',
        'the Runpod API key may not manage secrets: no pod was created',
        'Use an API key with read/write access to account secrets (Runpod console → Settings → API Keys).',
        { cause: error },
      );
    }
    throw asPodError(error);
  }
  return secretReference(name);
}

/** Walks the GPU types until one gives a ready pod; a pod not ready is deleted first. */
async function provision(
  ctx: PodCtx,
  plan: PodPlan,
  record: PodRecord,
  signal?: AbortSignal,
): Promise<Provisioned> {
  const gpuTypes = await resolveGpuTypes(ctx, plan.target, signal);
  try {
    return await walk(ctx, plan, record, gpuTypes, signal);
  } catch (error) {
    // Whatever ends the walk (no capacity, an error, Ctrl-C): a create that went unanswered may
    // have made a pod Runpod lists late, so the run's pods are looked up once more and deleted.
    if (record.attempts.some((a) => a.result === 'ambiguous')) {
      noteStrays(ctx, record, await sweep(ctx, plan.run.id, record.podId, undefined, record));
    }
    throw error;
  }
}

async function walk(
  ctx: PodCtx,
  plan: PodPlan,
  record: PodRecord,
  gpuTypes: readonly string[],
  signal?: AbortSignal,
): Promise<Provisioned> {
  const unavailable: string[] = [];
  let notReady = 0;
  let lastNotReady = '';
  let ambiguousOnly = true;
  for (const gpuType of gpuTypes) {
    signal?.throwIfAborted();
    const created = await createOne(ctx, plan, record, gpuType, signal);
    if (created === 'unavailable') {
      unavailable.push(gpuType);
      ambiguousOnly = false;
      continue;
    }
    if (created === 'unanswered') continue;
    ambiguousOnly = false;
    try {
      return await becomeReady(ctx, plan, record, created, signal);
    } catch (error) {
      if (!(error instanceof NotReady) || signal?.aborted) throw error;
      notReady++;
      lastNotReady = error.message;
      record.endAttempt('not_ready', error.message);
      ctx.store.savePod(record);
      log(ctx, 'warn', `pod ${created.id} (${gpuType}) is not ready: ${error.message}`);
      // A pod whose deletion cannot be confirmed stops the walk: never a second billing pod.
      // The next type's pod authorizes the same client key: it must outlive this delete.
      await remove(ctx, record, 'not_ready', 'client', signal, { keepClientKey: true });
      // It billed while it booted: the run's spend counts it.
      const refused = record.currentAsOther();
      if (refused !== null) record.otherPods.push(refused);
      record.forgetPod();
      ctx.store.savePod(record);
    }
  }
  if (ambiguousOnly && record.attempts.length > 0) {
    throw new PodError(
      'unanswered',
      'Runpod did not answer any create call, and no pod of this run was found',
      'Check "overbrainer pod ls" (or the Pods view) for a pod of this run, then train again.',
    );
  }
  const volumeHint =
    plan.target.networkVolumeId !== null
      ? ` With a network volume, pods can only be placed in its data center (${plan.target.dataCenterIds === 'auto' ? 'auto' : plan.target.dataCenterIds.join(', ')}).`
      : '';
  if (notReady > 0) {
    throw new PodError(
      'no_capacity',
      `no gpu_types entry gave a ready pod: ${notReady} pod${notReady === 1 ? ' was' : 's were'} created but never became ready, the last one because ${lastNotReady}`,
      `Try again later or add GPU types to gpu_types.${volumeHint}`,
    );
  }
  throw new PodError(
    'no_capacity',
    `no gpu_types entry could be placed: no capacity for ${unavailable.join(', ') || 'any type'}`,
    `Add GPU types to gpu_types (\`overbrainer pod gpus\` lists them; in VS Code: Overbrainer: Pick GPU Types), use gpu_types = "auto", or try again later.${volumeHint}`,
  );
}

/** The GPU types to try, in order: the configured list, or `"auto"` from the catalog. */
export async function resolveGpuTypes(
  ctx: PodCtx,
  target: RunpodTargetConfig,
  signal?: AbortSignal,
): Promise<string[]> {
  if (target.gpuTypes !== 'auto') return [...target.gpuTypes];
  const catalog = await ctx.client.listGpuTypes({
    count: target.gpuCount,
    cloud: 'SECURE',
    includeAvailability: true,
    signal,
  });
  const chosen = autoGpuTypes(catalog, target);
  if (chosen.length === 0) {
    const limits = [
      target.minVramGb !== null ? `at least ${target.minVramGb} GB of VRAM` : null,
      target.maxPricePerHourUsd !== null ? `at most $${target.maxPricePerHourUsd}/h` : null,
      target.dataCenterIds !== 'auto' && target.dataCenterIds.length > 0
        ? `in ${target.dataCenterIds.join(', ')}`
        : null,
    ].filter((part) => part !== null);
    throw new PodError(
      'not_in_stock',
      `no Secure-cloud GPU type is in stock for ${target.gpuCount} GPU${target.gpuCount === 1 ? '' : 's'}${limits.length > 0 ? ` with ${limits.join(', ')}` : ''}: no pod was created`,
      'Relax min_vram_gb or max_price_per_hour, or try again later.',
    );
  }
  return chosen;
}

/** `"auto"`: in-stock Secure types within the limits, cheapest first (ties: more VRAM, then ID). */
export function autoGpuTypes(catalog: readonly GpuType[], target: RunpodTargetConfig): string[] {
  const dcs = target.dataCenterIds === 'auto' ? [] : target.dataCenterIds;
  return catalog
    .filter((gpu) => gpu.secureCloud && gpu.securePricePerHourUsd !== null)
    .filter((gpu) => target.minVramGb === null || gpu.memoryInGb >= target.minVramGb)
    .filter(
      (gpu) =>
        target.maxPricePerHourUsd === null ||
        (gpu.securePricePerHourUsd ?? Infinity) <= target.maxPricePerHourUsd,
    )
    .filter((gpu) =>
      dcs.length === 0
        ? inStock(gpu.availability) || gpu.dataCenters.some((dc) => inStock(dc.availability))
        : gpu.dataCenters.some((dc) => dcs.includes(dc.id) && inStock(dc.availability)),
    )
    .sort(
      (a, b) =>
        (a.securePricePerHourUsd ?? 0) - (b.securePricePerHourUsd ?? 0) ||
        b.memoryInGb - a.memoryInGb ||
        (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    )
    .map((gpu) => gpu.id);
}

/**
 * One GPU type: create calls (a second only after an unanswered first, and
 * only once the first was reconciled). The created or adopted pod, or why
 * there is none. Throws for answers that make other types pointless.
 */
async function createOne(
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
    const attempt = record.beginAttempt(gpuType, ctx.clock.nowMs(), target.maxHours);
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
