/**
 * Train on a target of `nodes` ≥ 2: one run on one Runpod Instant Cluster, the command started by
 * torchrun on every node (issue 37). The cluster is a group of pods (../pod/cluster.ts): created
 * once, every member brought to answer SSH with the run's pinned host key, its own watchdog's
 * ready verdict read and its share of the cost cap armed; a member that is not ready ends the
 * whole cluster, naming it. The run's files go to each node (each has its own disk), the job is
 * started on the others then on rank 0, and the run is followed by rank 0: its end is the run's,
 * any other node whose job fails or whose pod dies ends the run naming that node. Rank 0's results
 * come back verified by SHA-256, every node's job.log under runs/<id>/nodes/<rank>/, then the
 * whole cluster is deleted in one call and its deletion confirmed. Every path out of here ends the
 * cluster: never a node left billing.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { rfc3339 } from '../clock';
import type { OverbrainerConfig, RunpodTargetConfig } from '../config/types';
import { workdirFor } from '../config/types';
import { describeError } from '../errors';
import { log, hostKeySecretName } from '../pod/context';
import { endCluster, startCluster, type ClusterHandle, type ClusterMember } from '../pod/cluster';
import { resolveGpuTypes } from '../pod/gpuChoice';
import { alias, generateRunKeys } from '../pod/keys';
import { PodError } from '../pod/podError';
import { podCmd, podEnv } from '../pod/podScripts';
import { secretReference } from '../runpod/api';
import type { Cluster } from '../runpod/clusters';
import type { ClusterNode, RunCluster } from '../runs/clusterRecord';
import { endRun } from '../runs/runEnd';
import type { RunRecord } from '../runs/runRecord';
import { JOB_LOG } from '../train/job';
import { retrieve } from '../train/retrieval';
import { type FlowDeps, FlowError, type FlowResult, lockRun, podCtx, publishState } from './deps';
import { startJobOnPod } from '../follow/startJob';
import { checkRunFiles, packRun } from './runFiles';
import { budgetGate, lockBudget, type BudgetDecision } from './budget';
import { settleGonePods } from './settleBills';
import type { TrainOptions } from './train';
import { followCluster, memberVerdicts } from './clusterFollow';

/** Where each node's own files are kept in the run folder: `nodes/<rank>/job.log`. */
export const NODES_DIR = 'nodes';

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
  // [budget] as for one pod: the quote (N nodes) against what is left, under the budget lock
  // from the read of the spend to the run's record of its cap.
  const budgetLock = config.budget ? await lockBudget(deps, options.signal) : null;
  let budget: BudgetDecision | null;
  let run: RunRecord;
  try {
    if (budgetLock !== null) await settleGonePods(deps, config, options.signal);
    budget = await budgetGate(
      ctx.client,
      deps.store,
      config,
      target,
      false,
      deps.clock.nowMs(),
      deps.timing,
      options.signal,
    );
    run = deps.store.create({
      project: config.projectName,
      target: target.name,
      remoteDir: (id) => `${workdirFor(target)}/${id}`,
      budgetCapUsd: budget?.budgetCapUsd ?? null,
    });
  } finally {
    budgetLock?.dispose();
  }
  // The cluster's total cap: max_cost_usd, or what [budget] leaves (each node holds 1/N of it).
  const costCapUsd = budget === null ? target.maxCostUsd : budget.budgetCapUsd;
  if (budget !== null) log(ctx, budget.fitted ? 'warn' : 'info', budget.line);
  const lock = lockRun(deps, run.id);
  let handle: ClusterHandle | null = null;
  let clusterId: string | null = null;
  const fail = (cause: Parameters<typeof endRun>[2], message: string): void => {
    endRun(run, cause === 'cancelled' ? 'cancelled' : 'failed', cause, message);
    deps.store.saveRun(run);
    publishState(deps, run);
  };
  try {
    options.onRun?.(run);
    publishState(deps, run);
    let env: Record<string, string>;
    const files = checkRunFiles(config, workspaceDir, deps.store.runDir(run.id));
    try {
      env = await packRun(deps, run, workspaceDir, files, null);
    } catch (error) {
      fail('start_failed', describeError(error));
      throw error;
    }
    const keys = generateRunKeys(deps.store.sshDir(run.id), alias(run.id));
    const secretName = hostKeySecretName(run.id);
    await ctx.client.createSecret(secretName, keys.hostPrivateB64, { signal: options.signal });
    const createdMs = deps.clock.nowMs();
    const deadlineUnixS = Math.floor(createdMs / 1000 + target.maxHours * 3600);
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
      hostKey: secretReference(secretName),
      timing: ctx.timing,
    });
    const clientPrivateKey = fs.readFileSync(keys.clientKeyPath);
    const gpuTypes = await resolveGpuTypes(ctx, target, options.signal);
    const refused: string[] = [];
    for (const gpuTypeId of gpuTypes) {
      // The estimate counts from before the create is sent: never under Runpod's bill.
      const sentMs = deps.clock.nowMs();
      try {
        handle = await startCluster(
          ctx,
          {
            runId: run.id,
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
            clientPrivateKey,
          },
          options.signal,
          (cluster) => {
            clusterId = cluster.id;
            run.cluster = clusterRecord(cluster, sentMs);
            deps.store.saveRun(run);
          },
        );
        break;
      } catch (error) {
        if (error instanceof PodError && error.kind === 'no_capacity') {
          refused.push(`${gpuTypeId}: ${error.message}`);
          log(
            ctx,
            'warn',
            `no room for ${target.nodes} nodes of ${gpuTypeId}: trying the next type`,
          );
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
      cluster.nodes.push(nodeOf(member, deadlineUnixS));
      if (member.pod.costPerHourUsd !== null) cluster.costPerHourUsd = member.pod.costPerHourUsd;
    }
    deps.store.saveRun(run);
    // Each member: its watchdog's ready verdict, then its share of the cost cap armed.
    await memberVerdicts(ctx, run, handle, costCapUsd, createdMs, options.signal);
    deps.store.saveRun(run);
    log(
      ctx,
      'info',
      `the run's files go to each of the ${target.nodes} nodes: ${target.networkVolumeId === null ? 'each node has its own disk (no network volume)' : 'the network volume is not yet used as the shared copy'}`,
    );
    const members = [...handle.members].sort((a, b) => b.rank - a.rank);
    for (const member of members) {
      await startJobOnPod(deps, member.executor, run, files.job, env, {
        signal: options.signal,
        secrets,
      });
      nodeState(run, member.rank, 'running');
      deps.store.saveRun(run);
    }
    publishState(deps, run);
    const end = await followCluster(ctx, run, handle, options.signal);
    await keepNodeLogs(deps, run, handle);
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
        entries: config.training?.artifacts ?? ['output/'],
        signal: options.signal,
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
  } catch (error) {
    if (run.state === 'preparing' || run.state === 'running') {
      const cancelled = options.signal?.aborted ?? false;
      fail(
        cancelled ? 'cancelled' : 'start_failed',
        cancelled ? 'cancelled: the cluster was deleted' : describeError(error),
      );
    }
    throw error;
  } finally {
    handle?.members.forEach((m) => m.executor.dispose());
    if (clusterId !== null) {
      const gone = await endCluster(ctx, run.id, clusterId);
      if (run.cluster) {
        run.cluster.deletedAt = gone ? rfc3339(deps.clock.nowMs()) : null;
        for (const node of run.cluster.nodes) {
          if (node.state !== 'failed') node.state = 'ended';
        }
        deps.store.saveRun(run);
      }
      publishState(deps, run);
    }
    lock.dispose();
  }
  return {
    run,
    pod: null,
    ending: null,
    summary: `train: run ${run.id} ${run.state} on ${target.nodes} nodes${run.message ? `; ${run.message}` : ''}${run.state === 'succeeded' ? `; output in runs/${run.id}/output` : ''}`,
  };
}

function clusterRecord(cluster: Cluster, nowMs: number): RunCluster {
  return {
    id: cluster.id,
    name: cluster.name,
    gpuTypeId: cluster.gpuTypeId,
    gpuCountPerPod: cluster.gpuCountPerPod,
    costPerHourUsd: null,
    createdAt: rfc3339(nowMs),
    deletedAt: null,
    nodes: [],
    billedUsd: null,
    billedCheckedAt: null,
  };
}

function nodeOf(member: ClusterMember, deadlineUnixS: number): ClusterNode {
  return {
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

/** Each node's job.log, its tail up to 4 MB, under runs/<id>/nodes/<rank>/ (what is readable). */
async function keepNodeLogs(deps: FlowDeps, run: RunRecord, handle: ClusterHandle): Promise<void> {
  for (const member of handle.members) {
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
  }
}
