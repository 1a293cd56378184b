/**
 * A member's watchdog refused its cluster's delete with the member's own key (`.pod/cluster_delete`
 * written): noted once in run.json and said, with what still ends the cluster.
 */
import { describeError } from '../errors';
import { log, warn, type PodCtx } from '../pod/context';
import type { ClusterHandle } from '../pod/cluster';
import { CLUSTER_DELETE_FILE } from '../pod/podScripts';
import type { RunRecord } from '../runs/runRecord';
import { within } from './within';

/**
 * Whether a member's watchdog tried to delete the cluster with its own key and was refused (it
 * writes `.pod/cluster_delete`): the first refusal seen is recorded in run.json's cluster and
 * said once, with what still ends the cluster. Nothing once one was recorded; never throws. Each
 * member's read waits at most the request timeout (a frozen host's would wait for the drop).
 */
export async function noteMemberDeleteRefused(
  ctx: PodCtx,
  run: RunRecord,
  handle: ClusterHandle,
  /** A node found dead: not waited for. */
  deadRank: number | null = null,
): Promise<void> {
  const cluster = run.cluster;
  if (!cluster || cluster.id !== handle.cluster.id || cluster.memberDeleteRefused) return;
  const notes = await Promise.all(
    handle.members
      .filter((member) => member.rank !== deadRank)
      .map(async (member) => {
        try {
          const path = `${run.remoteDir}/${CLUSTER_DELETE_FILE}`;
          const read = member.executor.readRange(path, 0, 256);
          const text = (await within(ctx.clock, ctx.timing.requestTimeoutMs, path, read))
            .toString('utf8')
            .trim()
            .split('\n')[0];
          return text ? { rank: member.rank, text } : null;
        } catch {
          return null; // not written (nothing refused), or the node does not answer now
        }
      }),
  );
  const first = notes.find((n) => n !== null);
  if (!first) return;
  const words = first.text.replace(/[^ -~]/g, '?').slice(0, 80);
  cluster.memberDeleteRefused = `node ${first.rank}: ${words}`;
  try {
    ctx.store.saveRun(run);
  } catch (error) {
    log(ctx, 'debug', `cannot record the refused cluster delete: ${describeError(error)}`);
  }
  warn(
    ctx,
    run.id,
    'cluster_delete_refused',
    `node ${first.rank}'s watchdog tried to delete cluster ${cluster.id} with its own key and Runpod refused it (${words}): the members' watchdogs cannot end this cluster; while this client follows it ends it at max_hours and max_cost_usd; should the client stop, remove it with "overbrainer pod rm ${cluster.id}"`,
  );
}
