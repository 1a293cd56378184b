/**
 * Provisioning a run's pod (seed `start_pod`, spec §5): keys, `pod.json` before
 * every create, GPU types in order (or `"auto"` from the catalog), ambiguous
 * creates reconciled by run marker and attempt name (never re-sent blindly),
 * readiness = SSH with the pinned host key, then the watchdog's verdict.
 */
import * as fs from 'node:fs';
import { isAbortError } from '../clock';
import type { RunpodTargetConfig } from '../config/types';
import { workdirFor } from '../config/types';
import { ExecError } from '../exec/executor';
import { SshExecutor } from '../exec/ssh';
import { newPodRecord, type PodRecord, type SshEndpoint } from '../runs/podRecord';
import { noPodLeft } from '../runs/store';
import type { RunRecord } from '../runs/runRecord';
import { createPodBody, inStock, isDead, secretReference, type GpuType, type Pod } from './api';
import { hostKeySecretName, log, type PodCtx } from './context';
import { ApiError } from './errors';
import { alias, generateRunKeys, writeSshConfig, type RunKeys } from './keys';
import { asPodError, PodError, runMessageFor } from './podError';
import {
  parseWatchdogVerdict,
  podCmd,
  podEnv,
  VERDICT_READ_MAX_BYTES,
  WATCHDOG_VERDICT,
} from './podScripts';
import { forgetKeys, messageOf, noteStrays, remove, sweep } from './remove';

/** Ambiguous create calls tried per GPU type before moving on. */
const AMBIGUOUS_TRIES_PER_TYPE = 2;

/** A pod that answers SSH with the pinned key and has a working watchdog. */
export interface Provisioned {
  executor: SshExecutor;
  endpoint: SshEndpoint;
}

interface PodPlan {
  run: RunRecord;
  target: RunpodTargetConfig;
  keys: RunKeys;
  /** The `{{ RUNPOD_SECRET_… }}` reference to the host key. */
  hostKeyRef: string;
  workdir: string;
}

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
    ctx.store.savePod(record);
    const hostKeyRef = await storeHostKey(ctx, run.id, keys.hostPrivateB64, signal);
    const plan: PodPlan = { run, target, keys, hostKeyRef, workdir: workdirFor(target) };
    const provisioned = await provision(ctx, plan, record, signal);
    return { record, provisioned };
  } catch (caught) {
    const error = signal?.aborted ? interrupted(caught) : asPodError(caught);
    if (record !== null && record.podId !== null && record.state !== 'deleted') {
      // Shielded from the abort: the pod must go whatever the user pressed.
      await remove(ctx, record, signal?.aborted ? 'interrupted' : 'not_ready', 'client').catch(
        (removeError: unknown) => log(ctx, 'error', messageOf(removeError)),
      );
    }
    run.state = 'failed';
    run.message = runMessageFor(error);
    try {
      ctx.store.saveRun(run);
    } catch (saveError) {
      log(ctx, 'warn', `cannot record run ${run.id} as failed: ${messageOf(saveError)}`);
    }
    ctx.bus.publish({ type: 'runState', runId: run.id, state: 'failed', message: run.message });
    if (noPodLeft(ctx.store, run.id)) {
      await forgetKeys(ctx, run.id);
    } else {
      log(
        ctx,
        'warn',
        `run ${run.id} may have a pod left: check "overbrainer pod ls" and remove it with "overbrainer pod rm ${run.id}"`,
      );
    }
    throw error;
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

/** Walks the GPU types until one gives a ready pod (spec §5.4–§5.10). */
async function provision(
  ctx: PodCtx,
  plan: PodPlan,
  record: PodRecord,
  signal?: AbortSignal,
): Promise<Provisioned> {
  const gpuTypes = await resolveGpuTypes(ctx, plan.target, signal);
  const unavailable: string[] = [];
  let notReady = 0;
  let lastNotReady = '';
  let ambiguousOnly = true;
  try {
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
        record.forgetPod();
        ctx.store.savePod(record);
      }
    }
  } catch (error) {
    if (record.attempts.some((a) => a.result === 'ambiguous')) {
      noteStrays(ctx, record, await sweep(ctx, plan.run.id, record.podId, undefined));
    }
    throw error;
  }
  if (ambiguousOnly && record.attempts.length > 0) {
    noteStrays(ctx, record, await sweep(ctx, plan.run.id, null, undefined));
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
    `Add GPU types to gpu_types (Overbrainer: Pick GPU Types), use gpu_types = "auto", or try again later.${volumeHint}`,
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
        case 'ambiguous': {
          record.endAttempt('ambiguous', 'no usable answer: the pod may exist');
          ctx.store.savePod(record);
          log(
            ctx,
            'warn',
            `create of ${attempt.name} went unanswered: looking for it by its run marker`,
          );
          const adopted = await reconcile(ctx, record, attempt.name, signal);
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
    },
    result,
    ctx.clock.nowMs(),
  );
  // If this save fails the caller's failure path deletes the pod (its ID is in memory).
  ctx.store.savePod(record);
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
  });
}

/**
 * After an unanswered create: waits, then looks for the attempt's pod by the
 * run marker and its unique name (twice, the second time after a longer wait).
 * Other pods of the run found then are duplicates: deleted, unconfirmed ones
 * noted as strays. After an abort the waits are skipped but the list is read once.
 */
async function reconcile(
  ctx: PodCtx,
  record: PodRecord,
  name: string,
  signal?: AbortSignal,
): Promise<Pod | null> {
  const waits = [ctx.timing.reconcileFirstWaitMs, ctx.timing.reconcileSecondWaitMs];
  for (const waitMs of waits) {
    if (!signal?.aborted) {
      await ctx.clock.sleep(waitMs, signal).catch((error: unknown) => {
        if (!isAbortError(error)) throw error;
      });
    }
    let listed: Pod[];
    try {
      listed = await ctx.client.listPods({ runMarker: record.runId });
    } catch (error) {
      log(ctx, 'warn', `cannot list pods to reconcile ${name}: ${messageOf(error)}`);
      if (signal?.aborted) return null;
      continue;
    }
    const mine = listed.find((pod) => pod.name === name && pod.runMarker === record.runId);
    if (mine) {
      const stray = await sweep(ctx, record.runId, mine.id);
      if (stray.length > 0) noteStrays(ctx, record, stray);
      return mine;
    }
    if (signal?.aborted) return null;
  }
  return null;
}

/** A pod that did not become ready: deleted, then the next GPU type. */
class NotReady extends Error {}

/** Reach then preflight (spec §5.6–§5.8), then `ready` saved, published, strays swept. */
async function becomeReady(
  ctx: PodCtx,
  plan: PodPlan,
  record: PodRecord,
  pod: Pod,
  signal?: AbortSignal,
): Promise<Provisioned> {
  const createdMs = ctx.clock.nowMs();
  const reached = await reach(ctx, plan, record, pod.id, signal);
  try {
    await preflight(ctx, plan, reached.executor, pod.id, signal);
  } catch (error) {
    reached.executor.dispose();
    if (error instanceof PodError) {
      await remove(
        ctx,
        record,
        error.kind === 'bootstrap_failed' ? 'bootstrap_failed' : 'refused',
        'client',
      );
      record.endAttempt('refused', error.message);
      ctx.store.savePod(record);
    }
    throw error;
  }
  const nowMs = ctx.clock.nowMs();
  record.ready(reached.endpoint, nowMs);
  ctx.store.savePod(record);
  ctx.bus.publish({
    type: 'pod',
    runId: record.runId,
    status: { kind: 'ready', podId: pod.id, afterMs: nowMs - createdMs, deadline: record.deadline },
  });
  noteStrays(ctx, record, await sweep(ctx, record.runId, pod.id, signal));
  return reached;
}

/**
 * Polls the pod until it publishes its SSH endpoint and answers SSH with the
 * pinned host key (within `readyTimeoutMs`). A dead or vanished pod is not
 * ready at once. Nothing is sent to a host presenting another key.
 */
async function reach(
  ctx: PodCtx,
  plan: PodPlan,
  record: PodRecord,
  podId: string,
  signal?: AbortSignal,
): Promise<Provisioned> {
  const untilMs = ctx.clock.nowMs() + ctx.timing.readyTimeoutMs;
  let why = 'it published no SSH endpoint';
  const privateKey = fs.readFileSync(plan.keys.clientKeyPath);
  for (;;) {
    let pod: Pod | null = null;
    try {
      pod = await ctx.client.getPod(podId, { signal });
      if (pod === null) throw new NotReady('it disappeared while starting');
    } catch (error) {
      if (error instanceof NotReady || signal?.aborted) throw error;
      why = `looking it up failed: ${messageOf(error)}`;
    }
    if (pod !== null) {
      if (isDead(pod)) throw new NotReady(`it is ${pod.status}`);
      record.noteRate(pod.costPerHourUsd);
      if (pod.sshDirect !== null) {
        const endpoint: SshEndpoint = {
          host: pod.sshDirect.host,
          port: pod.sshDirect.port,
          user: pod.sshDirect.username,
        };
        try {
          writeSshConfig(
            ctx.store.sshDir(plan.run.id),
            alias(plan.run.id),
            endpoint,
            plan.keys.hostPublic,
          );
          const executor = await SshExecutor.connect({
            host: endpoint.host,
            port: endpoint.port,
            username: endpoint.user,
            privateKey,
            hostPublicKey: plan.keys.hostPublic,
            clock: ctx.clock,
            timing: ctx.timing,
            signal,
          });
          record.ssh = endpoint;
          ctx.store.savePod(record);
          return { executor, endpoint };
        } catch (error) {
          if (signal?.aborted) throw error;
          why =
            error instanceof ExecError && error.kind === 'host_key'
              ? `${endpoint.host}:${endpoint.port} presented another host key (nothing was sent to it)`
              : `SSH to ${endpoint.host}:${endpoint.port} failed: ${messageOf(error)}`;
        }
      }
    }
    if (ctx.clock.nowMs() >= untilMs) {
      throw new NotReady(
        `it did not answer SSH with its pinned host key within ${minutes(ctx.timing.readyTimeoutMs)}: ${why}`,
      );
    }
    await ctx.clock.sleep(ctx.timing.podPollMs, signal);
  }
}

/**
 * Waits for the watchdog's verdict (within `preflightTimeoutMs`): `ready` goes
 * on; a failed bootstrap or a watchdog that cannot delete its pod refuses the
 * run (the caller deletes the pod). The pod's liveness is checked each poll.
 */
async function preflight(
  ctx: PodCtx,
  plan: PodPlan,
  executor: SshExecutor,
  podId: string,
  signal?: AbortSignal,
): Promise<void> {
  const verdictPath = `${plan.run.remoteDir}/${WATCHDOG_VERDICT}`;
  const untilMs = ctx.clock.nowMs() + ctx.timing.preflightTimeoutMs;
  for (;;) {
    let text = '';
    try {
      text = (await executor.readRange(verdictPath, 0, VERDICT_READ_MAX_BYTES)).toString('utf8');
    } catch (error) {
      if (!(error instanceof ExecError && error.kind === 'not_found')) {
        if (signal?.aborted) throw error;
        log(ctx, 'debug', `cannot read the watchdog's verdict yet: ${messageOf(error)}`);
      }
    }
    const verdict = parseWatchdogVerdict(text);
    if (verdict?.kind === 'ready') return;
    if (verdict?.kind === 'bootstrap_failed') {
      throw new PodError(
        'bootstrap_failed',
        `the pod's bootstrap failed: ${verdict.reason}`,
        'See runs/<id>/.pod/bootstrap.log once copied, or the pod logs in the Runpod console; the pod was deleted.',
      );
    }
    if (verdict?.kind === 'failed') {
      throw new PodError(
        'watchdog_refused',
        `the pod's watchdog cannot delete its pod (${verdict.reason}): the run is refused and the pod deleted`,
        'Check that Runpod gives pods a working RUNPOD_API_KEY, then train again.',
      );
    }
    const pod = await ctx.client.getPod(podId, { signal }).catch(() => undefined);
    if (pod === null || (pod && isDead(pod))) {
      throw new NotReady(pod ? `it is ${pod.status}` : 'it disappeared while starting');
    }
    if (ctx.clock.nowMs() >= untilMs) {
      throw new PodError(
        'watchdog_refused',
        `the pod's watchdog gave no verdict within ${minutes(ctx.timing.preflightTimeoutMs)}: the run is refused and the pod deleted`,
        'Try again; if it repeats, check the image runs bash and curl.',
      );
    }
    await ctx.clock.sleep(ctx.timing.podPollMs, signal);
  }
}

function minutes(ms: number): string {
  return ms >= 60_000 ? `${Math.round(ms / 60_000)} min` : `${Math.round(ms / 1000)} s`;
}
