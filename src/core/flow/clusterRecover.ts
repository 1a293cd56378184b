/**
 * A cluster run whose node died under the job (issue 37): Runpod cannot replace one member, so
 * the whole cluster is deleted and confirmed gone (never a second cluster billing beside one
 * nobody confirmed gone), its attempt closed with what every member cost, and the run made ready
 * to go on on a NEW cluster by the same step as one pod's recovery (../follow/nextAttempt.ts):
 * the newest verified checkpoint streamed home from rank 0, within what is left of max_hours and
 * of the run's cost cap (every earlier cluster's members counted), up to max_recoveries times.
 * The dead cluster's record moves to run.json's `earlierClusters`; `attempts` names each cluster.
 */
import type { RunpodTargetConfig } from '../config/types';
import { endCluster, type ClusterHandle } from '../pod/cluster';
import { failRun, type PodCtx } from '../pod/context';
import { PodError } from '../pod/podError';
import { clusterCostUsd } from '../runs/clusterSpend';
import type { RunAttempt, RunRecord } from '../runs/runRecord';
import type { TrainerJob } from '../train/job';
import { nextAttempt, type NextAttempt, type StepTimes } from '../follow/nextAttempt';

/** A time in run.json's cluster records: to the millisecond, so an estimate never rounds under. */
export function isoMs(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * Ends the run's current cluster and records its deletion (the time Runpod answered the delete);
 * true once confirmed gone.
 */
export async function endRunCluster(
  ctx: PodCtx,
  run: RunRecord,
  clusterId: string,
): Promise<boolean> {
  let answeredMs: number | null = null;
  const gone = await endCluster(ctx, run.id, clusterId, (ms) => (answeredMs = ms));
  if (run.cluster?.id === clusterId) {
    run.cluster.deletedAt = gone ? isoMs(answeredMs ?? ctx.clock.nowMs()) : null;
    for (const node of run.cluster.nodes) {
      if (node.state !== 'failed') node.state = 'ended';
    }
  }
  return gone;
}

/** Closes the run's last attempt on its cluster (its cost: every member's estimate). */
export function closeClusterAttempt(
  run: RunRecord,
  nowMs: number,
  reason: RunAttempt['reason'],
): void {
  const last = run.attempts?.at(-1);
  if (last === undefined || last.endedAt !== null || !run.cluster) return;
  last.endedAt = isoMs(nowMs);
  last.reason = reason;
  last.costUsd = clusterCostUsd(run.cluster, nowMs);
}

/**
 * Node `end.rank` of the run's cluster died under the job. The cluster is deleted whole; then,
 * with max_recoveries > 0, the next attempt is made ready (returned), or the run failed saying
 * why not, and thrown. Null when recovery is off (max_recoveries = 0): the caller fails the run.
 */
export async function afterNodeDeath(
  ctx: PodCtx,
  run: RunRecord,
  handle: ClusterHandle,
  end: { died: string; message: string },
  plan: { target: RunpodTargetConfig; job: TrainerJob },
  steps: StepTimes,
  signal?: AbortSignal,
): Promise<NextAttempt | null> {
  for (const member of handle.members) member.executor.dispose();
  const gone = await endRunCluster(ctx, run, handle.cluster.id);
  ctx.store.saveRun(run);
  const cluster = run.cluster!;
  if (plan.target.maxRecoveries === 0) return null;
  if (!gone) {
    const why = `${end.died}; not recovered: cluster ${cluster.id} could not be confirmed deleted, and a second cluster never bills beside it`;
    failRun(ctx, run, 'recovery_failed', why);
    throw new PodError(
      'pod_gone',
      why,
      `Remove it with "overbrainer pod rm ${cluster.id}" (or in Runpod's console), then train again from the checkpoints in runs/${run.id}/checkpoints/.`,
    );
  }
  const nowMs = ctx.clock.nowMs();
  run.attempts ??= [
    {
      podId: cluster.id,
      startedAt: cluster.createdAt,
      endedAt: null,
      reason: null,
      resumedFromStep: null,
      resumedFromCheckpoint: null,
      costUsd: null,
    },
  ];
  closeClusterAttempt(run, nowMs, 'node_failed');
  const clusters = [...(run.earlierClusters ?? []), cluster];
  const spentUsd = clusters.reduce((sum, c) => sum + clusterCostUsd(c, nowMs), 0);
  const nodes = cluster.nodes.length;
  // The dead cluster joins the earlier ones; the next is recorded once created.
  run.earlierClusters = clusters;
  run.cluster = null;
  ctx.store.saveRun(run);
  return nextAttempt(ctx, run, {
    died: end.died,
    death: 'node_failed',
    cause: new Error(end.message),
    spentUsd,
    usdPerHour: (cluster.costPerHourUsd ?? 0) * nodes,
    on: `a new cluster of ${nodes} nodes`,
    target: plan.target,
    job: plan.job,
    steps,
    signal,
  });
}
