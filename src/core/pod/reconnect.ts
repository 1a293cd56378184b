/**
 * Reaching a run's pod again: looked up (a pod gone is recorded so, never deleted here),
 * connected with the run's pinned host key (at its new SSH endpoint after its container restarted).
 * The same for any pod of a run, so a cluster's member pods are reached by it too.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isAbortError } from '../clock';
import { describeError } from '../errors';
import { ExecError } from '../exec/executor';
import { SshExecutor } from '../exec/ssh';
import type { PodRecord, SshEndpoint } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import { isDead, type Pod } from '../runpod/api';
import { log, type PodCtx } from './context';
import { alias, checkEndpoint, CLIENT_KEY, writeKnownHosts } from './keys';
import { goneBy } from './lease';
import { PodError } from './podError';
import { forgetKeys, lookUpSettled, markGone, type GoneSeen } from './remove';

/**
 * Takes over what pod.json on disk says once another process (`pod rm`)
 * recorded the pod deleted, so the in-memory copy never overwrites it; true when it did.
 */
function adoptDeleted(ctx: PodCtx, pod: PodRecord): boolean {
  try {
    const fresh = ctx.store.loadPod(pod.runId);
    if (fresh?.podId !== pod.podId) return false;
    // `pod rm` is deleting it (its delete sent, its answer not yet come): whoever finds it gone
    // meanwhile says so, and never takes it for a death.
    if (fresh.state === 'deleting' && fresh.deletedBy === 'pod_rm') pod.deletedBy = 'pod_rm';
    if (fresh.state !== 'deleted') return false;
    pod.state = fresh.state;
    pod.deletedAt = fresh.deletedAt;
    pod.deletedBy = fresh.deletedBy;
    pod.estimatedSpendUsd = fresh.estimatedSpendUsd;
    return true;
  } catch {
    // A damaged pod.json: what this process knows stands.
    return false;
  }
}

/**
 * The run's pod as the API sees it, or null when it no longer exists; then pod.json records it
 * gone (nothing is deleted here).
 */
export async function stillThere(
  ctx: PodCtx,
  pod: PodRecord,
  signal?: AbortSignal,
  goneSeenMs: number | null = null,
): Promise<Pod | null> {
  adoptDeleted(ctx, pod);
  return lookUpPod(ctx, pod, signal, goneSeenMs);
}

/**
 * The recorded pod as the API sees it, settled: one Runpod is deleting (TERMINATED) is gone once
 * its 404 comes. Null when it no longer exists, which pod.json then records (its keys forgotten).
 */
async function lookUpPod(
  ctx: PodCtx,
  pod: PodRecord,
  signal?: AbortSignal,
  goneSeenMs: number | null = null,
): Promise<Pod | null> {
  const id = pod.podId;
  if (id === null || pod.state === 'deleted') return null;
  // An earlier look that found it gone (`goneSeenMs`) counts once these looks confirm it.
  const seen: GoneSeen = { atMs: goneSeenMs };
  const remote = await lookUpSettled(ctx, id, signal, seen);
  if (remote !== null) return remote;
  // Gone: read again who deleted it (a `pod rm` in another process deletes before it records).
  if (adoptDeleted(ctx, pod)) return null;
  const by = pod.deletedBy === 'pod_rm' ? 'pod_rm' : goneBy(pod, ctx.clock.nowMs());
  markGone(ctx, pod, id, by, {}, seen.atMs);
  await forgetKeys(ctx, pod.runId);
  return null;
}

/**
 * Connects again to the pod of `run` (attach, cancel, keep): looks it up (its
 * port may have changed), rewrites known_hosts and connects with the pinned
 * key. Null when the pod no longer exists (confirmed by repeated looks, never
 * by a delete), which pod.json then records.
 */
export async function reconnect(
  ctx: PodCtx,
  pod: PodRecord,
  run: RunRecord,
  signal?: AbortSignal,
): Promise<SshExecutor | null> {
  // A TERMINATED pod is being deleted: wait for its 404 rather than call it stopped.
  const remote = await lookUpPod(ctx, pod, signal);
  if (remote === null) return null;
  const id = remote.id;
  if (remote.status === 'TERMINATED') {
    throw new PodError(
      'no_endpoint',
      `pod ${id} of run ${run.id} is TERMINATED: Runpod is deleting it`,
      'Attach again in a minute to record it deleted.',
      { podStatus: remote.status },
    );
  }
  if (isDead(remote)) {
    throw new PodError(
      'pod_stopped',
      `pod ${id} of run ${run.id} is ${remote.status}`,
      `Start it again in the Runpod console and attach, or remove it with "overbrainer pod rm ${run.id}".`,
      { podStatus: remote.status },
    );
  }
  if (remote.sshDirect === null) {
    throw new PodError(
      'no_endpoint',
      `pod ${id} has no SSH endpoint right now (${remote.status})`,
      'It may be restarting: attach again in a minute.',
    );
  }
  const endpoint: SshEndpoint = {
    host: remote.sshDirect.host,
    port: remote.sshDirect.port,
    user: remote.sshDirect.username,
  };
  const sshDir = ctx.store.sshDir(run.id);
  checkEndpoint(endpoint);
  writeKnownHosts(sshDir, alias(run.id), pod.hostKey);
  let privateKey: Buffer;
  try {
    privateKey = fs.readFileSync(path.join(sshDir, CLIENT_KEY));
  } catch {
    throw new PodError(
      'exec',
      `the private key of run ${run.id} is gone, so its pod ${id} cannot be reached`,
      `Remove the pod with "overbrainer pod rm ${run.id}".`,
    );
  }
  const connect = (): Promise<SshExecutor> =>
    SshExecutor.connect({
      host: endpoint.host,
      port: endpoint.port,
      username: endpoint.user,
      privateKey,
      hostPublicKey: pod.hostKey,
      clock: ctx.clock,
      timing: ctx.timing,
      signal,
      onLog: (line) => log(ctx, 'debug', line),
    });
  let executor: SshExecutor;
  try {
    executor = await connect();
  } catch (error) {
    if (signal?.aborted || isAbortError(error)) throw error;
    // A wrong host key or a refused key is not a pod on its way out: said at once.
    if (
      !(error instanceof ExecError) ||
      (error.kind !== 'connection' && error.kind !== 'timeout')
    ) {
      throw error;
    }
    // The pod may have been deleted as we connected (its watchdog found the retrieved marker of
    // a client that died before its own delete): a pod gone is recorded, not an SSH failure.
    // Still there: one more try once its container had time to come up.
    if ((await stillThere(ctx, pod, signal)) === null) return null;
    log(
      ctx,
      'debug',
      `run ${run.id}: connecting to pod ${id} failed, trying once more: ${describeError(error)}`,
    );
    await ctx.clock.sleep(ctx.timing.podPollMs, signal);
    try {
      executor = await connect();
    } catch (retryError) {
      if (signal?.aborted || isAbortError(retryError)) throw retryError;
      if ((await stillThere(ctx, pod, signal)) === null) return null;
      throw retryError;
    }
  }
  pod.ssh = endpoint;
  ctx.store.savePod(pod);
  return executor;
}

/** How many times in all {@link againOnDrop} tries what it is given. */
export const DROP_ATTEMPTS = 3;

/**
 * Runs `work` (which reaches the pod itself, with {@link reconnect}: a pod that restarted has a
 * new port) and again, a pod poll later, when the connection dropped under it or could not be
 * made, up to {@link DROP_ATTEMPTS} in all. Only for work that may be done twice (a look, a file
 * written whole, a marker set): a command in flight when the link dropped may or may not have
 * run. Any other error, or the last one, is the caller's.
 */
export async function againOnDrop<T>(
  ctx: PodCtx,
  what: string,
  work: () => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      const dropped = error instanceof ExecError && error.kind === 'connection';
      if (!dropped || attempt >= DROP_ATTEMPTS || signal?.aborted) throw error;
      log(
        ctx,
        'warn',
        `the SSH connection dropped while ${what} (${describeError(error)}); connecting again (attempt ${attempt + 1} of ${DROP_ATTEMPTS})`,
      );
      await ctx.clock.sleep(ctx.timing.podPollMs, signal);
    }
  }
}

/**
 * Whether the pod's host still gives no SSH answer, asked `misses` times a status poll apart
 * (each a look at the pod and a connect with one more try, as {@link reconnect}), every one a
 * timeout while Runpod lists the pod: a hung host, whose watchdog is as silent. Anything else (an
 * answer, a refusal, the pod gone or stopped, a stop) is no such verdict.
 */
export async function hostSilent(
  ctx: PodCtx,
  pod: PodRecord,
  run: RunRecord,
  misses: number,
  signal?: AbortSignal,
): Promise<boolean> {
  for (let miss = 0; miss < misses; miss++) {
    try {
      if (miss > 0) await ctx.clock.sleep(ctx.timing.statusPollMs, signal);
      const executor = await reconnect(ctx, pod, run, signal);
      executor?.dispose();
      return false;
    } catch (error) {
      if (!(error instanceof ExecError) || error.kind !== 'timeout') return false;
      log(
        ctx,
        'debug',
        `run ${run.id}: pod ${pod.podId ?? ''} gave no SSH answer again (${miss + 1} of ${misses})`,
      );
    }
  }
  return true;
}
