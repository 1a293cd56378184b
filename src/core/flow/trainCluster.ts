/**
 * Train on a target of `nodes` ≥ 2: one run on one Runpod Instant Cluster, the command started by
 * torchrun on every node (issue 37). The cluster is a group of pods (../pod/cluster.ts): created
 * once, every member brought to answer SSH with the run's pinned host key, its own watchdog's
 * ready verdict read and its share of the cost cap armed; a member that is not ready ends the
 * whole cluster, naming it. The run's files cross the user's link once, to rank 0, which feeds
 * the other nodes over the cluster's network (../pod/clusterFiles.ts), each copy verified; the job
 * is started on the others then on rank 0, and the run is followed by rank 0: its end is the run's,
 * any other node whose job fails or whose pod dies ends the run naming that node. Rank 0's results
 * come back verified by SHA-256, every node's job.log under runs/<id>/nodes/<rank>/, then the
 * whole cluster is deleted in one call and its deletion confirmed. Every path out of here ends the
 * cluster: never a node left billing.
 */
import * as fs from 'node:fs';
import type { OverbrainerConfig, RunpodTargetConfig } from '../config/types';
import { describeError } from '../errors';
import { log, hostKeySecretName } from '../pod/context';
import { resolveGpuTypes } from '../pod/gpuChoice';
import { alias, generateRunKeys } from '../pod/keys';
import { endRun } from '../runs/runEnd';
import { type FlowDeps, FlowError, type FlowResult, lockRun, podCtx, publishState } from './deps';
import { checkRunFiles, packRun } from './runFiles';
import { createBudgetedRun } from './budgetedRun';
import type { TrainOptions } from './train';
import { runClusterAttempts, type ClusterStart } from './clusterAttempts';

export { NODES_DIR } from '../runs/store';

/** Starts a run on a cluster of `target.nodes` nodes and follows it to its end. */
export async function trainCluster(
  deps: FlowDeps,
  config: OverbrainerConfig,
  target: RunpodTargetConfig,
  workspaceDir: string,
  secrets: Record<string, string>,
  options: TrainOptions = {},
): Promise<FlowResult> {
  if (options.keepPod) {
    throw new FlowError(
      'bad_option',
      `--keep-pod keeps one pod, but target ${target.name} is a cluster of ${target.nodes} nodes, deleted as one at the run's end`,
      'Drop --keep-pod, or pick a target with nodes = 1.',
    );
  }
  if (options.resumeFrom !== undefined) {
    throw new FlowError(
      'bad_option',
      '--resume-from is not supported on a cluster yet',
      'Train on the cluster without --resume-from, or resume on a target with nodes = 1.',
    );
  }
  const ctx = podCtx(deps);
  // [budget] as for one pod (./budgetedRun.ts): the quote (N nodes) against what is left.
  const { run, budget } = await createBudgetedRun(deps, config, target, false, options.signal);
  // The cluster's total cap: max_cost_usd, or what [budget] leaves (each node holds 1/N of it).
  const costCapUsd = budget === null ? target.maxCostUsd : budget.budgetCapUsd;
  if (budget !== null) log(ctx, budget.fitted ? 'warn' : 'info', budget.line);
  const lock = lockRun(deps, run.id);
  /** What stopping the follow left running, when the signal aborted once the job ran. */
  let stopped: string | null;
  try {
    options.onRun?.(run);
    publishState(deps, run);
    const files = checkRunFiles(config, target, workspaceDir, deps.store.runDir(run.id));
    const env = await packRun(deps, run, workspaceDir, files, null);
    const keys = generateRunKeys(deps.store.sshDir(run.id), alias(run.id));
    const secretName = hostKeySecretName(run.id);
    await ctx.client.createSecret(secretName, keys.hostPrivateB64, { signal: options.signal });
    const gpuTypes = await resolveGpuTypes(ctx, target, options.signal);
    const start: ClusterStart = {
      target,
      keys,
      secretName,
      gpuTypes,
      clientPrivateKey: fs.readFileSync(keys.clientKeyPath),
    };
    stopped = await runClusterAttempts(deps, run, {
      target,
      start,
      job: files.job,
      env,
      secrets,
      artifacts: config.training?.artifacts ?? ['output/'],
      costCapUsd,
      signal: options.signal,
    });
  } catch (error) {
    // Before any cluster (its files, its keys): the run fails here; after, it failed already.
    if (run.state === 'preparing' || run.state === 'running') {
      const cancelled = options.signal?.aborted ?? false;
      endRun(
        run,
        cancelled ? 'cancelled' : 'failed',
        cancelled ? 'cancelled' : 'start_failed',
        cancelled ? 'cancelled before its cluster was created' : describeError(error),
      );
      deps.store.saveRun(run);
      publishState(deps, run);
    }
    throw error;
  } finally {
    lock.dispose();
  }
  return {
    run,
    pod: null,
    ending: null,
    summary:
      stopped ??
      `train: run ${run.id} ${run.state} on ${target.nodes} nodes${run.message ? `; ${run.message}` : ''}${run.state === 'succeeded' ? `; output in runs/${run.id}/output` : ''}`,
  };
}
