/**
 * Cancel of a run on a cluster that no client follows (issue 37): the whole cluster deleted and
 * confirmed gone (Runpod deletes a member only with its cluster; the job dies with it), the run
 * recorded cancelled. What rank 0 streamed home (checkpoints) stays; nothing more is retrieved.
 * A run another client follows is cancelled there (Cancel Run in its VS Code window), or here once
 * that client stopped following (its Ctrl-C): this client says so instead of acting beside it.
 */
import type { RunLock } from '../runs/lock';
import type { RunRecord } from '../runs/runRecord';
import { endRun } from '../runs/runEnd';
import { closeClusterAttempt, endRunCluster } from './clusterRecover';
import { FlowError, type FlowDeps, type FlowResult, podCtx, publishState } from './deps';

export async function cancelCluster(
  deps: FlowDeps,
  run: RunRecord,
  lock: RunLock | null,
): Promise<FlowResult> {
  const ctx = podCtx(deps);
  const cluster = run.cluster!;
  if (lock === null) {
    const holder = deps.store.lockHolder(run.id);
    throw new FlowError(
      'followed_elsewhere',
      `run ${run.id} on cluster ${cluster.id} is followed by another client${holder ? ` (${holder.owner}, pid ${holder.pid})` : ''}`,
      `Cancel it there (Cancel Run in that VS Code window), or stop that client following (Ctrl-C) and run \`overbrainer train cancel ${run.id}\` again.`,
    );
  }
  let gone = cluster.deletedAt !== null;
  if (!gone) {
    gone = await endRunCluster(ctx, run, cluster.id);
    closeClusterAttempt(run, deps.clock.nowMs(), null);
  }
  const message = gone
    ? 'cancelled: the whole cluster was deleted'
    : `cancelled, but cluster ${cluster.id} could not be confirmed deleted: remove it with "overbrainer pod rm ${cluster.id}"`;
  endRun(run, 'cancelled', 'cancelled', message);
  deps.store.saveRun(run);
  publishState(deps, run);
  return {
    run,
    pod: null,
    ending: null,
    summary: `cancel: run ${run.id} ${message}${gone ? `; its checkpoints home stay in runs/${run.id}/checkpoints` : ''}`,
  };
}
