/**
 * Provisioning a run's pod: keys, `pod.json` before
 * every create, GPU types in order (or `"auto"` from the catalog: ./gpuChoice.ts), ambiguous
 * creates reconciled by run marker and attempt name (never re-sent blindly: ./podCreate.ts),
 * readiness = SSH with the pinned host key, then the watchdog's verdict.
 */
import { rfc3339 } from '../clock';
import type { RunpodTargetConfig } from '../config/types';
import { workdirFor } from '../config/types';
import { newPodRecord, type PodRecord } from '../runs/podRecord';
import { noPodLeft } from '../runs/store';
import type { RunRecord } from '../runs/runRecord';
import { endRun } from '../runs/runEnd';
import { secretReference } from '../runpod/api';
import { ApiError } from '../runpod/apiErrors';
import { hostKeySecretName, log, type PodCtx } from './context';
import { resolveGpuTypes } from './gpuChoice';
import { alias, generateRunKeys } from './keys';
import { createOne } from './podCreate';
import { asPodError, PodError, runMessageFor } from './podError';
import { forgetKeys, noteStrays, remove, sweep } from './remove';
import { describeError } from '../errors';
import {
  becomeReady,
  NotReady,
  type OnReachable,
  type PodLimits,
  type PodPlan,
  type Provisioned,
} from './podReady';

export type { OnReachable, PodLimits, Provisioned };

/**
 * Creates the pod of the new run `run` and waits until it is ready. On failure
 * the run is saved `failed` with the reason (`interrupted before the job
 * started` after an abort), whatever pod was created is deleted, and once every
 * pod of the run is confirmed deleted, the run's keys are forgotten. `limits` bound the pod (its
 * cost cap, its deadline), whatever the target says: the caller decides them.
 */
export async function startPod(
  ctx: PodCtx,
  target: RunpodTargetConfig,
  limits: PodLimits,
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
      costCapUsd: keep ? null : limits.costCapUsd,
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
      limits,
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
