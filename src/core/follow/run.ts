/**
 * Following a run on its pod to its end, in one loop: the job watched under the pod's lease
 * (./watch.ts), followed to a new endpoint when the pod restarts (./moved.ts), what the watch
 * found acted on (./settle.ts), the run gone on on a new pod when its pod died under the job
 * (./recover.ts), its end collected (./collect.ts). Each step returns a value to this loop: none
 * calls back into it.
 */
import { describeError } from '../errors';
import type { Executor } from '../exec/executor';
import { log, type PodCtx } from '../pod/context';
import { podHandle } from '../pod/podHandle';
import { watchdogWhileNobodyFollows } from '../pod/watchdogWords';
import type { PodRecord } from '../runs/podRecord';
import type { AttemptEnd, RunRecord } from '../runs/runRecord';
import { jobOutcome } from '../train/outcome';
import { collect, type Followed } from './collect';
import { followMoved } from './moved';
import {
  closeAttempt,
  deathOf,
  type OnPod,
  recoverAfterDeath,
  type RecoveryPlan,
  StepTimes,
} from './recover';
import { settleWatch } from './settle';
import { watchLeased, type Watched } from './watch';

/** How a run on a pod is followed: what comes home, and recovery on a new pod when it dies. */
export interface FollowOptions {
  /** The entries brought home once the job ended (`[training] artifacts`). */
  artifacts: readonly string[];
  /** Go on on a new pod when the pod dies mid-job (null: the run fails as before). */
  plan?: RecoveryPlan | null;
  /** Most one retrieval brings home (GB): the target's `max_retrieve_gb`; default 200. */
  maxRetrieveGb?: number;
  /** Stops following (the job and the pod go on); never stops a delete under way. */
  signal?: AbortSignal;
}

/**
 * How following ended: the run's end collected, or following stopped on the signal (the job and
 * its pod go on; `message` says so and how to reach them again).
 */
export type FollowEnd =
  { kind: 'collected'; result: Followed } | { kind: 'stopped'; message: string };

/** How a pod died under its job, as settling its watch said (`cause`). */
export interface PodDeath {
  pod: PodRecord;
  death: AttemptEnd;
  cause: unknown;
}

/**
 * Follows the running job of `run` on `start` to its end, then retrieves it and ends the pod;
 * with a recovery plan, a pod that dies mid-job is followed by a new one. `start.executor` stays
 * the caller's; the executors this follow opens (a moved pod's, a new pod's) are its own.
 */
export function followOnPod(
  ctx: PodCtx,
  run: RunRecord,
  start: OnPod,
  options: FollowOptions,
): Promise<FollowEnd> {
  return follow(ctx, run, { kind: 'watch', at: start }, options);
}

/**
 * The pod of `run` died while nobody followed (attach found it gone or stopped): the run goes on
 * on a new pod, followed to its end (see {@link followOnPod}); `plan` is required here.
 */
export function followAfterDeath(
  ctx: PodCtx,
  run: RunRecord,
  died: PodDeath,
  options: FollowOptions & { plan: RecoveryPlan },
): Promise<FollowEnd> {
  return follow(ctx, run, { kind: 'recover', died }, options);
}

type Step = { kind: 'watch'; at: OnPod } | { kind: 'recover'; died: PodDeath };

async function follow(
  ctx: PodCtx,
  run: RunRecord,
  first: Step,
  options: FollowOptions,
): Promise<FollowEnd> {
  const { artifacts, maxRetrieveGb, signal } = options;
  const plan = options.plan ?? null;
  const steps = plan === null ? null : new StepTimes(ctx.bus, run.id, () => ctx.clock.nowMs());
  // The executors this follow opened for the pod it follows now (a new pod's, a moved one's).
  let opened: Executor[] = [];
  const closeOpened = (): void => {
    for (const executor of opened) executor.dispose();
    opened = [];
  };
  try {
    let step = first;
    for (;;) {
      if (step.kind === 'recover') {
        const { pod, death, cause } = step.died;
        const at = await recoverAfterDeath(ctx, run, pod, death, cause, plan!, steps!, signal);
        closeOpened();
        opened.push(at.executor);
        step = { kind: 'watch', at };
      }
      const { pod } = step.at;
      const { watched, executor } = await watchMoving(ctx, run, step.at, opened, options);
      if (
        signal?.aborted &&
        watched.kind !== 'deadline_passed' &&
        watched.kind !== 'cost_cap_passed'
      ) {
        return { kind: 'stopped', message: stopFollowingMessage(ctx, run, pod) };
      }
      let ended;
      try {
        ended = await settleWatch(ctx, pod, run, watched);
      } catch (error) {
        const death = plan === null ? null : deathOf(error, pod);
        if (death === null) throw error;
        step = { kind: 'recover', died: { pod, death, cause: error } };
        continue;
      }
      const outcome = jobOutcome(ended.status, ended.metrics, run.id)!;
      const result = await collect(ctx, executor, run, pod, outcome, artifacts, maxRetrieveGb);
      if (run.attempts !== undefined) {
        closeAttempt(run, pod, ctx.clock.nowMs(), null);
        ctx.store.saveRun(run);
      }
      return { kind: 'collected', result };
    }
  } finally {
    closeOpened();
    steps?.dispose();
  }
}

/** How many times one follow goes after its pod to a new SSH endpoint before it gives up. */
const MAX_ENDPOINT_MOVES = 3;

/**
 * Watches the job on `at`; when the watch fails because the pod restarted on a new port (Runpod
 * publishes a restarted container anew), follows it there from where the metrics stopped, a
 * bounded number of times. The executors it opens go into `opened`.
 */
async function watchMoving(
  ctx: PodCtx,
  run: RunRecord,
  at: OnPod,
  opened: Executor[],
  { signal, maxRetrieveGb }: FollowOptions,
): Promise<{ watched: Watched; executor: Executor }> {
  const { pod } = at;
  let executor = at.executor;
  let watched = await watchLeased(ctx, run, podHandle(ctx, pod, executor), signal, at.fromOffset, {
    maxRetrieveGb,
  });
  for (let moves = 0; watched.kind === 'failed' && moves < MAX_ENDPOINT_MOVES; moves++) {
    if (signal?.aborted) break;
    const next = await followMoved(ctx, pod, run, signal).catch((error: unknown) => {
      log(
        ctx,
        'debug',
        `run ${run.id}: cannot follow its pod to a new endpoint: ${describeError(error)}`,
      );
      return null;
    });
    if (next === null) break;
    opened.push(next);
    executor = next;
    watched = await watchLeased(ctx, run, podHandle(ctx, pod, executor), signal, watched.offset, {
      maxRetrieveGb,
    });
  }
  return { watched, executor };
}

/** What stopping the follow leaves running (Ctrl-C once the job runs stops only the follow). */
export function stopFollowingMessage(ctx: PodCtx, run: RunRecord, pod: PodRecord): string {
  const watchdog = watchdogWhileNobodyFollows(pod, ctx.clock.nowMs() + ctx.timing.leaseTtlMs);
  if (pod.keep) {
    return `stopped following run ${run.id}: the job keeps running; attach again with \`overbrainer train attach ${run.id}\`; ${watchdog}`;
  }
  return (
    `stopped following run ${run.id}: the job and pod ${pod.podId ?? ''} keep running; attach again with ` +
    `\`overbrainer train attach ${run.id}\`, or remove the pod with \`overbrainer pod rm ${run.id}\`; ${watchdog}`
  );
}
