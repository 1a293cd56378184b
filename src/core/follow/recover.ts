/**
 * Automatic recovery on a new pod: when a followed run's pod dies while its job runs (Runpod
 * deletes it, or it is EXITED: a lost host, a killed container), the old pod is made sure deleted,
 * and the run goes on by itself on a new pod from the newest checkpoint streamed home whose files
 * hash again to the pod's list (one that does not is skipped for the one before it; with none it
 * starts over from step 0 and says so), within what is left of the run's max_hours and of its
 * cost cap (`[budget]`'s for the run when the gate gave one, else max_cost_usd; the time and
 * spend of every earlier pod of the run count: the new pod's deadline and cost cap are what is
 * left, armed on it as on the first), up to the target's max_recoveries times. Each attempt's pod
 * has a name of its own (`overbrainer-<run>-<n>` counts on). The run stays one run: its id,
 * its directory, its metrics file (the new pod's starts with the curve up to the checkpoint's
 * step), and run.json's `attempts` records each pod's part.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { rfc3339 } from '../clock';
import type { OverbrainerConfig, RunpodTargetConfig } from '../config/types';
import type { EventBus } from '../events';
import type { Executor } from '../exec/executor';
import { HASHES_SUFFIX, newestVerified, metricsUpTo } from '../pod/checkpointHome';
import { LATEST_FILE } from '../pod/checkpointStream';
import { failRun, log, publishState, warn, type PodCtx } from '../pod/context';
import { PodError } from '../pod/podError';
import { type PodLimits, startPod } from '../pod/provision';
import { forgetKeys, remove } from '../pod/remove';
import type { PodRecord } from '../runs/podRecord';
import type { AttemptEnd, RunAttempt, RunRecord } from '../runs/runRecord';
import { reopenRun } from '../runs/runEnd';
import { CHECKPOINTS_DIR, POD_LOG_DIR } from '../runs/store';
import { METRICS_FILE, RESUME_DIR, RESUME_ENV, type TrainerJob } from '../train/job';
import { placeResumeCopy } from '../train/resumeCopy';
import { startJobOnPod, UploadAhead } from './startJob';
import { describeError } from '../errors';
import { trainerJobOf } from '../train/trainerJob';

/** What a run needs to go on on a new pod: its target and its job, as the config has them. */
export interface RecoveryPlan {
  target: RunpodTargetConfig;
  job: TrainerJob;
  /** The job's secrets, given again to the job on the new pod. */
  secrets?: Record<string, string>;
}

/** The plan for `run` from the config (null without one, or for a run not on a runpod target). */
export function recoveryPlan(
  config: OverbrainerConfig | null,
  run: RunRecord,
  secrets: Record<string, string> = {},
): RecoveryPlan | null {
  const target = config?.targets[run.target];
  const training = config?.training;
  if (target?.kind !== 'runpod' || !training) return null;
  return { target, job: trainerJobOf(training, target.venv), secrets };
}

/**
 * How the pod died when `error` (what settling a failed watch threw) says it died under a running
 * job, or null for anything else (a limit, `pod rm`, a lost connection to a pod still there).
 */
export function deathOf(error: unknown, pod: PodRecord): AttemptEnd | null {
  if (!(error instanceof PodError) || pod.keep) return null;
  if (error.kind === 'pod_gone' && pod.deletedBy !== 'pod_rm') return 'pod_deleted';
  if (error.kind === 'pod_stopped') return 'pod_exited';
  return null;
}

/** When each step's metric arrived (this client's clock), to bound the training a death lost. */
export class StepTimes {
  private readonly times = new Map<number, number>();
  last: number | null = null;
  private readonly subscription;

  constructor(bus: EventBus, runId: string, nowMs: () => number) {
    this.subscription = bus.on((event) => {
      if (event.type !== 'metric' || event.runId !== runId) return;
      this.times.set(event.metric.step, nowMs());
      this.last = event.metric.step;
    });
  }

  at(step: number): number | null {
    return this.times.get(step) ?? null;
  }

  dispose(): void {
    this.subscription.dispose();
  }
}

/**
 * A pod the run's job runs on, to follow: its record, SSH access to it, and where in the metrics
 * file the follow goes on from (a recovered run's file starts with the curve up to its checkpoint).
 */
export interface OnPod {
  pod: PodRecord;
  executor: Executor;
  fromOffset: number;
}

const DEATH_WORDS: Record<AttemptEnd, string> = {
  pod_deleted: 'Runpod deleted it',
  pod_exited: 'it stopped (EXITED: its host was lost or its container killed)',
};

const usd = (value: number): string => `$${value.toFixed(value < 1 ? 4 : 2)}`;

/** The first attempt of a run that had none recorded yet: its pod, from its creation. */
function firstAttempt(run: RunRecord, pod: PodRecord): RunAttempt {
  return {
    podId: pod.podId,
    startedAt: pod.createdAt ?? run.created,
    endedAt: null,
    reason: null,
    resumedFromStep: null,
    resumedFromCheckpoint: null,
    costUsd: null,
  };
}

/** Ends the run's last attempt with its pod's cost (the estimate once deleted, else so far). */
export function closeAttempt(
  run: RunRecord,
  pod: PodRecord,
  nowMs: number,
  reason: AttemptEnd | null,
): void {
  const last = run.attempts?.at(-1);
  if (last === undefined || last.endedAt !== null) return;
  last.endedAt = rfc3339(nowMs);
  last.reason = reason;
  last.costUsd = pod.estimatedSpendUsd ?? pod.spendUsd(nowMs);
}

/**
 * The pod of `run` died (`death`, thrown as `cause`) while its job ran: the run's job started on
 * a new pod, returned to follow (its executor is the caller's to dispose), or the run failed
 * saying why not (and thrown). Never leaves the old pod billing.
 */
export async function recoverAfterDeath(
  ctx: PodCtx,
  run: RunRecord,
  pod: PodRecord,
  death: AttemptEnd,
  cause: unknown,
  plan: RecoveryPlan,
  steps: StepTimes,
  signal?: AbortSignal,
): Promise<OnPod> {
  const oldPodId = pod.podId ?? '(none)';
  if (plan.target.maxRecoveries === 0) {
    // Recovery off: the run ends as it always did (an EXITED pod is left for the user to start
    // again or remove), saying that a new pod was not tried.
    if (run.state === 'failed') {
      failRun(
        ctx,
        run,
        run.end?.cause ?? 'pod_gone',
        `${run.message ?? ''}; not recovered: max_recoveries = 0 turns recovery on a new pod off`,
      );
    }
    throw cause;
  }
  // The old pod first: an EXITED pod still bills its disk, and a second pod must never bill
  // alongside one nobody deletes. A delete that cannot be confirmed throws: no new pod then.
  if (pod.state !== 'deleted') await remove(ctx, pod, 'died', 'client');
  if (!pod.mayHaveOtherPods()) await forgetKeys(ctx, run.id);
  const nowMs = ctx.clock.nowMs();
  run.attempts ??= [firstAttempt(run, pod)];
  closeAttempt(run, pod, nowMs, death);
  const attempts = run.attempts;
  const used = attempts.length - 1;
  const limit = plan.target.maxRecoveries;
  const diedAt = steps.last === null ? 'before its first step' : `at step ${steps.last}`;
  const died = `pod ${oldPodId} died ${diedAt} (${DEATH_WORDS[death]})`;
  // Every pod of the run so far (the earlier attempts', the walk's, swept duplicates, strays).
  const spent = pod.runSpendUsd(nowMs);
  const refuse = (why: string): never => {
    failRun(ctx, run, 'recovery_failed', `${died}; not recovered: ${why}`);
    throw new PodError(
      death === 'pod_deleted' ? 'pod_gone' : 'pod_stopped',
      `${died}; not recovered: ${why}`,
      `The checkpoints streamed home stay in runs/${run.id}/checkpoints/; train again, or resume from them.`,
      { cause },
    );
  };
  if (signal?.aborted) refuse('the client was stopping');
  if (used >= limit) {
    refuse(`max_recoveries = ${limit}, and ${used === 1 ? 'it was' : `all ${used} were`} used`);
  }
  const elapsedMs = nowMs - Date.parse(attempts[0]!.startedAt);
  const leftMs = plan.target.maxHours * 3_600_000 - elapsedMs;
  const needMs = ctx.timing.recoveryMinLeftMs;
  if (leftMs < needMs) {
    refuse(
      `${Math.max(0, leftMs / 1000).toFixed(0)} s of max_hours left, under the ${(needMs / 1000).toFixed(0)} s a new pod needs (spent so far ${usd(spent)})`,
    );
  }
  // The run's cap: the one `[budget]`'s gate gave it (already within max_cost_usd), else
  // max_cost_usd. The new pod is armed with what is left of it.
  const budgetCap = run.budgetCapUsd ?? null;
  const capUsd = budgetCap ?? plan.target.maxCostUsd;
  const capName = budgetCap !== null ? 'the cost cap [budget] gave the run' : 'max_cost_usd';
  let leftUsd: number | null = null;
  if (capUsd !== null) {
    leftUsd = Math.round((capUsd - spent) * 10_000) / 10_000;
    const needUsd = ((pod.costPerHourUsd ?? 0) * needMs) / 3_600_000;
    if (leftUsd <= needUsd) {
      refuse(
        `${usd(Math.max(0, leftUsd))} of ${capName} ${usd(capUsd)} left (spent so far ${usd(spent)}), under the ${usd(needUsd)} ${(needMs / 1000).toFixed(0)} s on a pod like it costs`,
      );
    }
  }
  const runDir = ctx.store.runDir(run.id);
  const { checkpoint, skipped } = await newestVerified(runDir);
  // A copy that failed its hashes is of no use: removed, with latest.json naming it, so that the
  // new pod's checkpoints from the step resumed on stream home again.
  for (const s of skipped) {
    fs.rmSync(path.join(runDir, s.path), { recursive: true, force: true });
    fs.rmSync(path.join(runDir, `${s.path}${HASHES_SUFFIX}`), { force: true });
  }
  if (skipped.length > 0)
    fs.rmSync(path.join(runDir, CHECKPOINTS_DIR, LATEST_FILE), { force: true });
  for (const s of skipped) {
    warn(
      ctx,
      run.id,
      'checkpoint_skipped',
      `checkpoint ${s.path} of run ${run.id} is not used: ${s.why}`,
    );
  }
  // What this pod trained past the checkpoint (or since it started, when the checkpoint came
  // from an earlier pod or there is none) is lost: at most from then to now.
  const podStartMs = Date.parse(attempts.at(-1)!.startedAt);
  const stepMs = checkpoint === null ? null : steps.at(checkpoint.step);
  const lostS = Math.max(0, (nowMs - Math.max(podStartMs, stepMs ?? podStartMs)) / 1000);
  const attemptNo = attempts.length + 1;
  const from =
    checkpoint === null
      ? 'from step 0 (no verified checkpoint is home)'
      : `from ${path.basename(checkpoint.path)} (step ${checkpoint.step})`;
  warn(
    ctx,
    run.id,
    'recovering',
    `${died}; attempt ${attemptNo} of ${limit + 1} on a new pod ${from}, lost ≤ ${lostS.toFixed(1)} s of training; spent so far ${usd(spent)}`,
  );
  attempts.push({
    podId: null,
    startedAt: rfc3339(nowMs),
    endedAt: null,
    reason: null,
    resumedFromStep: checkpoint?.step ?? null,
    resumedFromCheckpoint: checkpoint?.path ?? null,
    costUsd: null,
  });
  reopenRun(run, null);
  run.job = null;
  ctx.store.saveRun(run);
  publishState(ctx, run);
  // The old pod's record goes with the run's local logs; pod.json is the new pod's.
  archivePod(ctx, run.id, pod);
  const env = await placeCheckpoint(runDir, run, plan.job, checkpoint);
  const prefix = metricsUpTo(runDir, checkpoint?.step ?? null);
  fs.writeFileSync(path.join(runDir, METRICS_FILE), prefix);
  // The mirror reads the new pod's file on from its own size: it must be that same prefix.
  fs.mkdirSync(path.join(runDir, CHECKPOINTS_DIR), { recursive: true });
  fs.writeFileSync(path.join(runDir, CHECKPOINTS_DIR, METRICS_FILE), prefix);
  // The new pod's limits are what is left of the run's; the target stays as the config has it.
  const limits: PodLimits = { costCapUsd: leftUsd, maxHours: leftMs / 3_600_000 };
  // The run's files are all in place: they are sent as soon as the new pod answers SSH.
  const ahead = new UploadAhead(ctx, run, Promise.resolve());
  let started;
  try {
    started = await startPod(ctx, plan.target, limits, run, false, signal, ahead.onReachable, pod);
  } catch (error) {
    await ahead.settled();
    throw error;
  }
  const { record: next, provisioned } = started;
  attempts.at(-1)!.podId = next.podId;
  attempts.at(-1)!.startedAt = next.createdAt ?? attempts.at(-1)!.startedAt;
  const executor = provisioned.executor;
  try {
    await startJobOnPod(ctx, executor, run, plan.job, env, {
      secrets: plan.secrets,
      uploaded: ahead.uploadOn(executor),
    });
  } catch (error) {
    try {
      await remove(ctx, next, 'requested', 'client');
    } catch (removeError) {
      log(ctx, 'error', describeError(removeError));
    }
    closeAttempt(run, next, ctx.clock.nowMs(), null);
    failRun(
      ctx,
      run,
      'recovery_failed',
      `${died}; the job could not start on the new pod: ${describeError(error)}`,
    );
    executor.dispose();
    throw error;
  }
  next.state = 'running';
  try {
    ctx.store.savePod(next);
  } catch (error) {
    executor.dispose();
    throw error;
  }
  publishState(ctx, run);
  return { pod: next, executor, fromOffset: prefix.length };
}

/** Keeps the dead pod's record as `.pod/pod-<id>.json` (local only), for `runs` and the user. */
function archivePod(ctx: PodCtx, runId: string, pod: PodRecord): void {
  try {
    const dir = path.join(ctx.store.runDir(runId), POD_LOG_DIR);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const from = path.join(ctx.store.runDir(runId), 'pod.json');
    fs.copyFileSync(from, path.join(dir, `pod-${pod.podId ?? 'none'}.json`));
  } catch {
    // Only a copy: the attempts in run.json name the pod.
  }
}

/**
 * Puts the checkpoint into the run directory (`resume/checkpoint-N/`, uploaded with it) in place
 * of any earlier one, and returns the job's env naming it on the pod. Without a checkpoint the
 * run starts over as it first started (a run resumed from another keeps that start).
 */
async function placeCheckpoint(
  runDir: string,
  run: RunRecord,
  job: TrainerJob,
  checkpoint: { path: string; step: number } | null,
): Promise<Record<string, string>> {
  const resumeDir = path.join(runDir, RESUME_DIR);
  if (checkpoint === null) {
    // A copy an earlier recovery placed is not a start: its curve is not carried, and the
    // checkpoints home (which it came from) did not verify. Only a --resume-from start stays.
    if (run.attempts?.some((a) => a.resumedFromCheckpoint !== null)) {
      fs.rmSync(resumeDir, { recursive: true, force: true });
      return {};
    }
    const earlier = fs.existsSync(resumeDir)
      ? fs.readdirSync(resumeDir).find((n) => /^checkpoint-\d+$/.test(n))
      : undefined;
    return earlier === undefined
      ? {}
      : { [RESUME_ENV]: `${run.remoteDir}/${RESUME_DIR}/${earlier}` };
  }
  fs.rmSync(resumeDir, { recursive: true, force: true });
  return placeResumeCopy(
    runDir,
    run,
    job,
    path.join(runDir, checkpoint.path),
    path.basename(checkpoint.path),
    `this run goes on on a new pod from step ${checkpoint.step}`,
  );
}
