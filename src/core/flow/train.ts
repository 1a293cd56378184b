/**
 * Train: a new run on its target, its files prepared (and a resumed run's checkpoint
 * placed), its pod started, its job started, then followed to its end.
 */
import { OverbrainerConfig, RunpodTargetConfig } from '../config/types';
import { log, warn, type PodCtx } from '../pod/context';
import { failRun } from '../pod/context';
import { type PodLimits, startPod } from '../pod/provision';
import { forgetKeys, remove } from '../pod/remove';
import type { Executor } from '../exec/executor';
import { cancelJob, type CancelResult, type TrainerJob } from '../train/job';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import { endRun, INTERRUPTED_BEFORE_JOB } from '../runs/runEnd';
import { noPodLeft } from '../runs/store';
import {
  type FlowDeps,
  type FlowResult,
  artifactsOf,
  endOf,
  maxRetrieveGbOf,
  lockRun,
  pickTarget,
  podCtx,
  publishState,
} from './deps';
import { createBudgetedRun, type BudgetedRun } from './budgetedRun';
import { trainLocal, trainOnHost } from './host';
import { recoveryPlan } from '../follow/recover';
import { followOnPod } from '../follow/run';
import { checkRunFiles, packRun, resumeSource, type RunFiles } from './runFiles';
import { startJobOnPod, UploadAhead } from '../follow/startJob';
import { describeError } from '../errors';
import { jobSecretsOf } from './jobSecrets';
import { withDotEnv } from '../config/env';
import { trainCluster } from './trainCluster';

export interface TrainOptions {
  target?: string;
  keepPod?: boolean;
  /** Aborting before the job starts deletes the pod; after, it only stops following. */
  signal?: AbortSignal;
  /** Called once the run exists (its ID is known). */
  onRun?: (run: RunRecord) => void;
  /** A stopped (or failed) run whose snapshot this run starts from (`--resume-from`). */
  resumeFrom?: string;
  /**
   * `overlapped` (the default): the run's files are copied while the pod boots and sent as soon
   * as it answers SSH. `sequential`: each step after the one before (copy, pod, upload, job),
   * as Train did before; kept as the start-up benchmark's baseline.
   */
  startup?: 'overlapped' | 'sequential';
  /** Told when each start-up step ends (the start-up benchmark's timeline). */
  onPhase?: (phase: StartPhase) => void;
  /**
   * Told once the job started: its cancel over the connection the follow holds to the pod, open
   * until train returns (a sweep cancels a pruned trial's job so, not over a new connection).
   */
  onJob?: (job: RunningJob) => void;
}

/** A started job as train's caller may act on it. */
export interface RunningJob {
  /** Cancels the job over the connection train's follow holds (throws when it no longer answers). */
  cancel(): Promise<CancelResult>;
}

/**
 * The steps of a start that the events do not show: the files packed, the pod answering SSH
 * (before its preflight), the pod ready, the upload done, the job started.
 */
export type StartPhase = 'packed' | 'reachable' | 'ready' | 'uploaded' | 'started';

/** Starts a run on its target and follows it to its end. */
export async function train(
  deps: FlowDeps,
  config: OverbrainerConfig,
  workspaceDir: string,
  options: TrainOptions = {},
): Promise<FlowResult> {
  const target = pickTarget(config, options);
  // The job's secrets, before anything is created: a missing one stops here with its fix.
  const secrets = jobSecretsOf(config, withDotEnv(workspaceDir, deps.env ?? {}));
  // nodes ≥ 2: one run on one Instant Cluster (./trainCluster.ts).
  if (target.kind === 'runpod' && target.nodes > 1) {
    return trainCluster(deps, config, target, workspaceDir, secrets, options);
  }
  const ctx = target.kind === 'runpod' ? podCtx(deps) : null;
  const resume = options.resumeFrom === undefined ? null : resumeSource(deps, options.resumeFrom);
  // Before any run directory or pod: a run that would pass [budget] is refused (or fitted).
  const { run, budget }: BudgetedRun =
    target.kind === 'runpod'
      ? await createBudgetedRun(deps, config, target, options.keepPod ?? false, options.signal)
      : {
          run: deps.store.create({
            project: config.projectName,
            target: target.name,
            remoteDir: (id) =>
              target.kind === 'ssh' ? `${target.workdir}/${id}` : deps.store.runDir(id),
            budgetCapUsd: null,
          }),
          budget: null,
        };
  const lock = lockRun(deps, run.id);
  try {
    options.onRun?.(run);
    publishState(deps, run);
    const sequential = options.startup === 'sequential';
    let files: RunFiles;
    let packing: Promise<Record<string, string>>;
    const failBeforePod = (error: unknown): never => {
      endRun(run, 'failed', 'start_failed', describeError(error));
      deps.store.saveRun(run);
      publishState(deps, run);
      throw error;
    };
    try {
      files = checkRunFiles(config, target, workspaceDir, deps.store.runDir(run.id));
      if (resume !== null) {
        run.resumedFrom = resume.runId;
        deps.store.saveRun(run);
      }
      packing = packRun(deps, run, workspaceDir, files, resume);
      // Awaited before the job starts; a failure meanwhile is that start's failure.
      packing.then(
        () => options.onPhase?.('packed'),
        () => undefined,
      );
      if (sequential || target.kind !== 'runpod') await packing;
    } catch (error) {
      return failBeforePod(error);
    }
    if (target.kind === 'local') {
      const launch = { job: files.job, env: await packing, secrets };
      return await trainLocal(deps, run, launch, options.signal);
    }
    if (target.kind === 'ssh') {
      const launch = { job: files.job, env: await packing, secrets };
      return await trainOnHost(deps, config, target, run, launch, options.signal);
    }
    if (budget !== null) {
      if (budget.fitted) warn(ctx!, run.id, 'budget_fitted', budget.line);
      else log(ctx!, 'info', budget.line);
    }
    // The pod's watchdog gets the budget's share as its cost cap (min(max_cost_usd, what is left)).
    const limits: PodLimits = {
      costCapUsd: budget === null ? target.maxCostUsd : budget.budgetCapUsd,
      maxHours: target.maxHours,
    };
    return await trainOnPod(
      ctx!,
      deps,
      target,
      limits,
      run,
      files.job,
      packing,
      options,
      config,
      secrets,
    );
  } finally {
    lock.dispose();
  }
}

async function trainOnPod(
  ctx: PodCtx,
  deps: FlowDeps,
  target: RunpodTargetConfig,
  limits: PodLimits,
  run: RunRecord,
  job: TrainerJob,
  packing: Promise<Record<string, string>>,
  options: TrainOptions,
  config: OverbrainerConfig,
  secrets: Record<string, string>,
): Promise<FlowResult> {
  const keep = options.keepPod ?? false;
  // While the pod boots the run's files are packed; once it answers SSH (its preflight and cost
  // cap still to come) they are sent, so that after that only the job's start is left.
  const ahead = new UploadAhead(deps, run, packing, () => options.onPhase?.('uploaded'));
  const onReachable = (executor: Executor): void => {
    options.onPhase?.('reachable');
    if (options.startup !== 'sequential') ahead.onReachable(executor);
  };
  let started;
  try {
    started = await startPod(ctx, target, limits, run, keep, options.signal, onReachable);
  } catch (error) {
    // No copy or upload outlives the start that failed (the run directory is the user's then).
    await Promise.allSettled([packing, ahead.settled()]);
    throw error;
  }
  const { record: pod, provisioned } = started;
  const executor = provisioned.executor;
  options.onPhase?.('ready');
  try {
    // Shielded from the abort: once the upload starts the job is started or the pod deleted.
    // A Ctrl-C or Cancel that lands before the job is recorded running has one outcome: no
    // job is left running (one started meanwhile is cancelled), the pod is deleted and the run
    // fails "interrupted before the job started". Never a job nobody follows.
    try {
      const env = await packing;
      const trainer = job.trainer === 'axolotl' ? { ...job, venv: target.venv } : job;
      await startJobOnPod(deps, executor, run, trainer, env, {
        signal: options.signal,
        uploaded: ahead.uploadOn(executor),
        onUploaded: () => options.onPhase?.('uploaded'),
        secrets,
      });
      options.onPhase?.('started');
    } catch (error) {
      const interrupted = options.signal?.aborted ?? false;
      await removeRunPod(ctx, pod, interrupted ? 'interrupted' : 'requested');
      if (interrupted) failRun(ctx, run, 'interrupted', INTERRUPTED_BEFORE_JOB);
      else failRun(ctx, run, 'start_failed', `the job could not start: ${describeError(error)}`);
      throw error;
    }
    pod.state = 'running';
    ctx.store.savePod(pod);
    publishState(deps, run);
    options.onJob?.({ cancel: () => cancelJob(executor, run.remoteDir) });
    if (keep) {
      warn(
        ctx,
        run.id,
        'kept',
        `pod ${pod.podId ?? ''} is kept: it bills ${pod.costPerHourUsd === null ? '' : `$${pod.costPerHourUsd.toFixed(2)}/h `}until you remove it`,
      );
    }
    const followed = await followOnPod(
      ctx,
      run,
      { pod, executor, fromOffset: 0 },
      {
        artifacts: artifactsOf(config),
        plan: keep ? null : recoveryPlan(config, run, secrets),
        maxRetrieveGb: maxRetrieveGbOf(config, run),
        signal: options.signal,
      },
    );
    return endOf(followed);
  } finally {
    executor.dispose();
  }
}

/**
 * The train flow's remove of a run's pod: deleted (a failure logged, never thrown), and the run's
 * keys forgotten once no pod of it is left. A sweep removes a trial's pod it ends with this too.
 */
export async function removeRunPod(
  ctx: PodCtx,
  pod: PodRecord,
  reason: 'interrupted' | 'requested',
): Promise<void> {
  try {
    await remove(ctx, pod, reason, 'client');
  } catch (error) {
    log(ctx, 'error', describeError(error));
  }
  // No pod of the run is left: its host-key secret goes with the client key (as after provisioning).
  if (noPodLeft(ctx.store, pod.runId)) await forgetKeys(ctx, pod.runId);
}
