/**
 * Train (spec §5–§8): a new run on its target, its files prepared (and a resumed run's checkpoint
 * placed), its pod started, its job started, then followed to its end.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { OverbrainerConfig, RunpodTargetConfig, workdirFor } from '../config/types';
import { LocalExecutor } from '../exec/local';
import { log, warn, type PodCtx } from '../runpod/context';
import { failRun } from '../runpod/lifecycle';
import { startPod } from '../runpod/provision';
import { forgetKeys, messageOf, remove } from '../runpod/remove';
import { jobScript, RESUME_DIR, RESUME_ENV, startJob, type TrainerJob } from '../train/job';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import { noPodLeft } from '../runs/store';
import {
  type FlowDeps,
  FlowError,
  type FlowResult,
  artifactsOf,
  lockRun,
  pickTarget,
  podCtx,
  publishState,
} from './deps';
import { budgetGate } from './budget';
import { settleGonePods } from './settleBills';
import { followLocal, followOnPod } from './follow';
import { recoveryPlan } from './recover';
import { startJobOnPod } from './startJob';

/** Where the shipped metrics plugin is: next to the bundle (dist/python) or in the source tree. */
export function pluginSource(): string {
  const candidates = [
    path.join(__dirname, 'python', 'overbrainer_metrics.py'),
    path.join(__dirname, '..', '..', '..', 'python', 'overbrainer_metrics.py'),
  ];
  const found = candidates.find((file) => fs.existsSync(file));
  if (!found)
    throw new FlowError(
      'the metrics plugin is missing from this installation',
      'Reinstall the extension.',
    );
  return found;
}

/** Copies `[training] upload` (and the trainer's files) from the workspace into the run directory. */
function prepare(config: OverbrainerConfig, workspaceDir: string, runDir: string): TrainerJob {
  const training = config.training;
  if (!training) {
    throw new FlowError(
      'overbrainer.toml has no [training] section',
      'Add one (see the commented template).',
    );
  }
  for (const entry of training.upload) {
    const source = path.resolve(workspaceDir, entry);
    const rel = path.relative(workspaceDir, source);
    if (rel.startsWith('..') || path.isAbsolute(rel)) {
      throw new FlowError(
        `upload entry ${entry} is outside the workspace`,
        'List files inside the workspace.',
      );
    }
    if (!fs.existsSync(source)) {
      throw new FlowError(
        `upload entry ${entry} does not exist`,
        `Create ${entry} or remove it from [training] upload.`,
      );
    }
    fs.cpSync(source, path.join(runDir, rel), {
      recursive: true,
      dereference: false,
      verbatimSymlinks: true,
    });
  }
  fs.mkdirSync(path.join(runDir, 'plugin'), { recursive: true });
  fs.copyFileSync(pluginSource(), path.join(runDir, 'plugin', 'overbrainer_metrics.py'));
  if (training.trainer.kind === 'axolotl') {
    fs.copyFileSync(
      path.join(workspaceDir, training.trainer.configPath),
      path.join(runDir, 'axolotl.yaml'),
    );
    return { trainer: 'axolotl', config: 'axolotl.yaml', venv: '' };
  }
  return { trainer: 'command', command: training.trainer.command };
}

export interface TrainOptions {
  target?: string;
  keepPod?: boolean;
  /** Aborting before the job starts deletes the pod; after, it only stops following. */
  signal?: AbortSignal;
  /** Called once the run exists (its ID is known). */
  onRun?: (run: RunRecord) => void;
  /** A stopped (or failed) run whose snapshot this run starts from (`--resume-from`). */
  resumeFrom?: string;
}

/** Where a resumed run starts: the earlier run's snapshot, checked before anything is created. */
interface ResumeSource {
  runId: string;
  step: number;
  /** The snapshot's checkpoint directory, as it came home under runs/<earlier run>/. */
  localDir: string;
}

function resumeSource(deps: FlowDeps, runId: string): ResumeSource {
  const earlier = deps.store.loadRun(runId);
  if (earlier.state === 'running' || earlier.state === 'preparing') {
    throw new FlowError(
      `run ${runId} is still ${earlier.state}: it has no snapshot to resume from yet`,
      `Stop it first with \`overbrainer train stop ${runId}\` (VS Code: Stop and Snapshot), then resume.`,
    );
  }
  const snapshot = earlier.snapshot;
  if (!snapshot) {
    throw new FlowError(
      `run ${runId} ended ${earlier.state} without a snapshot: there is no checkpoint to resume from`,
      'Runs that were stopped (`overbrainer train stop`, Stop and Snapshot, or a limit the watchdog saw coming) have one; start this one afresh.',
    );
  }
  const localDir = path.join(deps.store.runDir(runId), snapshot.checkpoint);
  if (!fs.existsSync(localDir) || !fs.statSync(localDir).isDirectory()) {
    throw new FlowError(
      `the snapshot of run ${runId} (${snapshot.checkpoint}, step ${snapshot.step}) is not in runs/${runId}/: its results were not brought home`,
      `Bring them home with \`overbrainer train attach ${runId}\` while its pod still exists.`,
    );
  }
  return { runId, step: snapshot.step, localDir };
}

/**
 * Puts the earlier run's checkpoint into the new run's directory (`resume/checkpoint-N/`, uploaded
 * with it) and returns the job's env naming it where the job runs. An Axolotl config gets
 * `resume_from_checkpoint` too.
 */
function placeResume(
  deps: FlowDeps,
  run: RunRecord,
  source: ResumeSource,
  job: TrainerJob,
): Record<string, string> {
  const name = `checkpoint-${source.step}`;
  const runDir = deps.store.runDir(run.id);
  fs.cpSync(source.localDir, path.join(runDir, RESUME_DIR, name), {
    recursive: true,
    dereference: false,
    verbatimSymlinks: true,
  });
  const remote = `${run.remoteDir}/${RESUME_DIR}/${name}`;
  if (job.trainer === 'axolotl') {
    fs.appendFileSync(
      path.join(runDir, job.config),
      `\n# Added by Overbrainer: this run resumes run ${source.runId} from step ${source.step}.\nresume_from_checkpoint: ${JSON.stringify(remote)}\n`,
    );
  }
  run.resumedFrom = source.runId;
  deps.store.saveRun(run);
  return { [RESUME_ENV]: remote };
}

/** Starts a run on its target and follows it to its end (spec §5–§8). */
export async function train(
  deps: FlowDeps,
  config: OverbrainerConfig,
  workspaceDir: string,
  options: TrainOptions = {},
): Promise<FlowResult> {
  const target = pickTarget(config, options.target);
  if (options.keepPod && target.kind !== 'runpod') {
    throw new FlowError(
      '--keep-pod only applies to a runpod target',
      'Drop --keep-pod, or pick a runpod target.',
    );
  }
  if (!config.training) {
    throw new FlowError(
      'overbrainer.toml has no [training] section',
      'Add one (see the commented template).',
    );
  }
  const ctx = target.kind === 'runpod' ? podCtx(deps) : null;
  const resume = options.resumeFrom === undefined ? null : resumeSource(deps, options.resumeFrom);
  // Before any run directory or pod: a run that would pass [budget] is refused (or fitted).
  // Pods that ended while no client ran are recorded (with their bills) before the spend is read.
  if (target.kind === 'runpod' && config.budget) await settleGonePods(deps, config, options.signal);
  const budget =
    target.kind === 'runpod'
      ? await budgetGate(
          ctx!.client,
          deps.store,
          config,
          target,
          options.keepPod ?? false,
          deps.clock.nowMs(),
          options.signal,
        )
      : null;
  const run = deps.store.create({
    project: config.projectName,
    target: target.name,
    remoteDir: (id) =>
      target.kind === 'runpod' ? `${workdirFor(target)}/${id}` : deps.store.runDir(id),
  });
  const lock = lockRun(deps, run.id);
  try {
    options.onRun?.(run);
    publishState(deps, run);
    let job: TrainerJob;
    let env: Record<string, string> = {};
    try {
      job = prepare(config, workspaceDir, deps.store.runDir(run.id));
      if (resume !== null) env = placeResume(deps, run, resume, job);
    } catch (error) {
      run.state = 'failed';
      run.message = messageOf(error);
      deps.store.saveRun(run);
      publishState(deps, run);
      throw error;
    }
    if (target.kind === 'local') return await trainLocal(deps, run, job, env, options.signal);
    if (budget !== null) {
      if (budget.fitted) warn(ctx!, run.id, 'budget_fitted', budget.line);
      else log(ctx!, 'info', budget.line);
    }
    // The pod's watchdog gets the budget's share as its cost cap (min(max_cost_usd, what is left)).
    const podTarget = budget === null ? target : { ...target, maxCostUsd: budget.maxCostUsd };
    return await trainOnPod(ctx!, deps, podTarget, run, job, env, options, config);
  } finally {
    lock.dispose();
  }
}

async function trainLocal(
  deps: FlowDeps,
  run: RunRecord,
  job: TrainerJob,
  env: Record<string, string>,
  signal?: AbortSignal,
): Promise<FlowResult> {
  const executor = new LocalExecutor({ clock: deps.clock });
  try {
    const script = jobScript(job, { runDir: run.remoteDir, jobEnvFile: null });
    const { pid } = await startJob(executor, { runDir: run.remoteDir, script, env, signal });
    run.job = { dir: run.remoteDir, pid, container: null };
    run.state = 'running';
    deps.store.saveRun(run);
    publishState(deps, run);
    return await followLocal(deps, executor, run, signal);
  } finally {
    executor.dispose();
  }
}

async function trainOnPod(
  ctx: PodCtx,
  deps: FlowDeps,
  target: RunpodTargetConfig,
  run: RunRecord,
  job: TrainerJob,
  env: Record<string, string>,
  options: TrainOptions,
  config: OverbrainerConfig,
): Promise<FlowResult> {
  const keep = options.keepPod ?? false;
  const { record: pod, provisioned } = await startPod(ctx, target, run, keep, options.signal);
  const executor = provisioned.executor;
  try {
    // Shielded from the abort: once the upload starts the job is started or the pod deleted.
    // A Ctrl-C or Cancel that lands before the job is recorded running has one outcome: no
    // job is left running (one started meanwhile is cancelled), the pod is deleted and the run
    // fails "interrupted before the job started". Never a job nobody follows.
    try {
      const trainer = job.trainer === 'axolotl' ? { ...job, venv: target.venv } : job;
      await startJobOnPod(deps, executor, run, trainer, env, options.signal);
    } catch (error) {
      const interrupted = options.signal?.aborted ?? false;
      await ctxRemove(ctx, pod, interrupted ? 'interrupted' : 'requested');
      failRun(
        ctx,
        run,
        interrupted
          ? 'interrupted before the job started'
          : `the job could not start: ${messageOf(error)}`,
      );
      throw error;
    }
    pod.state = 'running';
    ctx.store.savePod(pod);
    publishState(deps, run);
    if (keep) {
      warn(
        ctx,
        run.id,
        'kept',
        `pod ${pod.podId ?? ''} is kept: it bills ${pod.costPerHourUsd === null ? '' : `$${pod.costPerHourUsd.toFixed(2)}/h `}until you remove it`,
      );
    }
    return await followOnPod(ctx, deps, executor, run, pod, artifactsOf(config), options.signal, {
      plan: keep ? null : recoveryPlan(config, run),
    });
  } finally {
    executor.dispose();
  }
}

async function ctxRemove(
  ctx: PodCtx,
  pod: PodRecord,
  reason: 'interrupted' | 'requested',
): Promise<void> {
  try {
    await remove(ctx, pod, reason, 'client');
  } catch (error) {
    log(ctx, 'error', messageOf(error));
  }
  // No pod of the run is left: its host-key secret goes with the client key (as after provisioning).
  if (noPodLeft(ctx.store, pod.runId)) await forgetKeys(ctx, pod.runId);
}
