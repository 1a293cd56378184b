/**
 * Attach to a run on a cluster (issue 37): a client that starts again (the CLI's attach, VS Code
 * after a reload) follows a cluster run whose job runs as train did: every member connected
 * again with the pinned host key run.json keeps, then the same attempts as train's
 * (./clusterAttempts.ts): rank 0 followed, a node's death recovered on a new cluster, the
 * results home verified, the cluster ended. A node that died while no client followed is found
 * at once and handled as a death seen while following.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { OverbrainerConfig } from '../config/types';
import { describeError } from '../errors';
import { log } from '../pod/context';
import { reconnectCluster, type ClusterHandle } from '../pod/cluster';
import { resolveGpuTypes } from '../pod/gpuChoice';
import { PodError } from '../pod/podError';
import { hostKeySecretName } from '../pod/context';
import type { RunRecord } from '../runs/runRecord';
import { trainerJobOf } from '../train/trainerJob';
import { type FlowDeps, FlowError, type FlowResult, podCtx, publishState } from './deps';
import type { ClusterEnd } from './clusterFollow';
import { nodeState, runClusterAttempts } from './clusterAttempts';
import { endRunCluster } from './clusterRecover';
import { INTERRUPTED_BEFORE_JOB, endRun } from '../runs/runEnd';
import { jobSecretsOf } from './jobSecrets';

/** The run's client key files, as train wrote them under runs/<id>/ssh/. */
const CLIENT_KEY = 'id_ed25519';

/**
 * Follows `run` (on a cluster, its lock held by the caller) to its end; a run whose job never
 * started has its cluster ended and fails `interrupted before the job started`.
 */
export async function attachCluster(
  deps: FlowDeps,
  config: OverbrainerConfig | null,
  run: RunRecord,
  signal?: AbortSignal,
): Promise<FlowResult> {
  const ctx = podCtx(deps);
  const cluster = run.cluster;
  const done = (stopped: string | null = null): FlowResult => ({
    run,
    pod: null,
    ending: null,
    summary:
      stopped ??
      `attach: run ${run.id} ${run.state} on a cluster${run.message ? `; ${run.message}` : ''}${run.state === 'succeeded' ? `; output in runs/${run.id}/output` : ''}`,
  });
  if (run.state === 'preparing' && run.job === null) {
    // Its client stopped before the job started: nothing will start it.
    if (cluster && cluster.deletedAt === null) await endRunCluster(ctx, run, cluster.id);
    endRun(run, 'failed', 'interrupted', INTERRUPTED_BEFORE_JOB);
    deps.store.saveRun(run);
    publishState(deps, run);
    return done();
  }
  if (run.state !== 'running' || !cluster || cluster.deletedAt !== null) return done();
  const target = config?.targets[run.target];
  const training = config?.training;
  if (target?.kind !== 'runpod' || !training) {
    throw new FlowError(
      'bad_config',
      `run ${run.id} runs on a cluster of target "${run.target}", which is no longer a runpod target of overbrainer.toml`,
      `Restore the target, or end the run with "overbrainer pod rm ${run.id} --force".`,
    );
  }
  if (!cluster.hostKey) {
    throw new FlowError(
      'no_pod',
      `run ${run.id}'s record keeps no pinned host key for its cluster ${cluster.id} (written by an earlier version): it cannot be followed again safely`,
      `End it with "overbrainer pod rm ${run.id} --force" (its checkpoints stay in runs/${run.id}/checkpoints/).`,
    );
  }
  const sshDir = deps.store.sshDir(run.id);
  const clientKeyPath = path.join(sshDir, CLIENT_KEY);
  const keys = {
    clientPublic: fs.readFileSync(`${clientKeyPath}.pub`, 'utf8').trim(),
    hostPublic: cluster.hostKey,
    hostPrivateB64: '', // the members' host key is Runpod's secret, created by train
    clientKeyPath,
  };
  const clientPrivateKey = fs.readFileSync(clientKeyPath);
  let handle: ClusterHandle;
  let firstEnd: ClusterEnd | undefined;
  try {
    handle = await reconnectCluster(
      ctx,
      cluster.id,
      { hostPublicKey: keys.hostPublic, clientPrivateKey },
      signal,
    );
  } catch (error) {
    if (!(error instanceof PodError) || signal?.aborted) throw error;
    // A node died (or its host stopped answering) while no client followed: a death.
    const rank = Number(/node (\d+)/.exec(error.message)?.[1] ?? 0);
    // "node R (pod P): why" says the node once, in the run's message below.
    const why = describeError(error).replace(/^node \d+ \(pod \S+\): /, '');
    log(ctx, 'error', `run ${run.id}'s cluster ${cluster.id} cannot be followed again: ${why}`);
    handle = { cluster: { id: cluster.id } as ClusterHandle['cluster'], members: [] };
    nodeState(run, rank, 'failed', why);
    firstEnd = {
      kind: 'died',
      rank,
      message: `node ${rank} failed the run: ${why}; the whole cluster is deleted (Runpod cannot replace one node)`,
      died: `cluster ${cluster.id} was found with ${why} when followed again`,
    };
  }
  deps.bus.publish({ type: 'runWatched', runId: run.id });
  const stopped = await runClusterAttempts(
    deps,
    run,
    {
      target,
      start: {
        target,
        keys,
        secretName: hostKeySecretName(run.id),
        gpuTypes: await resolveGpuTypes(ctx, target, signal),
        clientPrivateKey,
      },
      job: trainerJobOf(training, '', target),
      env: {},
      secrets: config === null ? {} : jobSecretsOf(config, deps.env ?? {}, false),
      artifacts: training.artifacts ?? ['output/'],
      costCapUsd: null, // armed on the members already; a new cluster gets what is left
      signal,
    },
    handle,
    firstEnd,
  );
  return done(stopped);
}
