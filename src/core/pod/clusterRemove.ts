/**
 * `pod rm` of a run on an Instant Cluster (`pod rm RUN_ID`, `pod rm CLUSTER_ID`, `pod rm
 * MEMBER_POD_ID`): its members cannot be deleted one by one (Runpod refuses the pod calls on a
 * member), so what goes is a whole cluster, deleted in one call and confirmed gone (./cluster.ts
 * `endCluster`). The refusals are the pods' (./podAdmin.ts): a run still starting its cluster, or
 * in progress (or followed by another client), keeps its cluster without `force`; the run's other
 * clusters (an unclear create's, found by the run's cluster name) are strays and go. Forced, a
 * run in progress whose cluster was deleted is saved failed, as for a pod.
 */
import { rfc3339 } from '../clock';
import { describeError } from '../errors';
import type { Cluster } from '../runpod/clusters';
import type { RunRecord } from '../runs/runRecord';
import { endRun } from '../runs/runEnd';
import { log, type PodCtx } from './context';
import { clusterName, endCluster } from './cluster';
import { PodError } from './podError';
import type { RemovedPod } from './podRmSweep';

/** What {@link removeClusterRun} is told of the run by `pod rm`'s common checks. */
export interface ClusterRemoval {
  runId: string;
  /** The run's record (null when runs/ has none: forced). */
  run: RunRecord | null;
  force: boolean;
  /** Preparing or running. */
  runInProgress: boolean;
  /** Who else follows the run (its lock's holder), or null. */
  follower: string | null;
  /** Only this cluster (`pod rm CLUSTER_ID`), or null for all of the run's. */
  only: string | null;
  /** The member pods of every cluster deleted, as `pod rm` reports them. */
  removed: RemovedPod[];
  /** The message a forced `pod rm` leaves in the run.json of a run in progress. */
  failedMessage: string;
}

/** The prefix of every cluster name of run `runId` (its create attempts: `-c1`, `-c2`…). */
function namePrefix(runId: string): string {
  return clusterName(runId, 0).replace(/0$/, '');
}

/** Whether cluster `name` is one of run `runId`'s creates. */
export function isClusterOfRun(name: string, runId: string): boolean {
  const prefix = namePrefix(runId);
  return name.startsWith(prefix) && /^\d+$/.test(name.slice(prefix.length));
}

/** The run an overbrainer cluster name belongs to, or null. */
export function runOfClusterName(name: string): string | null {
  const match = /^overbrainer-(.+)-c\d+$/.exec(name);
  return match?.[1] ?? null;
}

/**
 * Deletes the run's clusters under `pod rm`'s rules; returns null, a refusal
 * (`PodError`-like error from `refuse`), or the first failure. Never throws.
 */
export async function removeClusterRun(
  ctx: PodCtx,
  r: ClusterRemoval,
  refuse: (kind: 'still_starting' | 'run_still_running', message: string, hint: string) => unknown,
): Promise<unknown> {
  const recorded = r.run?.cluster ?? null;
  const recordedId = recorded !== null && recorded.deletedAt === null ? recorded.id : null;
  const inProgress = r.runInProgress || r.follower !== null;
  const keep = inProgress && !r.force;
  if (keep && recordedId === null && (r.only === null || r.only === recorded?.id)) {
    return refuse(
      'still_starting',
      `run ${r.runId} is still starting its cluster; wait for it, or use \`overbrainer train cancel ${r.runId}\` once it runs, or \`pod rm ${r.runId} --force\``,
      'A cluster being created is deleted by its own run if it fails; nothing was deleted.',
    );
  }
  let listed: Cluster[];
  try {
    listed = (await ctx.client.listClusters()).filter((c) => isClusterOfRun(c.name, r.runId));
  } catch (error) {
    if (r.run !== null) return error;
    // A forced pod rm of a run not in runs/ goes on to its pods; this look is said to have failed.
    log(ctx, 'warn', `cannot list the clusters of run ${r.runId}: ${describeError(error)}`);
    return null;
  }
  const ids = [
    ...new Set([...(recordedId === null ? [] : [recordedId]), ...listed.map((c) => c.id)]),
  ];
  let failed: unknown = null;
  const deleted: string[] = [];
  let recordedGone = false;
  for (const id of ids) {
    if (r.only !== null && id !== r.only) continue;
    if (id === recordedId && keep) continue;
    const members =
      id === recordedId
        ? (recorded?.nodes.map((n) => n.podId) ?? [])
        : ((await ctx.client.listClusterPods(id).catch(() => null))?.map((p) => p.id) ?? []);
    log(
      ctx,
      'info',
      `deleting cluster ${id} of run ${r.runId}${id === recordedId ? '' : ' (a stray)'}`,
    );
    if (!(await endCluster(ctx, r.runId, id))) {
      failed ??= new PodError(
        'not_deleted',
        `cluster ${id} of run ${r.runId} could not be confirmed deleted: it may still bill`,
        `Run "overbrainer pod rm ${id}" again, or delete it in Runpod's console.`,
      );
      continue;
    }
    deleted.push(id);
    for (const podId of members) {
      r.removed.push({ podId, alreadyGone: false, uptimeMs: null, estimatedSpendUsd: null });
    }
    if (id === recordedId) recordedGone = true;
  }
  if (recordedGone) {
    try {
      const fresh = ctx.store.loadRun(r.runId);
      if (fresh.cluster) {
        fresh.cluster.deletedAt = rfc3339(ctx.clock.nowMs());
        for (const node of fresh.cluster.nodes) if (node.state !== 'failed') node.state = 'ended';
      }
      if (r.runInProgress) endRun(fresh, 'failed', 'pod_removed', r.failedMessage);
      ctx.store.saveRun(fresh);
      if (r.runInProgress) {
        ctx.bus.publish({
          type: 'runState',
          runId: r.runId,
          state: 'failed',
          message: r.failedMessage,
          cause: 'pod_removed',
        });
      }
    } catch (error) {
      log(ctx, 'warn', `cannot record the run's cluster deleted: ${describeError(error)}`);
      failed ??= error;
    }
  }
  if (failed !== null) return failed;
  if (keep && recordedId !== null && (r.only === null || r.only === recordedId)) {
    const others =
      deleted.length === 0 ? '' : `, and its other clusters ${deleted.join(', ')} were deleted`;
    const subject =
      r.runInProgress || r.follower === null
        ? `run ${r.runId} is still running`
        : `run ${r.runId} is followed by another client (${r.follower})`;
    return refuse(
      'run_still_running',
      `${subject}: its cluster ${recordedId} was kept${others}; stop it with \`overbrainer train cancel ${r.runId}\` first, or pass --force`,
      `Cancel it first (\`overbrainer train cancel ${r.runId}\`); \`overbrainer pod rm ${r.runId} --force\` deletes its cluster now, losing what is not home.`,
    );
  }
  return null;
}

/** What `pod rm` reports (./podAdmin.ts `Removal`). */
export interface ClusterRemovalResult {
  runId: string;
  removed: RemovedPod[];
  error: unknown;
}

/**
 * `pod rm CLUSTER_ID` for an ID Runpod lists as a cluster: the run its name names decides when
 * runs/ holds it (`viaRun`, that run's rules for this cluster only); a cluster of a run not in
 * runs/ is refused without `force` (another checkout may own it); one not named by overbrainer
 * goes at once. Each delete is confirmed. Null when no cluster has that ID.
 */
export async function removeClusterById(
  ctx: PodCtx,
  id: string,
  force: boolean,
  viaRun: (runId: string) => Promise<ClusterRemovalResult> | null,
  notInRuns: (runId: string) => unknown,
): Promise<ClusterRemovalResult | null> {
  let cluster: Cluster | undefined;
  try {
    cluster = (await ctx.client.listClusters()).find((c) => c.id === id);
  } catch (error) {
    return { runId: id, removed: [], error };
  }
  if (cluster === undefined) return null;
  const runId = runOfClusterName(cluster.name);
  if (runId !== null) {
    const ran = viaRun(runId);
    if (ran !== null) return ran;
    if (!force) return { runId, removed: [], error: notInRuns(runId) };
  }
  const members = ((await ctx.client.listClusterPods(id).catch(() => null)) ?? []).map((p) => p.id);
  if (!(await endCluster(ctx, runId ?? '', id))) {
    const error = new PodError(
      'not_deleted',
      `cluster ${id} could not be confirmed deleted: it may still bill`,
      `Run "overbrainer pod rm ${id}" again, or delete it in Runpod's console.`,
    );
    return { runId: runId ?? id, removed: [], error };
  }
  const removed = members.map((podId) => ({
    podId,
    alreadyGone: false,
    uptimeMs: null,
    estimatedSpendUsd: null,
  }));
  return { runId: runId ?? id, removed, error: null };
}
