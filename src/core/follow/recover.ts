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
import type { Executor } from '../exec/executor';
import { failRun, log, publishState, type PodCtx } from '../pod/context';
import { PodError } from '../pod/podError';
import { type PodLimits, startPod } from '../pod/provision';
import { forgetKeys, remove } from '../pod/remove';
import type { PodRecord } from '../runs/podRecord';
import type { AttemptEnd, RunAttempt, RunRecord } from '../runs/runRecord';
import { POD_LOG_DIR } from '../runs/store';
import type { TrainerJob } from '../train/job';
import { startJobOnPod, UploadAhead } from './startJob';
import { describeError } from '../errors';
import { nextAttempt, type StepTimes } from './nextAttempt';

export { StepTimes } from './nextAttempt';
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
  return { target, job: trainerJobOf(training, target.venv, target), secrets };
}

/**
 * How the pod died when `error` (what settling a failed watch threw) says it died under a running
 * job, or null for anything else (a limit, `pod rm`, a lost connection to a pod still there).
 */
export function deathOf(error: unknown, pod: PodRecord): AttemptEnd | null {
  if (!(error instanceof PodError) || pod.keep) return null;
  if (error.kind === 'pod_gone' && pod.deletedBy !== 'pod_rm') return 'pod_deleted';
  if (error.kind === 'pod_stopped') return 'pod_exited';
  if (error.kind === 'host_lost') return 'host_lost';
  return null;
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
  host_lost: 'its host stopped answering while Runpod listed it RUNNING, so the client deleted it',
  node_failed: 'a node of its cluster failed',
};

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
  const diedAt = steps.last === null ? 'before its first step' : `at step ${steps.last}`;
  const died = `pod ${oldPodId} died ${diedAt} (${DEATH_WORDS[death]})`;
  const next = await nextAttempt(ctx, run, {
    died,
    death,
    cause,
    // Every pod of the run so far (the earlier attempts', the walk's, swept duplicates, strays).
    spentUsd: pod.runSpendUsd(nowMs),
    usdPerHour: pod.costPerHourUsd ?? 0,
    on: 'a new pod',
    target: plan.target,
    job: plan.job,
    steps,
    signal,
  });
  // The old pod's record goes with the run's local logs; pod.json is the new pod's.
  archivePod(ctx, run.id, pod);
  const { env, leftUsd, leftMs } = next;
  const attempts = run.attempts!;
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
  const { record: nextPod, provisioned } = started;
  attempts.at(-1)!.podId = nextPod.podId;
  attempts.at(-1)!.startedAt = nextPod.createdAt ?? attempts.at(-1)!.startedAt;
  const executor = provisioned.executor;
  try {
    await startJobOnPod(ctx, executor, run, plan.job, env, {
      secrets: plan.secrets,
      uploaded: ahead.uploadOn(executor),
    });
  } catch (error) {
    try {
      await remove(ctx, nextPod, 'requested', 'client');
    } catch (removeError) {
      log(ctx, 'error', describeError(removeError));
    }
    closeAttempt(run, nextPod, ctx.clock.nowMs(), null);
    failRun(
      ctx,
      run,
      'recovery_failed',
      `${died}; the job could not start on the new pod: ${describeError(error)}`,
    );
    executor.dispose();
    throw error;
  }
  nextPod.state = 'running';
  try {
    ctx.store.savePod(nextPod);
  } catch (error) {
    executor.dispose();
    throw error;
  }
  publishState(ctx, run);
  return { pod: nextPod, executor, fromOffset: next.fromOffset };
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
