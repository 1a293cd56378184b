/**
 * The part of a recovery that is the same for one pod and for a cluster (a group of pods): once
 * the dead attempt's pods are confirmed deleted and its cost counted, whether the run may go on
 * (max_recoveries, what is left of max_hours and of its cost cap), from which checkpoint (the
 * newest streamed home whose files hash again to the pod's list), and the run made ready for the
 * next attempt: its attempt recorded, its metrics file cut back to the checkpoint's step, the
 * checkpoint placed in the run directory (uploaded with it) and named to the job. What starts the
 * next attempt (a pod, a cluster) is the caller's.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { rfc3339 } from '../clock';
import type { RunpodTargetConfig } from '../config/types';
import type { EventBus } from '../events';
import { HASHES_SUFFIX, newestVerified, metricsUpTo } from '../pod/checkpointHome';
import { LATEST_FILE } from '../pod/checkpointStream';
import { failRun, publishState, warn, type PodCtx } from '../pod/context';
import { PodError } from '../pod/podError';
import type { AttemptEnd, RunRecord } from '../runs/runRecord';
import { reopenRun } from '../runs/runEnd';
import { CHECKPOINTS_DIR } from '../runs/store';
import { METRICS_FILE, RESUME_DIR, RESUME_ENV, type TrainerJob } from '../train/job';
import { placeResumeCopy } from '../train/resumeCopy';

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

export const usd = (value: number): string => `$${value.toFixed(value < 1 ? 4 : 2)}`;

export interface DeadAttempt {
  /** What died, said to the user: `pod abc died at step 12 (Runpod deleted it)`. */
  died: string;
  death: AttemptEnd;
  /** What the follow threw or found (kept as the refusal's cause). */
  cause: unknown;
  /** Every pod of the run so far, the dead attempt's included (its estimate), USD. */
  spentUsd: number;
  /** What the next attempt bills per hour (a pod's rate; a cluster's is N × a member's). */
  usdPerHour: number;
  /** The next attempt, said to the user: `a new pod`, `a new cluster of 2 nodes`. */
  on: string;
  target: RunpodTargetConfig;
  job: TrainerJob;
  steps: StepTimes;
  signal?: AbortSignal;
}

/** What the next attempt starts with. */
export interface NextAttempt {
  /** What is left of the run's cost cap, USD (null: the run has none). */
  leftUsd: number | null;
  /** What is left of max_hours. */
  leftMs: number;
  /** The job's env naming the checkpoint on the new pod(s) (empty when starting over). */
  env: Record<string, string>;
  /** The metrics file's size on the new pod before its job appends (the follow goes on there). */
  fromOffset: number;
}

/**
 * The run's last attempt ended (`dead`; closed with its cost by the caller): the next one
 * recorded and the run made ready for it, or the run failed saying why not, and thrown (a
 * PodError whose next action names the checkpoints home).
 */
export async function nextAttempt(
  ctx: PodCtx,
  run: RunRecord,
  dead: DeadAttempt,
): Promise<NextAttempt> {
  const { died, death, spentUsd: spent, target, steps } = dead;
  const nowMs = ctx.clock.nowMs();
  const attempts = run.attempts ?? [];
  const used = attempts.length - 1;
  const limit = target.maxRecoveries;
  const refuse = (why: string): never => {
    failRun(ctx, run, 'recovery_failed', `${died}; not recovered: ${why}`);
    throw new PodError(
      death === 'pod_exited' ? 'pod_stopped' : 'pod_gone',
      `${died}; not recovered: ${why}`,
      `The checkpoints streamed home stay in runs/${run.id}/checkpoints/; train again, or resume from them.`,
      { cause: dead.cause },
    );
  };
  if (dead.signal?.aborted) refuse('the client was stopping');
  if (used >= limit) {
    refuse(`max_recoveries = ${limit}, and ${used === 1 ? 'it was' : `all ${used} were`} used`);
  }
  const elapsedMs = nowMs - Date.parse(attempts[0]?.startedAt ?? run.created);
  const leftMs = target.maxHours * 3_600_000 - elapsedMs;
  const needMs = ctx.timing.recoveryMinLeftMs;
  if (leftMs < needMs) {
    refuse(
      `${Math.max(0, leftMs / 1000).toFixed(0)} s of max_hours left, under the ${(needMs / 1000).toFixed(0)} s ${dead.on} needs (spent so far ${usd(spent)})`,
    );
  }
  // The run's cap: the one `[budget]`'s gate gave it (already within max_cost_usd), else
  // max_cost_usd. The next attempt is armed with what is left of it.
  const budgetCap = run.budgetCapUsd ?? null;
  const capUsd = budgetCap ?? target.maxCostUsd;
  const capName = budgetCap !== null ? 'the cost cap [budget] gave the run' : 'max_cost_usd';
  let leftUsd: number | null = null;
  if (capUsd !== null) {
    leftUsd = Math.round((capUsd - spent) * 10_000) / 10_000;
    const needUsd = (dead.usdPerHour * needMs) / 3_600_000;
    if (leftUsd <= needUsd) {
      refuse(
        `${usd(Math.max(0, leftUsd))} of ${capName} ${usd(capUsd)} left (spent so far ${usd(spent)}), under the ${usd(needUsd)} ${(needMs / 1000).toFixed(0)} s on ${dead.on} costs`,
      );
    }
  }
  const runDir = ctx.store.runDir(run.id);
  const { checkpoint, skipped } = await newestVerified(runDir);
  // A copy that failed its hashes is of no use: removed, with latest.json naming it, so that the
  // new attempt's checkpoints from the step resumed on stream home again.
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
  // What this attempt trained past the checkpoint (or since it started, when the checkpoint came
  // from an earlier attempt or there is none) is lost: at most from then to now.
  const startMs = Date.parse(attempts.at(-1)?.startedAt ?? run.created);
  const stepMs = checkpoint === null ? null : steps.at(checkpoint.step);
  const lostS = Math.max(0, (nowMs - Math.max(startMs, stepMs ?? startMs)) / 1000);
  const attemptNo = attempts.length + 1;
  const from =
    checkpoint === null
      ? 'from step 0 (no verified checkpoint is home)'
      : `from ${path.basename(checkpoint.path)} (step ${checkpoint.step})`;
  warn(
    ctx,
    run.id,
    'recovering',
    `${died}; attempt ${attemptNo} of ${limit + 1} on ${dead.on} ${from}, lost ≤ ${lostS.toFixed(1)} s of training; spent so far ${usd(spent)}`,
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
  run.attempts = attempts;
  reopenRun(run, null);
  run.job = null;
  ctx.store.saveRun(run);
  publishState(ctx, run);
  const env = await placeCheckpoint(runDir, run, dead.job, checkpoint);
  const prefix = metricsUpTo(runDir, checkpoint?.step ?? null);
  fs.writeFileSync(path.join(runDir, METRICS_FILE), prefix);
  // The mirror reads the new attempt's file on from its own size: it must be that same prefix.
  fs.mkdirSync(path.join(runDir, CHECKPOINTS_DIR), { recursive: true });
  fs.writeFileSync(path.join(runDir, CHECKPOINTS_DIR, METRICS_FILE), prefix);
  return { leftUsd, leftMs, env, fromOffset: prefix.length };
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
