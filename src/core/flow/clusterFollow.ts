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
import { HOST_MISSES_ALLOWED, type ClusterHandle, type ClusterMember } from '../pod/cluster';
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
import { MetricsFollower } from '../train/follow';
import { watchCheckpoints } from '../pod/checkpointStream';
import { within } from './within';
import { noteMemberDeleteRefused } from './clusterRefusal';

/**
 * Status looks in a row a node may miss before it counts as lost. Each look (its connect, its
 * channel, the lease it renews, the members' refusal notes read beside it) waits at most
 * `requestTimeoutMs` and they come every `statusPollMs`: a hung host is found within
 * MISSES_ALLOWED × (requestTimeoutMs + statusPollMs), 96 s in production (the promise: 2 min).
 */
export const MISSES_ALLOWED = HOST_MISSES_ALLOWED;

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
  /**
   * A node died under the job (its pod gone or dead, its host stopped answering, its job
   * killed): the run may go on on a new cluster. `died` names it for the user.
   */
  | { kind: 'died'; rank: number; message: string; died: string }
  | { kind: 'cancelled'; message: string }
  /** The follow was aborted once the job ran: the cluster trains on, nothing deleted. */
  | { kind: 'stopped'; message: string };

export interface FollowClusterOptions {
  /** Where rank 0's metrics file is followed from (a recovered run's starts with its curve). */
  fromOffset?: number;
  /** Most one checkpoint streamed home brings (GB): the target's `max_retrieve_gb`. */
  maxRetrieveGb?: number;
  signal?: AbortSignal;
}

/**
 * Follows the run until rank 0's job ends (succeeded when it exits 0), or a node ends it: its
 * pod is gone or dead, its host misses {@link MISSES_ALLOWED} status looks in a row, or its job
 * was killed (a death: `died`), or its job exits non-zero (`failed`, once a second look found no
 * node dead: a node's death makes torchrun fail on the others too). Each tick renews every
 * node's lease. Meanwhile rank 0's metrics are published as they come (the chart, the ETA) and
 * its checkpoints streamed home, verified, as for one pod.
 */
export async function followCluster(
  ctx: PodCtx,
  run: RunRecord,
  handle: ClusterHandle,
  options: FollowClusterOptions = {},
): Promise<ClusterEnd> {
  const { signal } = options;
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  signal?.addEventListener('abort', onAbort, { once: true });
  const rank0 = handle.members[0]!;
  const follower = new MetricsFollower({
    executor: rank0.executor,
    runId: run.id,
    runDir: run.remoteDir,
    bus: ctx.bus,
    clock: ctx.clock,
    timing: ctx.timing,
    fromOffset: options.fromOffset ?? 0,
  });
  // Both run until `stop` and never reject: the nodes' loop below decides the run's end.
  void follower.outcome(stop.signal).catch(() => undefined);
  void watchCheckpoints(ctx, rank0.executor, run, stop.signal, undefined, options.maxRetrieveGb);
  try {
    return await watchNodes(ctx, run, handle, signal);
  } finally {
    stop.abort();
    signal?.removeEventListener('abort', onAbort);
  }
}

/** The earliest of the members' values that are set (a deadline, a cost cap), or null. */
function earliest(values: (number | null)[]): number | null {
  const set = values.filter((v): v is number => v !== null);
  return set.length === 0 ? null : Math.min(...set);
}

/**
 * What aborting the follow of a running job means (a VS Code window closing, Ctrl-C): stop
 * following only, as for one pod. The members' watchdogs hold the run's deadline once the lease
 * this client renewed runs out, and `train attach` follows it again. Only where a member's
 * watchdog was refused its cluster delete does nothing else end the cluster: then the abort
 * deletes it, and says so.
 */
function abortedEnd(run: RunRecord, handle: ClusterHandle, leaseEndMs: number): ClusterEnd {
  if (run.cluster?.memberDeleteRefused) {
    return {
      kind: 'cancelled',
      message: `cancelled: the whole cluster was deleted (no client would follow it, and its members' watchdogs cannot delete it: ${run.cluster.memberDeleteRefused})`,
    };
  }
  const deadlineS = earliest(run.cluster?.nodes.map((n) => n.deadlineUnixS) ?? []);
  const deadlineMs = deadlineS === null ? null : deadlineS * 1000;
  const when =
    deadlineMs === null
      ? 'its deadline'
      : leaseEndMs > deadlineMs
        ? `${new Date(leaseEndMs).toISOString()}, when the lease renewed last runs out (its deadline has passed)`
        : `its deadline, ${new Date(deadlineMs).toISOString()}`;
  return {
    kind: 'stopped',
    message:
      `stopped following run ${run.id}: the job and cluster ${handle.cluster.id} keep running; attach again with ` +
      `\`overbrainer train attach ${run.id}\`, or remove the cluster with \`overbrainer pod rm ${run.id}\`; ` +
      `if nobody follows, its members' watchdogs delete the cluster at ${when}`,
  };
}

async function watchNodes(
  ctx: PodCtx,
  run: RunRecord,
  handle: ClusterHandle,
  signal?: AbortSignal,
): Promise<ClusterEnd> {
  const misses = new Map<number, number>();
  let lastStep: number | null = null;
  const steps = ctx.bus.on((event) => {
    if (event.type === 'metric' && event.runId === run.id) lastStep = event.metric.step;
  });
  const markNode = (rank: number, why: string): void => {
    const node = nodeOf(run, rank);
    if (node) {
      node.state = 'failed';
      node.message = why;
    }
  };
  const failNode = (rank: number, why: string): ClusterEnd => {
    markNode(rank, why);
    const message = `node ${rank} failed the run: ${why}; the whole cluster is deleted (Runpod cannot replace one node)`;
    log(ctx, 'error', message);
    return { kind: 'failed', message };
  };
  const nodeDied = (rank: number, why: string, stopped?: 'exited' | 'gone'): ClusterEnd => {
    markNode(rank, why);
    // Its pod EXITED: Runpod bills its disk only from then on; gone (TERMINATED, 404): nothing.
    const node = stopped ? nodeOf(run, rank) : null;
    if (node) node.gpuStoppedAt = new Date(ctx.clock.nowMs()).toISOString();
    if (node && stopped === 'gone') node.endedAt = node.gpuStoppedAt;
    const message = `node ${rank} failed the run: ${why}; the whole cluster is deleted (Runpod cannot replace one node)`;
    const at = lastStep === null ? 'before its first step' : `at step ${lastStep}`;
    const pod = handle.members.find((m) => m.rank === rank)?.pod.id ?? '?';
    const died = `node ${rank} (pod ${pod}) of cluster ${handle.cluster.id} died ${at} (${why})`;
    log(ctx, 'error', message);
    return { kind: 'died', rank, message, died };
  };
  const aborted = (): ClusterEnd =>
    abortedEnd(run, handle, ctx.clock.nowMs() + ctx.timing.leaseTtlMs);
  // The client holds the limits for the whole cluster too: a node's watchdog deletes it only
  // where Runpod lets a member's key delete its cluster.
  const deadlineS = earliest(run.cluster?.nodes.map((n) => n.deadlineUnixS) ?? []);
  const capS = earliest(run.cluster?.nodes.map((n) => n.costCapAtUnixS) ?? []);
  const timeoutMs = ctx.timing.requestTimeoutMs;
  /** The cluster's pods: a node's end when one is gone or dead, else null. */
  const lookAtPods = async (): Promise<ClusterEnd | null> => {
    // Bounded as a look is (unknown when late): a slow API cannot hold up the nodes' looks.
    const listed = ctx.client.listClusterPods(handle.cluster.id, { signal });
    const pods = await within(ctx.clock, timeoutMs, 'pods', listed).catch(() => undefined);
    if (pods === null) {
      for (const member of handle.members.slice(1)) {
        const node = nodeOf(run, member.rank);
        if (node) node.gpuStoppedAt = node.endedAt = new Date(ctx.clock.nowMs()).toISOString();
      }
      return nodeDied(0, `its cluster ${handle.cluster.id} is gone`, 'gone');
    }
    for (const member of handle.members) {
      const pod = pods?.find((p) => p.id === member.pod.id);
      if (pods !== undefined && pod === undefined)
        return nodeDied(member.rank, `its pod ${member.pod.id} is gone`, 'gone');
      if (pod && (pod.status === 'TERMINATED' || isDead(pod))) {
        const stopped = pod.status === 'TERMINATED' ? 'gone' : 'exited';
        return nodeDied(member.rank, `its pod ${member.pod.id} is ${pod.status}`, stopped);
      }
    }
    return null;
  };
  /** When the members' `.pod/cluster_delete` were last looked at. */
  let refusalLookMs = -Infinity;
  /** A node's job failed at the last look with no node dead: looked at once more first. */
  let failedSeen = false;
  try {
    for (;;) {
      if (signal?.aborted) return aborted();
      const nowS = ctx.clock.nowMs() / 1000;
      if (capS !== null && nowS >= capS) {
        const message = 'max_cost_usd reached for the whole cluster: the cluster was deleted';
        return { kind: 'limit', cause: 'cost_cap', message };
      }
      if (deadlineS !== null && nowS >= deadlineS) {
        const message = 'max_hours reached: the cluster was deleted';
        return { kind: 'limit', cause: 'deadline', message };
      }
      const podsEnd = await lookAtPods();
      if (podsEnd !== null) return podsEnd;
      // The members' refusal notes read beside the looks, each bounded as a look is: a host that
      // stopped answering cannot hold the looks up (an SFTP read of it ends only at the drop).
      const refusals =
        ctx.clock.nowMs() - refusalLookMs >= ctx.timing.leaseTickMs
          ? noteMemberDeleteRefused(ctx, run, handle)
          : undefined;
      if (refusals) refusalLookMs = ctx.clock.nowMs();
      // Every node looked at together: a host that stops answering holds up only its own look,
      // and that for the request timeout at most, whatever it waits on (connect, channel, kill).
      const [looks] = await Promise.all([
        Promise.all(
          handle.members.map(async (member) => {
            try {
              // The status and the lease it renews, together: a host that freezes between them
              // misses this look, it does not make it twice as long.
              const what = `node ${member.rank}'s job status and lease`;
              const looked = (async () => {
                const status = await jobStatus(member.executor, run.remoteDir, {
                  signal,
                  timeoutMs,
                });
                await member.executor.writeFileAtomic(`${run.remoteDir}/${LEASE_FILE}`, '');
                return status;
              })();
              const status = await within(ctx.clock, timeoutMs, what, looked);
              misses.set(member.rank, 0);
              return { member, status, error: null };
            } catch (error) {
              misses.set(member.rank, (misses.get(member.rank) ?? 0) + 1);
              return { member, status: null, error };
            }
          }),
        ),
        refusals,
      ]);
      if (signal?.aborted) return aborted();
      let rank0Done = false;
      let failed: { rank: number; why: string } | null = null;
      /** A node's first missed look, or a job's first failure: the pods are looked at at once. */
      let sign = false;
      for (const { member, status, error } of looks) {
        if (status === null) {
          const missed = misses.get(member.rank) ?? 0;
          if (missed >= MISSES_ALLOWED) {
            return nodeDied(member.rank, `its host stopped answering (${describeError(error)})`);
          }
          if (missed === 1) sign = true;
          continue;
        }
        if (status.kind === 'running') continue;
        if (status.kind === 'exited' && status.code === 0) {
          if (member.rank === 0) rank0Done = true;
          continue;
        }
        // Killed (no exit code written, or a signal's 128 + N): the node's death, not the job's.
        if (status.kind === 'lost' || (status.kind === 'exited' && status.code >= 128)) {
          const how =
            status.kind === 'lost' ? 'it is gone without an exit code' : `exit ${status.code}`;
          return nodeDied(member.rank, `its job was killed (${how})`);
        }
        failed ??= {
          rank: member.rank,
          why:
            status.kind === 'exited'
              ? `its job exited with code ${status.code}`
              : `its job is ${status.kind}`,
        };
      }
      if (failed !== null) {
        if (failedSeen) return failNode(failed.rank, failed.why);
        failedSeen = true;
        sign = true;
      } else if (rank0Done) {
        return { kind: 'succeeded' };
      }
      // A node whose look failed or whose job failed may be dead: its pod is looked at now, not a
      // status poll later (a dead member bills to the look that finds it). Once per sign; the
      // misses and the failed job's second look keep the poll's pace.
      if (sign) {
        const signEnd = await lookAtPods();
        if (signEnd !== null) return signEnd;
      }
      // A node's connection that drops (its pod stopped or gone) ends the pause: pods looked at now.
      const dropped = new AbortController();
      const undo = handle.members.map((m) => m.executor.onDrop(() => dropped.abort()));
      try {
        const pause = signal ? AbortSignal.any([signal, dropped.signal]) : dropped.signal;
        await ctx.clock.sleep(ctx.timing.statusPollMs, pause);
      } catch {
        if (signal?.aborted || !dropped.signal.aborted) return aborted();
      } finally {
        undo.forEach((u) => u());
      }
    }
  } finally {
    steps.dispose();
  }
}
