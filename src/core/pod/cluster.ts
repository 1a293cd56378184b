/**
 * A run's Instant Cluster as ONE group of member pods: created once (a create with no clear answer
 * is found again by its unique name before anything is sent again), every member brought to
 * answer SSH with the run's pinned host key, and ended as one. Never a node left behind: when any
 * member fails to come up (it dies, or does not answer SSH with the pinned key in time) the whole
 * cluster is deleted — Runpod cannot replace one member — and its deletion confirmed by looking
 * again; a cluster that cannot be confirmed gone is said, with the command that removes it.
 *
 * Each member is a pod like any other: what a single pod's lifecycle does to its pod (watch,
 * lease, end) is done to each member by the same code; this file holds only what is the group's.
 */
import { isAbortError } from '../clock';
import { describeError } from '../errors';
import { isDead, type Pod } from '../runpod/api';
import { ApiError } from '../runpod/apiErrors';
import { createClusterBody, type Cluster, type CreateClusterParams } from '../runpod/clusters';
import { ExecError } from '../exec/executor';
import { SshExecutor } from '../exec/ssh';
import { log, warn, type PodCtx } from './context';
import { PodError } from './podError';
import { minutes } from './podReady';

/** What the group's steps use of a run's context. */
export type ClusterCtx = Pick<PodCtx, 'client' | 'bus' | 'clock' | 'timing'>;

/** Cluster creates tried (each a new name) when none went answered and none was found. */
export const CLUSTER_CREATE_TRIES = 2;
const CREATE_TRIES = CLUSTER_CREATE_TRIES;
/** Deletes sent before a cluster that still shows is said to be a possible stray. */
const DELETE_TRIES = 3;
/**
 * Looks in a row a node of a running cluster may miss (its host does not answer) before it counts
 * as lost: the follow's status looks, and a client's SSH connects when it follows the run again.
 */
export const HOST_MISSES_ALLOWED = 3;

export interface ClusterPlan {
  runId: string;
  /**
   * The number in the first create's name (`overbrainer-<run>-c<n>`; default 1): a recovery's
   * cluster gets names of its own, never one an earlier cluster of the run had.
   */
  firstName?: number;
  /** What every member is made of (the same for all: Runpod's cluster create has one env). */
  create: Omit<CreateClusterParams, 'name'>;
  /** The members' host public key (OpenSSH line): nothing is sent to a host with another. */
  hostPublicKey: string;
  /** The run's client key, which every member authorizes. */
  clientPrivateKey: Buffer;
}

/** One node of a ready cluster: its pod, rank, private address and SSH session. */
export interface ClusterMember {
  rank: number;
  pod: Pod;
  /** Its address on the cluster's private network. */
  ip: string | null;
  executor: SshExecutor;
}

export interface ClusterHandle {
  cluster: Cluster;
  /** Every member by rank; rank 0 is the primary. */
  members: ClusterMember[];
}

/** The unique name of a run's cluster create (found again by it after an unanswered create). */
export function clusterName(runId: string, attempt: number): string {
  return `overbrainer-${runId}-c${attempt}`;
}

/**
 * Creates the run's cluster and brings every member to answer SSH with the pinned host key. Any
 * member that does not come up ends the whole cluster before this throws: nothing of it bills on.
 */
export async function startCluster(
  ctx: ClusterCtx,
  plan: ClusterPlan,
  signal?: AbortSignal,
  /**
   * Told once the cluster exists, before its members are waited for (its record is written then),
   * with when its create's bytes were about to leave this client (this clock, ms): Runpod made no
   * member before.
   */
  onCreated?: (cluster: Cluster, sentMs: number) => void,
  /** Told when a cluster that did not come up was ended: gone, and when its delete was answered. */
  onEnded?: (gone: boolean, answeredMs: number | null) => void,
  /** Told as each member answers SSH (rank 0's upload goes then, beside the others' boots). */
  onConnected?: (member: ClusterMember) => void,
): Promise<ClusterHandle> {
  const sent = new Map<string, number>();
  const cluster = await createCluster(ctx, plan, sent, signal);
  onCreated?.(cluster, sent.get(cluster.name) ?? Math.min(...sent.values()));
  log(
    ctx,
    'info',
    `cluster ${cluster.id} (${cluster.name}): ${cluster.podCount} nodes of ${cluster.gpuCountPerPod} × ${cluster.gpuTypeId} created`,
  );
  try {
    const members = await membersReady(ctx, plan, cluster, signal, null, onConnected);
    return { cluster, members };
  } catch (error) {
    // Shielded from the abort: a cluster that did not come up goes whatever the user pressed.
    let answeredMs: number | null = null;
    const gone = await endCluster(ctx, plan.runId, cluster.id, (ms) => (answeredMs = ms));
    onEnded?.(gone, answeredMs);
    const why = isAbortError(error) ? 'the start was interrupted' : describeError(error);
    throw new PodError(
      error instanceof PodError ? error.kind : 'exec',
      `cluster ${cluster.id} did not come up (${why}): ${gone ? 'the whole cluster was deleted' : 'its deletion could not be confirmed'}`,
      gone
        ? 'Train again; another GPU type or data center may have room for every node.'
        : `Remove it with "overbrainer pod rm ${cluster.id}" (or in Runpod's console): it may be billing.`,
      { cause: error },
    );
  }
}

/**
 * The create, never sent twice blindly: an unanswered one is looked for by its name first. `sent`
 * gets each create's name and when its bytes were about to leave (when it was called, until then).
 */
async function createCluster(
  ctx: ClusterCtx,
  plan: ClusterPlan,
  sent: Map<string, number>,
  signal?: AbortSignal,
): Promise<Cluster> {
  const first = plan.firstName ?? 1;
  for (let attempt = first; attempt < first + CREATE_TRIES; attempt++) {
    signal?.throwIfAborted();
    const name = clusterName(plan.runId, attempt);
    try {
      sent.set(name, ctx.clock.nowMs());
      return await ctx.client.createCluster(createClusterBody({ ...plan.create, name }), {
        signal,
        onSending: (atMs) => sent.set(name, atMs),
      });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (error.kind === 'capacity' || error.kind === 'forbidden') {
        throw new PodError('no_capacity', error.message, nodesHint(plan), { cause: error });
      }
      if (error.kind === 'no_credits') {
        throw new PodError(
          'no_credits',
          error.message,
          'Add funds in the Runpod console, then train again.',
          {
            cause: error,
          },
        );
      }
      if (error.kind !== 'ambiguous' && error.kind !== 'rate_limited') throw PodError.api(error);
      log(
        ctx,
        'warn',
        `the create of cluster ${name} got no clear answer: looking for it by its name`,
      );
      const found = await findByName(ctx, plan.runId, name, error.retryAfterMs, signal);
      if (found) return found;
    }
  }
  throw new PodError(
    'unanswered',
    `Runpod did not answer ${CREATE_TRIES} cluster creates of run ${plan.runId}, and no cluster of them was found by its name`,
    `Check "overbrainer pod ls" once Runpod answers, and remove any cluster of run ${plan.runId} with "overbrainer pod rm CLUSTER_ID".`,
  );
}

function nodesHint(plan: ClusterPlan): string {
  return plan.create.podCount > 8
    ? `Runpod's self-serve accounts get at most 8 nodes: ask Runpod's sales for ${plan.create.podCount}, or train on fewer.`
    : 'Train again later, or with another GPU type or data center that has room for every node.';
}

/** Twice (after Runpod's wait, then a longer one): the cluster of that name, or null. */
async function findByName(
  ctx: ClusterCtx,
  runId: string,
  name: string,
  firstWaitMs: number | undefined,
  signal?: AbortSignal,
): Promise<Cluster | null> {
  for (const waitMs of [
    Math.max(firstWaitMs ?? 0, ctx.timing.reconcileFirstWaitMs),
    ctx.timing.reconcileSecondWaitMs,
  ]) {
    await ctx.clock.sleep(waitMs, signal);
    let found: Cluster[];
    try {
      found = await ctx.client.listClusters({ name, signal });
    } catch (error) {
      // Never a second create while the first may exist and cannot be looked for.
      throw new PodError(
        'unanswered',
        `the create of cluster ${name} got no clear answer and the clusters cannot be listed (${describeError(error)}): it may exist`,
        `Check "overbrainer pod ls" once Runpod answers, and remove any cluster of run ${runId} with "overbrainer pod rm CLUSTER_ID".`,
        { cause: error },
      );
    }
    const [mine, ...more] = found;
    // One name, one attempt: a second of the same name cannot be the run's, nor left billing.
    for (const extra of more) await endCluster(ctx, runId, extra.id);
    if (mine) return mine;
  }
  return null;
}

/**
 * The run's cluster `clusterId`, created earlier (a client following the run again after a
 * restart): every member connected again with the pinned host key, as at its start. Throws a
 * PodError `pod_gone` when the cluster or a member is gone or dead, `exec` when a member listed
 * running fails {@link HOST_MISSES_ALLOWED} SSH connects in a row (its host stopped answering:
 * its members were all up, so this is no boot to wait out; each connect waits at most
 * `connectTimeoutMs`, one every `podPollMs`: 45 s in production) or publishes no endpoint
 * within `readyTimeoutMs`.
 */
export async function reconnectCluster(
  ctx: ClusterCtx,
  clusterId: string,
  keys: Pick<ClusterPlan, 'hostPublicKey' | 'clientPrivateKey'>,
  signal?: AbortSignal,
): Promise<ClusterHandle> {
  const cluster = await ctx.client.getCluster(clusterId, { signal });
  if (cluster === null) throw new PodError('pod_gone', `its cluster ${clusterId} is gone`);
  return {
    cluster,
    members: await membersReady(ctx, keys, cluster, signal, HOST_MISSES_ALLOWED),
  };
}

/**
 * Every member listed, running, and answering SSH with the pinned host key (within
 * `readyTimeoutMs`); a member that dies, or a cluster that is gone, fails at once; with
 * `silentAfter`, so does a member whose host misses that many SSH connects in a row.
 */
async function membersReady(
  ctx: ClusterCtx,
  plan: Pick<ClusterPlan, 'hostPublicKey' | 'clientPrivateKey'>,
  cluster: Cluster,
  signal?: AbortSignal,
  silentAfter: number | null = null,
  onConnected?: (member: ClusterMember) => void,
): Promise<ClusterMember[]> {
  const untilMs = ctx.clock.nowMs() + ctx.timing.readyTimeoutMs;
  const connected = new Map<number, ClusterMember>();
  const why = new Map<number, string>();
  const misses = new Map<number, number>();
  try {
    for (;;) {
      const pods = await ctx.client
        .listClusterPods(cluster.id, { signal })
        .catch((error: unknown) => {
          if (signal?.aborted) throw error;
          why.set(-1, `listing its nodes failed: ${describeError(error)}`);
          return undefined;
        });
      if (pods === null) throw new PodError('pod_gone', `cluster ${cluster.id} is gone`);
      const reachable: { rank: number; pod: Pod; ssh: NonNullable<Pod['sshDirect']> }[] = [];
      for (const pod of pods ?? []) {
        const rank = pod.cluster?.rank ?? null;
        if (rank === null) continue;
        if (pod.status === 'TERMINATED' || isDead(pod)) {
          throw new PodError('pod_gone', `node ${rank} (pod ${pod.id}) is ${pod.status}`, null, {
            podStatus: pod.status,
          });
        }
        if (connected.has(rank)) continue;
        if (pod.sshDirect === null) {
          why.set(rank, 'it published no SSH endpoint');
          continue;
        }
        reachable.push({ rank, pod, ssh: pod.sshDirect });
      }
      // Every member's connect at once: none waits for another's handshake.
      const tries = await Promise.allSettled(
        reachable.map(async ({ rank, pod, ssh }) => {
          try {
            const executor = await SshExecutor.connect({
              host: ssh.host,
              port: ssh.port,
              username: ssh.username,
              privateKey: plan.clientPrivateKey,
              hostPublicKey: plan.hostPublicKey,
              clock: ctx.clock,
              timing: ctx.timing,
              signal,
              onLog: (line) => log(ctx, 'debug', `node ${rank}: ${line}`),
            });
            const member = { rank, pod, ip: pod.cluster?.ip ?? null, executor };
            connected.set(rank, member);
            why.delete(rank);
            onConnected?.(member);
          } catch (error) {
            if (signal?.aborted) throw error;
            const otherKey = error instanceof ExecError && error.kind === 'host_key';
            why.set(
              rank,
              otherKey
                ? `${ssh.host}:${ssh.port} presented another host key (nothing was sent to it)`
                : `SSH failed: ${describeError(error)}`,
            );
            const missed = otherKey ? 0 : (misses.get(rank) ?? 0) + 1;
            misses.set(rank, missed);
            if (silentAfter !== null && missed >= silentAfter) {
              throw new PodError(
                'exec',
                `node ${rank} (pod ${pod.id}): its host stopped answering (${missed} SSH connects in a row failed: ${describeError(error)})`,
              );
            }
          }
        }),
      );
      const failed = tries.find((t): t is PromiseRejectedResult => t.status === 'rejected');
      if (failed) throw failed.reason;
      if (connected.size === cluster.podCount) {
        return [...connected.values()].sort((a, b) => a.rank - b.rank);
      }
      if (ctx.clock.nowMs() >= untilMs) {
        const missing = Array.from({ length: cluster.podCount }, (_, rank) => rank).filter(
          (rank) => !connected.has(rank),
        );
        throw new PodError(
          'exec',
          `node ${missing.join(', ')} did not answer SSH with the pinned host key within ${minutes(ctx.timing.readyTimeoutMs)}: ${missing.map((r) => why.get(r) ?? why.get(-1) ?? 'it was not listed').join('; ')}`,
        );
      }
      await ctx.clock.sleep(ctx.timing.podPollMs, signal);
    }
  } catch (error) {
    for (const member of connected.values()) member.executor.dispose();
    throw error;
  }
}

/**
 * Deletes the cluster and every member with it, then looks again until Runpod shows it gone (its
 * own 404): true once confirmed. Unconfirmed after {@link DELETE_TRIES} deletes: a warning names
 * the command that removes it, and false.
 */
export async function endCluster(
  ctx: ClusterCtx,
  runId: string,
  clusterId: string,
  /** Told when a delete was first answered (Runpod's billing of the members ended by then). */
  onDeleted?: (answeredMs: number) => void,
): Promise<boolean> {
  let last = 'it still shows';
  let told = false;
  for (let tries = 1; tries <= DELETE_TRIES; tries++) {
    try {
      await ctx.client.deleteCluster(clusterId);
      if (!told) onDeleted?.(ctx.clock.nowMs());
      told = true;
      const [cluster, members] = await Promise.all([
        ctx.client.getCluster(clusterId),
        ctx.client.listClusterPods(clusterId),
      ]);
      if (cluster === null && members === null) {
        log(ctx, 'info', `cluster ${clusterId} deleted with all of its nodes`);
        return true;
      }
      last = `it still shows ${members?.length ?? 0} node(s)`;
    } catch (error) {
      last = describeError(error);
    }
    if (tries < DELETE_TRIES) await ctx.clock.sleep(ctx.timing.podPollMs);
  }
  warn(
    ctx,
    runId,
    'cluster_not_deleted',
    `cluster ${clusterId} may still exist and bill (${last}): remove it with "overbrainer pod rm ${clusterId}" or in Runpod's console`,
  );
  return false;
}
