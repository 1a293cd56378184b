/**
 * Attach: a run followed again after any restart; a run left `preparing` by a dead client settled;
 * the start-up sweep of those.
 */
import { rfc3339 } from '../clock';
import type { OverbrainerConfig } from '../config/types';
import { followAgain } from '../follow/again';
import { followLocal } from '../follow/collect';
import { followOnHost } from '../follow/host';
import { recoveryPlan } from '../follow/recover';
import { failRun, log, type PodCtx } from '../pod/context';
import { forgetKeys, noteStrays, remove, sweep } from '../pod/remove';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import { endRun, INTERRUPTED_BEFORE_JOB } from '../runs/runEnd';
import { noPodLeft, type RunStore } from '../runs/store';
import {
  type FlowDeps,
  FlowError,
  type FlowResult,
  artifactsOf,
  endOf,
  maxRetrieveGbOf,
  lockRun,
  podCtx,
  publishState,
  summaryLine,
} from './deps';
import { abandonWithoutPod, hostExecutor, hostResults } from './host';
import { jobSecretsOf } from './jobSecrets';
import { attachCluster } from './clusterAttach';

/**
 * Reconnects to a run after any restart and finishes it: a running job is
 * followed again; an ended one's results are retrieved and its pod ended.
 */
export async function attach(
  deps: FlowDeps,
  config: OverbrainerConfig | null,
  runId: string,
  signal?: AbortSignal,
): Promise<FlowResult> {
  const run = deps.store.loadRun(runId);
  const target = config?.targets[run.target];
  const pod = deps.store.loadPod(runId);
  const lock = lockRun(deps, runId);
  try {
    if (pod === null) {
      // A run on a cluster: its members followed again (no pod.json: run.json's cluster).
      if (run.cluster) return await attachCluster(deps, config, run, signal);
      if (target && target.kind === 'runpod')
        throw new FlowError('no_pod', `run ${runId} has no pod.json`, null);
      if (run.state === 'preparing' && run.job === null) {
        return await abandonWithoutPod(deps, config, run, signal);
      }
      const onHost = target?.kind === 'ssh';
      // On the user's machine an ended job whose results did not come home is retrieved again.
      const unfinished = run.state === 'running' || (onHost && run.end?.cause === 'not_retrieved');
      if (!unfinished || run.job === null) {
        return { run, pod: null, ending: null, summary: summaryLine(deps, run, null) };
      }
      const executor = await hostExecutor(deps, config, run, signal);
      try {
        if (!onHost) return await followLocal(deps, executor, run, signal);
        deps.bus.publish({ type: 'runWatched', runId });
        return await followOnHost(deps, executor, run, hostResults(config, run), signal);
      } finally {
        executor.dispose();
      }
    }
    if (target && target.kind !== 'runpod') {
      throw new FlowError(
        'bad_config',
        `run ${runId} ran on a pod but target "${run.target}" is no longer a runpod target`,
        'Restore the target in overbrainer.toml.',
      );
    }
    if (run.job === null) {
      if (run.state === 'preparing') return await abandonStart(podCtx(deps), deps, run, pod);
      return { run, pod, ending: null, summary: summaryLine(deps, run, pod) };
    }
    const followed = await followAgain(podCtx(deps), run, pod, {
      artifacts: artifactsOf(config),
      plan: recoveryPlan(
        config,
        run,
        config === null ? {} : jobSecretsOf(config, deps.env ?? {}, false),
      ),
      maxRetrieveGb: maxRetrieveGbOf(config, run),
      signal,
    });
    return endOf(followed);
  } finally {
    lock.dispose();
  }
}

/**
 * Attach to a run still `preparing`: its lock was free, so the client that was starting it is
 * gone (killed before its job started) and nothing will start the job. As Ctrl-C before the job
 * starts does: the recorded pod is deleted, every other pod carrying the run marker too
 * (a create sent but never answered leaves one pod.json does not name), the keys are forgotten
 * once no pod is left, and the run fails `interrupted before the job started`.
 */
async function abandonStart(
  ctx: PodCtx,
  deps: FlowDeps,
  run: RunRecord,
  pod: PodRecord,
): Promise<FlowResult> {
  log(
    ctx,
    'info',
    `run ${run.id} was left before its job started (its client stopped): removing its pods`,
  );
  const createInFlight = pod.podId === null && pod.state === 'creating';
  let problem: unknown = null;
  try {
    await remove(ctx, pod, 'interrupted', 'client');
  } catch (error) {
    problem = error;
  }
  // A create that was sent but never answered: Runpod may list its pod a little late.
  if (createInFlight) await deps.clock.sleep(ctx.timing.reconcileFirstWaitMs);
  noteStrays(ctx, pod, await sweep(ctx, run.id, pod.podId, undefined, pod));
  if (pod.podId === null && pod.state === 'creating' && !pod.unconfirmedCreate) {
    pod.state = 'deleted';
    pod.deletedAt = rfc3339(deps.clock.nowMs());
    ctx.store.savePod(pod);
  }
  if (problem === null && noPodLeft(ctx.store, run.id)) await forgetKeys(ctx, run.id);
  failRun(ctx, run, 'interrupted', INTERRUPTED_BEFORE_JOB);
  if (problem !== null) throw problem;
  return { run, pod, ending: 'deleted', summary: summaryLine(deps, run, pod) };
}

/**
 * Whether a client starting now takes `run` up again: a run whose job runs (followed to its end)
 * or whose start was left `preparing` (settled), as attach does. The extension's thin first look
 * at activation (src/boot/runsToFollow.ts) searches run.json for the same two states.
 */
export function takenUpAgain(state: string | null): boolean {
  return state === 'running' || state === 'preparing';
}

/**
 * What a starting client does about `run`: `attach` when it is {@link takenUpAgain} and no live
 * process holds its lock (a stale lock, its holder dead, is no holder: attach takes it over),
 * `held` when one does (that one follows it), null when there is nothing to take up.
 */
export function followAgainNow(
  store: Pick<RunStore, 'lockHolder'>,
  run: { id: string; state: string | null },
): 'attach' | 'held' | null {
  if (!takenUpAgain(run.state)) return null;
  const holder = store.lockHolder(run.id);
  return holder !== null && holder.stale === null ? 'held' : 'attach';
}

/** A run {@link recoverAbandoned} found left `preparing`, and what became of it. */
export interface Recovered {
  runId: string;
  result: FlowResult | null;
  /** Why it could not be settled (it stays `preparing`; attach retries). */
  error: unknown;
}

/**
 * Finds the runs left `preparing` by a client that died before their job started (a window
 * closed, a CLI killed: no live client holds their lock) and settles each at the next start of
 * the CLI or the extension, as attach does: the pods carrying its marker are deleted, the keys
 * forgotten, and the run fails `interrupted before the job started` (a run that never recorded a
 * pod fails so at once; one on the user's machine or this one as {@link abandonWithoutPod} says).
 * None is left `preparing` silently; one that cannot be settled is returned with its error.
 * Without a Runpod client in `deps`, the runs with a pod are left for a start that has one.
 */
export async function recoverAbandoned(
  deps: FlowDeps,
  config: OverbrainerConfig | null,
): Promise<Recovered[]> {
  const recovered: Recovered[] = [];
  for (const run of deps.store.list().runs) {
    if (run.state !== 'preparing' || followAgainNow(deps.store, run) !== 'attach') continue;
    // Without a Runpod client a run with a pod waits for the next start that has one.
    if (deps.client === null && deps.store.loadPod(run.id) !== null) continue;
    try {
      const podless =
        config?.targets[run.target]?.kind === 'ssh' || run.remoteDir === deps.store.runDir(run.id);
      if (deps.store.loadPod(run.id) === null && podless) {
        // On the user's machine (or this one): a job launched unrecorded, a half upload.
        recovered.push({ runId: run.id, result: await attach(deps, config, run.id), error: null });
        continue;
      }
      if (deps.store.loadPod(run.id) === null) {
        endRun(run, 'failed', 'interrupted', INTERRUPTED_BEFORE_JOB);
        deps.store.saveRun(run);
        publishState(deps, run);
        recovered.push({
          runId: run.id,
          result: { run, pod: null, ending: null, summary: summaryLine(deps, run, null) },
          error: null,
        });
        continue;
      }
      recovered.push({ runId: run.id, result: await attach(deps, config, run.id), error: null });
    } catch (error) {
      recovered.push({ runId: run.id, result: null, error });
    }
  }
  return recovered;
}
