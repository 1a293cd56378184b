/**
 * A cluster run's attempts to its end (issue 37), for train and for attach: each attempt's cluster
 * created with what is left of the run's limits and made ready (every member answering SSH with
 * the pinned host key, its watchdog's verdict read and its share of the cost cap armed), the
 * run's files uploaded to rank 0 only and passed on by it to the others as they arrive
 * (../pod/clusterFiles.ts), the
 * job started on every node, the run followed by rank 0. A node's death ends the whole cluster and,
 * within max_recoveries and the run's limits, the run goes on on a new cluster from the newest
 * verified checkpoint; a success brings rank 0's results home verified. Every path out of here
 * ends the run's cluster, confirmed: never a node left billing.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { RunpodTargetConfig } from '../config/types';
import { workdirFor } from '../config/types';
import { describeError } from '../errors';
import { log, type PodCtx } from '../pod/context';
import {
  CLUSTER_CREATE_TRIES,
  startCluster,
  type ClusterHandle,
  type ClusterMember,
} from '../pod/cluster';
import { ClusterFeed } from '../pod/clusterFiles';
import type { RunKeys } from '../pod/keys';
import { PodError } from '../pod/podError';
import { podCmd, podEnv } from '../pod/podScripts';
import { secretReference } from '../runpod/api';
import type { Cluster } from '../runpod/clusters';
import type { ClusterNode, RunCluster } from '../runs/clusterRecord';
import { runClusters } from '../runs/clusterSpend';
import { endRun } from '../runs/runEnd';
import type { JobRef, RunRecord } from '../runs/runRecord';
import { LOCAL_ONLY, NODES_DIR } from '../runs/store';
import type { TrainerJob } from '../train/job';
import { JOB_LOG } from '../train/job';
import { retrieve } from '../train/retrieval';
import { type FlowDeps, podCtx, publishState } from './deps';
import { startJobOnPod } from '../follow/startJob';
import { TransferReporter } from '../transferProgress';
import { StepTimes } from '../follow/nextAttempt';
import { followCluster, memberVerdicts, type ClusterEnd } from './clusterFollow';
import { noteMemberDeleteRefused } from './clusterRefusal';
import { afterNodeDeath, closeClusterAttempt, endRunCluster, isoMs } from './clusterRecover';

/** What a cluster run's attempts are made of. */
export interface ClusterRunPlan {
  target: RunpodTargetConfig;
  start: ClusterStart;
  job: TrainerJob;
  /** The job's extra env (a recovery adds its resume variables). */
  env: Record<string, string>;
  secrets: Record<string, string>;
  /** What comes home from rank 0 (the config's artifacts). */
  artifacts: readonly string[];
  /** The cluster's total cost cap for a first attempt (each node holds 1/N); null: none. */
  costCapUsd: number | null;
  signal?: AbortSignal;
}

/**
 * Runs `run`'s attempts to its end, saved in run.json. `followed`: the cluster already running
 * the job (attach), followed first, or with `firstEnd` already found ended (a node died while no
 * client followed); null: a new cluster first. Throws what ended the run unexpectedly, the run
 * failed and its cluster ended first. Returns what stopping the follow left running (the signal
 * aborted once the job ran), or null when the run ended.
 */
export async function runClusterAttempts(
  deps: FlowDeps,
  run: RunRecord,
  plan: ClusterRunPlan,
  followed: ClusterHandle | null = null,
  firstEnd?: ClusterEnd,
): Promise<string | null> {
  const ctx = podCtx(deps);
  const { target, signal } = plan;
  let handle: ClusterHandle | null = followed;
  const fail = (cause: Parameters<typeof endRun>[2], message: string): void => {
    endRun(run, cause === 'cancelled' ? 'cancelled' : 'failed', cause, message);
    deps.store.saveRun(run);
    publishState(deps, run);
  };
  const steps = new StepTimes(deps.bus, run.id, () => deps.clock.nowMs());
  /** Set when the follow stopped with the job running: the cluster is left to train on. */
  let stoppedFollowing: string | null = null;
  try {
    // Each attempt: a cluster with what is left of the run's limits, the job started on every
    // node, followed by rank 0. A node's death ends the whole cluster and, within the run's
    // limits, the run goes on on a new one from the newest verified checkpoint.
    let limits = { costCapUsd: plan.costCapUsd, maxMs: target.maxHours * 3_600_000 };
    let jobEnv = plan.env;
    let fromOffset = 0;
    for (;;) {
      if (handle === null) {
        // A new cluster, named after the run's clusters so far: never a name one of them had.
        const attempt = runClusters(run).length + 1;
        // Each member's key for the copy is set as it answers SSH, and the upload to rank 0 goes
        // as soon as every member is there, beside the watchdogs' verdicts: the user's link
        // carries the files once, to rank 0, which passes them on to the others as they arrive.
        const feed = new ClusterFeed(
          ctx,
          {
            runId: run.id,
            localDir: deps.store.runDir(run.id),
            remoteDir: run.remoteDir,
            exclude: LOCAL_ONLY,
            hostPublicKey: plan.start.keys.hostPublic,
            nodes: target.nodes,
            reported: (send) =>
              new TransferReporter(deps.bus, deps.clock, run.id, 'upload').around(send),
            onWarning: (message) => deps.bus.publish({ type: 'log', level: 'warn', message }),
          },
          signal,
        );
        handle = await startAttempt(
          ctx,
          run,
          plan.start,
          limits,
          attempt,
          signal,
          feed.onConnected,
        );
        const attemptRecord = run.attempts?.at(-1);
        if (attemptRecord) {
          attemptRecord.podId = handle.cluster.id;
          deps.store.saveRun(run);
        }
        await feed.done(handle.members);
        // The job on every node at once: rank 0's torchrun hosts the rendezvous the others wait
        // for, so it does not start last. The starts end in any order: the run's job is then
        // rank 0's, as its start returned it.
        const startOn = async (member: ClusterMember): Promise<JobRef> => {
          const job = await startJobOnPod(deps, member.executor, run, plan.job, jobEnv, {
            signal,
            secrets: plan.secrets,
            uploaded: Promise.resolve(),
          });
          nodeState(run, member.rank, 'running');
          deps.store.saveRun(run);
          return job;
        };
        const jobs = await Promise.all(handle.members.map(startOn));
        run.job = jobs[0] ?? run.job; // members[0] is rank 0
        deps.store.saveRun(run);
        publishState(deps, run);
      }
      const end =
        firstEnd ??
        (await followCluster(ctx, run, handle, {
          signal,
          fromOffset,
          maxRetrieveGb: target.maxRetrieveGb,
        }));
      firstEnd = undefined;
      if (end.kind === 'stopped') {
        stoppedFollowing = end.message;
        log(ctx, 'warn', end.message);
        break;
      }
      const deadRank = end.kind === 'died' ? end.rank : null;
      await Promise.all([
        noteMemberDeleteRefused(ctx, run, handle, deadRank),
        keepNodeLogs(deps, run, handle, deadRank),
      ]);
      if (end.kind === 'died') {
        const dead = handle;
        handle = null; // ended below, whatever comes next
        let next;
        try {
          next = await afterNodeDeath(
            ctx,
            run,
            dead,
            end,
            { target, job: plan.job },
            steps,
            signal,
          );
        } catch (error) {
          if (!(error instanceof PodError) || run.state !== 'failed') throw error;
          break; // the run failed saying why it was not recovered
        }
        if (next === null) {
          fail(
            'job_failed',
            `${end.message}; not recovered: max_recoveries = 0 turns recovery on a new cluster off`,
          );
          break;
        }
        limits = { costCapUsd: next.leftUsd, maxMs: next.leftMs };
        jobEnv = { ...plan.env, ...next.env };
        fromOffset = next.fromOffset;
        continue;
      }
      if (end.kind === 'failed') {
        fail('job_failed', end.message);
      } else if (end.kind === 'limit') {
        fail(end.cause, end.message);
      } else if (end.kind === 'cancelled') {
        fail('cancelled', end.message);
      } else {
        const result = await retrieve({
          executor: handle.members[0]!.executor,
          remoteRunDir: run.remoteDir,
          localRunDir: deps.store.runDir(run.id),
          entries: plan.artifacts,
          signal: signal,
          clock: deps.clock,
          maxRetrieveGb: target.maxRetrieveGb,
        });
        if (result.verified) {
          endRun(run, 'succeeded', 'completed', null);
          deps.store.saveRun(run);
        } else {
          fail('not_retrieved', "rank 0's results did not match their SHA-256: not kept");
        }
      }
      break;
    }
  } catch (error) {
    if (run.state === 'preparing' || run.state === 'running') {
      const cancelled = signal?.aborted ?? false;
      fail(
        cancelled ? 'cancelled' : 'start_failed',
        cancelled ? 'cancelled: the cluster was deleted' : describeError(error),
      );
    }
    throw error;
  } finally {
    steps.dispose();
    handle?.members.forEach((m) => m.executor.dispose());
    // The cluster of this attempt (created, whether or not it came up): deleted and confirmed.
    if (stoppedFollowing === null && run.cluster && run.cluster.deletedAt === null) {
      await endRunCluster(ctx, run, run.cluster.id);
      closeClusterAttempt(run, deps.clock.nowMs(), null);
      deps.store.saveRun(run);
      publishState(deps, run);
    }
  }
  return stoppedFollowing;
}

/** What every attempt's cluster is made from: the run's keys, its GPU types in order. */
export interface ClusterStart {
  target: RunpodTargetConfig;
  keys: RunKeys;
  secretName: string;
  gpuTypes: string[];
  clientPrivateKey: Buffer;
}

/**
 * One attempt's cluster, created with the first GPU type that has room for every node (its
 * record written to run.json as soon as it exists), every member ready with its watchdog's
 * verdict, the run's deadline and its share of what is left of the cost cap armed on each.
 */
async function startAttempt(
  ctx: PodCtx,
  run: RunRecord,
  start: ClusterStart,
  limits: { costCapUsd: number | null; maxMs: number },
  attempt: number,
  signal?: AbortSignal,
  onConnected?: (member: ClusterMember) => void,
): Promise<ClusterHandle> {
  const { target, keys } = start;
  const createdMs = ctx.clock.nowMs();
  const deadlineUnixS = Math.floor((createdMs + limits.maxMs) / 1000);
  const memberEnv = podEnv({
    runId: run.id,
    workdir: workdirFor(target),
    deadlineUnixS,
    bootGraceS: target.bootGraceS,
    retrieveGraceS: target.retrieveGraceS,
    keepPod: false,
    volumeDir: target.networkVolumeId === null ? null : '/workspace/data',
    apiUrl: ctx.client.baseUrl,
    authorizedKey: keys.clientPublic,
    claim: keys.hostPublic,
    version: ctx.version,
    hostKey: secretReference(start.secretName),
    timing: ctx.timing,
  });
  const refused: string[] = [];
  let handle: ClusterHandle | null = null;
  let answeredMs = createdMs;
  for (const gpuTypeId of start.gpuTypes) {
    try {
      handle = await startCluster(
        ctx,
        {
          runId: run.id,
          firstName: (attempt - 1) * CLUSTER_CREATE_TRIES + 1,
          create: {
            image: target.image,
            gpuTypeId,
            gpuCountPerPod: target.gpuCount,
            podCount: target.nodes,
            containerDiskGb: target.containerDiskGb,
            env: memberEnv,
            cmd: podCmd(),
            ports: ['22/tcp'],
            dataCenterIds: target.dataCenterIds === 'auto' ? [] : target.dataCenterIds,
            networkVolumeId: target.networkVolumeId,
          },
          hostPublicKey: keys.hostPublic,
          clientPrivateKey: start.clientPrivateKey,
        },
        signal,
        (cluster, sentMs) => {
          // Each member counts from its createdAt, never before the create's bytes left this
          // client nor when Runpod's time is after the create's answer (a clock this client
          // cannot compare): never under its bill.
          answeredMs = ctx.clock.nowMs();
          run.cluster = clusterRecord(cluster, sentMs, keys.hostPublic, target.containerDiskGb);
          ctx.store.saveRun(run);
        },
        (gone, answeredMs) => {
          // A cluster that did not come up: its record says when its delete was answered.
          if (run.cluster?.deletedAt === null && gone) {
            run.cluster.deletedAt = isoMs(answeredMs ?? ctx.clock.nowMs());
            ctx.store.saveRun(run);
          }
        },
        onConnected,
      );
      break;
    } catch (error) {
      if (error instanceof PodError && error.kind === 'no_capacity') {
        refused.push(`${gpuTypeId}: ${error.message}`);
        log(ctx, 'warn', `no room for ${target.nodes} nodes of ${gpuTypeId}: trying the next type`);
        continue;
      }
      throw error;
    }
  }
  if (handle === null) {
    throw new PodError(
      'no_capacity',
      `no GPU type of target ${target.name} had room for ${target.nodes} nodes: ${refused.join('; ')}`,
      'Train again later, or add GPU types or data centers to the target.',
    );
  }
  const cluster = run.cluster as RunCluster;
  for (const member of handle.members) {
    cluster.nodes.push(nodeOf(member, deadlineUnixS, answeredMs));
    if (member.pod.costPerHourUsd !== null) cluster.costPerHourUsd = member.pod.costPerHourUsd;
  }
  ctx.store.saveRun(run);
  try {
    // Each member: its watchdog's ready verdict, then its share of the cost cap armed.
    await memberVerdicts(ctx, run, handle, limits.costCapUsd, createdMs, signal);
  } catch (error) {
    handle.members.forEach((m) => m.executor.dispose());
    throw error;
  } finally {
    ctx.store.saveRun(run);
  }
  return handle;
}

function clusterRecord(
  cluster: Cluster,
  nowMs: number,
  hostKey: string,
  diskGbPerNode: number,
): RunCluster {
  return {
    id: cluster.id,
    name: cluster.name,
    gpuTypeId: cluster.gpuTypeId,
    gpuCountPerPod: cluster.gpuCountPerPod,
    costPerHourUsd: null,
    createdAt: isoMs(nowMs),
    deletedAt: null,
    hostKey,
    nodes: [],
    diskGbPerNode,
    billedUsd: null,
    billedCheckedAt: null,
  };
}

function nodeOf(member: ClusterMember, deadlineUnixS: number, answeredMs: number): ClusterNode {
  const createdMs = member.pod.createdAt === null ? NaN : Date.parse(member.pod.createdAt);
  return {
    ...(createdMs <= answeredMs ? { createdAt: member.pod.createdAt! } : {}),
    rank: member.rank,
    podId: member.pod.id,
    ip: member.ip,
    state: 'starting',
    deadlineUnixS,
    costCapAtUnixS: null,
    message: null,
  };
}

export function nodeState(
  run: RunRecord,
  rank: number,
  state: ClusterNode['state'],
  message: string | null = null,
): void {
  const node = run.cluster?.nodes.find((n) => n.rank === rank);
  if (node) {
    node.state = state;
    if (message !== null) node.message = message;
  }
}

/**
 * Each node's job.log, its tail up to 4 MB, under runs/<id>/nodes/<rank>/ (what is readable), read
 * from every node at once; a dead node (`deadRank`) is not waited for: its cluster bills meanwhile.
 */
async function keepNodeLogs(
  deps: FlowDeps,
  run: RunRecord,
  handle: ClusterHandle,
  deadRank: number | null,
): Promise<void> {
  await Promise.all(
    handle.members
      .filter((member) => member.rank !== deadRank)
      .map(async (member) => {
        try {
          const text = await member.executor.readRange(`${run.remoteDir}/${JOB_LOG}`, 0, 4 << 20);
          const dir = path.join(deps.store.runDir(run.id), NODES_DIR, String(member.rank));
          fs.mkdirSync(dir, { recursive: true });
          fs.writeFileSync(path.join(dir, JOB_LOG), text);
        } catch (error) {
          deps.bus.publish({
            type: 'log',
            level: 'warn',
            message: `node ${member.rank}'s job.log could not be kept: ${describeError(error)}`,
          });
        }
      }),
  );
}
