/**
 * Stop (`train stop`): the job asked for a snapshot, then followed to its end when nobody
 * else follows.
 */
import type { OverbrainerConfig } from '../config/types';
import { againOnDrop, reconnect } from '../pod/reconnect';
import { requestSnapshot, type RequestResult } from '../train/snapshot';
import { attach } from './attach';
import { hostExecutor } from './host';
import { type FlowDeps, FlowError, type FlowResult, podCtx, type RunCommand } from './deps';

/** What {@link stop} did: the request, and the run's end when this client followed it there. */
export interface StopResult {
  request: RequestResult;
  /** Null when another client follows the run: that one brings the snapshot home. */
  result: FlowResult | null;
}

/**
 * Stops a running job with a snapshot (`train stop`): asks the job for one
 * (`snapshot.request`, reason `requested`); the trainer saves a checkpoint at its next step end
 * and exits. When no other client follows the run, this one follows it to that end, brings the
 * checkpoint and the results home verified and ends the pod (as attach does); the run is recorded
 * `stopped` with the snapshot's step. A job that already ended is collected the same way.
 */
export const stop: RunCommand<StopResult> = async (deps, config, runId, signal) => {
  const request = await requestStop(deps, runId, signal, config);
  const holder = deps.store.lockHolder(runId);
  if (holder !== null && holder.stale === null) return { request, result: null };
  return { request, result: await attach(deps, config, runId, signal) };
};

/**
 * The first half of {@link stop}: asks the running job of `runId` for a snapshot and says so,
 * without following it (a front end that follows the run already, or attaches after, brings the
 * snapshot home).
 */
export async function requestStop(
  deps: FlowDeps,
  runId: string,
  signal?: AbortSignal,
  config: OverbrainerConfig | null = null,
): Promise<RequestResult> {
  const run = deps.store.loadRun(runId);
  if (run.job === null) {
    throw new FlowError(
      'not_started',
      `run ${runId} has not started: there is no job to stop`,
      run.state === 'preparing'
        ? 'Wait until its job runs, or cancel it.'
        : 'Only a running job can be stopped.',
    );
  }
  if (run.state !== 'running') {
    throw new FlowError('already_ended', `run ${runId} already ended: ${run.state}`, null);
  }
  const pod = deps.store.loadPod(runId);
  let request: RequestResult;
  if (pod === null) {
    const executor = await hostExecutor(deps, config, run, signal);
    try {
      request = await requestSnapshot(executor, run.remoteDir, 'requested', { signal });
    } finally {
      executor.dispose();
    }
  } else {
    // The request may be made twice (the second finds the first's marker): a connection that
    // drops under it reaches the pod again and asks again.
    const ctx = podCtx(deps);
    let tries = 0;
    request = await againOnDrop(
      ctx,
      `asking the job of run ${runId} for a snapshot`,
      async () => {
        tries++;
        const executor = await reconnect(ctx, pod, run, signal);
        if (executor === null) {
          throw new FlowError('no_pod', `run ${runId}: no pod left, nothing to stop`, null);
        }
        try {
          const asked = await requestSnapshot(executor, run.remoteDir, 'requested', { signal });
          // Our own earlier try's request, made before its answer was lost.
          const ours =
            tries > 1 && asked.kind === 'already_requested' && asked.reason === 'requested';
          return ours ? { kind: 'requested' as const, reason: 'requested' as const } : asked;
        } finally {
          executor.dispose();
        }
      },
      signal,
    );
  }
  const said =
    request.kind === 'ended'
      ? `the job of run ${runId} had already ended`
      : request.kind === 'already_requested'
        ? `the job of run ${runId} was already asked for a snapshot (${request.reason})`
        : `asked the job of run ${runId} for a snapshot: it saves a checkpoint at its next step end and stops (a trainer that does not honour snapshot requests runs on: cancel it instead)`;
  deps.bus.publish({ type: 'log', level: 'info', message: said });
  return request;
}
