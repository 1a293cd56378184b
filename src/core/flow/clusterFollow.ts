/**
 * A cluster run's nodes after they answer SSH: each one's own watchdog verdict and its share of
 * the cost cap (max_cost_usd is the cluster's total: each node's watchdog deletes its node once
 * it cost max_cost_usd / nodes), then the following: the run is followed by rank 0, every node's
 * job and pod watched each tick, its lease renewed; a node whose job fails, whose pod dies or
 * whose host stops answering ends the run, named.
 */
import { describeError } from '../errors';
import { isDead } from '../runpod/api';
import { log, type PodCtx } from '../pod/context';
import type { ClusterHandle, ClusterMember } from '../pod/cluster';
import { PodError } from '../pod/podError';
import {
  CLUSTER_FILE,
  COST_CAP_FILE,
  LEASE_FILE,
  parseWatchdogVerdict,
  SNAPSHOT_AT_FILE,
  VERDICT_READ_MAX_BYTES,
  WATCHDOG_VERDICT,
} from '../pod/podScripts';
import type { RunRecord } from '../runs/runRecord';
import { jobStatus } from '../train/job';

/** Status looks in a row a node may miss before it counts as lost. */
const MISSES_ALLOWED = 3;

function nodeOf(run: RunRecord, rank: number) {
  return run.cluster?.nodes.find((n) => n.rank === rank) ?? null;
}

/**
 * Every member's watchdog verdict `ready` (within `preflightTimeoutMs`), then its share of the
 * cost cap armed. A member not ready throws, naming it: the caller deletes the whole cluster.
 */
export async function memberVerdicts(
  ctx: PodCtx,
  run: RunRecord,
  handle: ClusterHandle,
  /** The cluster's total cost cap (null: none); each node's watchdog holds its 1/N share. */
  costCapUsd: number | null,
  createdMs: number,
  signal?: AbortSignal,
): Promise<void> {
  const nodes = handle.members.length;
  await Promise.all(
    handle.members.map(async (member) => {
      await verdictOf(ctx, run, member, signal);
      // Its watchdog's delete is the cluster's (it also reads the ID from Runpod's answer).
      await member.executor.writeFileAtomic(
        `${run.remoteDir}/${CLUSTER_FILE}`,
        `${handle.cluster.id}\n`,
      );
      const node = nodeOf(run, member.rank);
      if (costCapUsd !== null) {
        const rate = member.pod.costPerHourUsd;
        if (rate === null || rate <= 0) {
          throw new PodError(
            'cost_cap_unset',
            `node ${member.rank} (pod ${member.pod.id}): max_cost_usd could not be armed (Runpod reported no hourly rate): the run is refused and the whole cluster deleted`,
            'Train again; to run without a cost cap, remove max_cost_usd from the target.',
          );
        }
        const shareUsd = costCapUsd / nodes;
        const capAtUnixS = Math.floor(createdMs / 1000 + (shareUsd / rate) * 3600);
        const snapshotAt = Math.max(
          Math.floor(createdMs / 1000),
          capAtUnixS - ctx.timing.snapshotLeadS,
        );
        await member.executor.writeFileAtomic(
          `${run.remoteDir}/${SNAPSHOT_AT_FILE}`,
          `${snapshotAt}\n`,
        );
        await member.executor.writeFileAtomic(
          `${run.remoteDir}/${COST_CAP_FILE}`,
          `${capAtUnixS}\n`,
        );
        if (node) node.costCapAtUnixS = capAtUnixS;
      }
      if (node) node.state = 'ready';
    }),
  );
}

async function verdictOf(
  ctx: PodCtx,
  run: RunRecord,
  member: ClusterMember,
  signal?: AbortSignal,
): Promise<void> {
  const untilMs = ctx.clock.nowMs() + ctx.timing.preflightTimeoutMs;
  const who = `node ${member.rank} (pod ${member.pod.id})`;
  for (;;) {
    let text = '';
    try {
      text = (
        await member.executor.readRange(
          `${run.remoteDir}/${WATCHDOG_VERDICT}`,
          0,
          VERDICT_READ_MAX_BYTES,
        )
      ).toString('utf8');
    } catch (error) {
      if (signal?.aborted) throw error;
    }
    const verdict = parseWatchdogVerdict(text);
    if (verdict?.kind === 'ready') return;
    if (verdict?.kind === 'bootstrap_failed' || verdict?.kind === 'failed') {
      const failed = nodeOf(run, member.rank);
      if (failed) {
        failed.state = 'failed';
        failed.message = `its watchdog said: ${verdict.reason}`;
      }
      throw new PodError(
        verdict.kind === 'failed' ? 'watchdog_refused' : 'bootstrap_failed',
        `${who} is not ready (${verdict.kind === 'failed' ? 'its watchdog cannot delete its pod' : 'its bootstrap failed'}: ${verdict.reason}): the whole cluster is deleted`,
        'Train again; if it repeats, check the image runs bash and curl and that members get a working RUNPOD_API_KEY.',
      );
    }
    if (ctx.clock.nowMs() >= untilMs) {
      const failed = nodeOf(run, member.rank);
      if (failed) {
        failed.state = 'failed';
        failed.message = 'its watchdog gave no verdict';
      }
      throw new PodError(
        'watchdog_refused',
        `${who}'s watchdog gave no verdict in time: the whole cluster is deleted`,
        'Train again; if it repeats, check the image runs bash and curl.',
      );
    }
    await ctx.clock.sleep(ctx.timing.podPollMs, signal);
  }
}

export type ClusterEnd =
  | { kind: 'succeeded' }
  | { kind: 'limit'; cause: 'deadline' | 'cost_cap'; message: string }
  | { kind: 'failed'; message: string }
  | { kind: 'cancelled'; message: string };

/**
 * Follows the run until rank 0's job ends (succeeded when it exits 0), or a node fails it: its
 * job exits non-zero or is lost, its pod is gone or dead, or its host misses
 * {@link MISSES_ALLOWED} status looks in a row. Each tick renews every node's lease.
 */
export async function followCluster(
  ctx: PodCtx,
  run: RunRecord,
  handle: ClusterHandle,
  signal?: AbortSignal,
): Promise<ClusterEnd> {
  const misses = new Map<number, number>();
  const failNode = (rank: number, why: string): ClusterEnd => {
    const node = nodeOf(run, rank);
    if (node) {
      node.state = 'failed';
      node.message = why;
    }
    const message = `node ${rank} failed the run: ${why}; the whole cluster is deleted (Runpod cannot replace one node)`;
    log(ctx, 'error', message);
    return { kind: 'failed', message };
  };
  // The client holds the limits for the whole cluster too: a node's watchdog deletes it only
  // where Runpod lets a member's key delete its cluster.
  const earliest = (values: (number | null)[]): number | null => {
    const set = values.filter((v): v is number => v !== null);
    return set.length === 0 ? null : Math.min(...set);
  };
  const deadlineS = earliest(run.cluster?.nodes.map((n) => n.deadlineUnixS) ?? []);
  const capS = earliest(run.cluster?.nodes.map((n) => n.costCapAtUnixS) ?? []);
  for (;;) {
    if (signal?.aborted)
      return { kind: 'cancelled', message: 'cancelled: the whole cluster was deleted' };
    const nowS = ctx.clock.nowMs() / 1000;
    if (capS !== null && nowS >= capS) {
      const message = 'max_cost_usd reached for the whole cluster: the cluster was deleted';
      return { kind: 'limit', cause: 'cost_cap', message };
    }
    if (deadlineS !== null && nowS >= deadlineS) {
      const message = 'max_hours reached: the cluster was deleted';
      return { kind: 'limit', cause: 'deadline', message };
    }
    const pods = await ctx.client
      .listClusterPods(handle.cluster.id, { signal })
      .catch(() => undefined);
    if (pods === null) return failNode(0, 'the cluster is gone');
    for (const member of handle.members) {
      const pod = pods?.find((p) => p.id === member.pod.id);
      if (pods !== undefined && pod === undefined)
        return failNode(member.rank, `its pod ${member.pod.id} is gone`);
      if (pod && (pod.status === 'TERMINATED' || isDead(pod))) {
        return failNode(member.rank, `its pod ${member.pod.id} is ${pod.status}`);
      }
    }
    let rank0Done = false;
    for (const member of handle.members) {
      try {
        const status = await jobStatus(member.executor, run.remoteDir, {
          signal,
          timeoutMs: ctx.timing.requestTimeoutMs,
        });
        misses.set(member.rank, 0);
        await member.executor.writeFileAtomic(`${run.remoteDir}/${LEASE_FILE}`, '');
        if (status.kind === 'exited' && status.code === 0) {
          if (member.rank === 0) rank0Done = true;
          continue;
        }
        if (status.kind !== 'running') {
          return failNode(
            member.rank,
            status.kind === 'exited'
              ? `its job exited with code ${status.code}`
              : `its job is ${status.kind}`,
          );
        }
      } catch (error) {
        if (signal?.aborted)
          return { kind: 'cancelled', message: 'cancelled: the whole cluster was deleted' };
        const missed = (misses.get(member.rank) ?? 0) + 1;
        misses.set(member.rank, missed);
        if (missed >= MISSES_ALLOWED) {
          return failNode(member.rank, `its host stopped answering (${describeError(error)})`);
        }
      }
    }
    if (rank0Done) return { kind: 'succeeded' };
    try {
      await ctx.clock.sleep(ctx.timing.statusPollMs, signal);
    } catch {
      return { kind: 'cancelled', message: 'cancelled: the whole cluster was deleted' };
    }
  }
}
