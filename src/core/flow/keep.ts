/**
 * Keep and release a run's pod at runtime.
 */
import type { OverbrainerConfig } from '../config/types';
import { log } from '../pod/context';
import { setKeep } from '../pod/podEnd';
import { againOnDrop, reconnect } from '../pod/reconnect';
import { armReleaseDeadline } from '../pod/podEnd';
import { jobStatus } from '../train/job';
import type { PodRecord } from '../runs/podRecord';
import { attach } from './attach';
import { type FlowDeps, FlowError, podCtx } from './deps';

/**
 * Keeps (or releases) the pod of a run at runtime. A release whose job already ended while
 * nobody followed collects the run here (retrieves and verifies its results, then deletes the
 * pod, as attach would): left to its watchdog, a pod past its deadline would be deleted with
 * results nobody brought home. `config` gives the artifacts to bring back (the defaults without).
 *
 * A pod kept at its creation (`--keep-pod`) has no deadline on its watchdog: its release gives it
 * one first (see {@link releaseDeadlineUnixS}; `config` must name the run's target), with a fresh
 * lease before it when a followed job still runs; then it is released, retrieved and deleted as
 * any run.
 */
export async function keepPod(
  deps: FlowDeps,
  runId: string,
  keep: boolean,
  config: OverbrainerConfig | null = null,
): Promise<PodRecord> {
  const run = deps.store.loadRun(runId);
  const pod = deps.store.loadPod(runId);
  if (pod === null || pod.podId === null || pod.state === 'deleted') {
    throw new FlowError('no_pod', `run ${runId} has no pod to ${keep ? 'keep' : 'release'}`, null);
  }
  if (!['running', 'awaiting_retrieval', 'kept', 'ready'].includes(pod.state)) {
    throw new FlowError(
      'wrong_pod_state',
      `the pod of run ${runId} is ${pod.state}: only a running or awaiting pod can be ${keep ? 'kept' : 'released'}`,
      null,
    );
  }
  // A pod kept at creation carries OVERBRAINER_KEEP_POD=1 and no deadline in its env: removing
  // the runtime keep marker alone would leave its watchdog keeping it while pod.json said
  // released. Its release writes it a deadline first, from the target's max_hours.
  const keptAtCreation = !keep && pod.deadlineUnixS === null;
  const target = config?.targets[run.target];
  if (keptAtCreation && target?.kind !== 'runpod') {
    throw new FlowError(
      'bad_config',
      `pod ${pod.podId} of run ${runId} was kept when it was created (--keep-pod): its release needs the max_hours and retrieve_grace_minutes of its target "${run.target}", which ${config === null ? 'no readable overbrainer.toml' : 'overbrainer.toml no longer'} gives`,
      `Fix overbrainer.toml (target "${run.target}") and release it again, or remove it with "overbrainer pod rm ${runId}".`,
    );
  }
  const ctx = podCtx(deps);
  // Each step may be done twice (a look, the deadline file written whole, the keep marker), so a
  // connection that drops under one reaches the pod again (its port may have changed) and does it
  // again.
  const what = `${keep ? 'keeping' : 'releasing'} pod ${pod.podId}`;
  let tries = 0;
  const ended = await againOnDrop(ctx, what, async () => {
    tries++;
    const executor = await reconnect(ctx, pod, run);
    // A released pod gone after a drop was deleted by its watchdog (its results were retrieved):
    // what the release asked for, recorded by the look that found it gone. Its keep marker went
    // with the try whose answer was lost: the record keeps it no more either.
    // Its deadline not passed, the look that found it gone could not name who deleted it: the
    // watchdog did, on the retrieved marker (CI: lifecycle.guards' release recorded `unknown`).
    if (executor === null && !keep && tries > 1) {
      pod.keep = false;
      if (pod.deletedBy === 'unknown') pod.deletedBy = 'watchdog';
      deps.store.savePod(pod);
      return false;
    }
    if (executor === null)
      throw new FlowError('no_pod', `pod ${pod.podId} of run ${runId} no longer exists`, null);
    try {
      if (keptAtCreation && target?.kind === 'runpod') {
        const running = (await jobStatus(executor, run.remoteDir)).kind === 'running';
        const deadlineUnixS = releaseDeadlineUnixS(
          pod.createdUnixS,
          target.maxHours,
          target.retrieveGraceS,
          running,
          deps.clock.nowMs(),
        );
        const followed = deps.store.lockHolder(runId) !== null;
        await armReleaseDeadline(ctx, pod, run, executor, deadlineUnixS, running && followed);
      }
      await setKeep(ctx, pod, run, executor, keep);
      return (
        !keep &&
        // setKeep deletes a released pod whose results were already retrieved.
        (pod.state as PodRecord['state']) !== 'deleted' &&
        (await jobStatus(executor, run.remoteDir)).kind !== 'running' &&
        deps.store.lockHolder(runId) === null
      );
    } finally {
      executor.dispose();
    }
  });
  if (!ended) return pod;
  log(
    ctx,
    'info',
    `the job of run ${runId} has ended: retrieving its results, then deleting the pod`,
  );
  const collected = await attach(deps, config, runId);
  return collected.pod ?? pod;
}

/**
 * The deadline a pod kept at its creation gets when it is released: its creation + `max_hours`,
 * as if it had never been kept; when that has passed and its job has ended, now + the retrieve
 * grace (the time its results have to come home). A job still running past it is held only by a
 * follower's lease, as any run's.
 */
export function releaseDeadlineUnixS(
  createdUnixS: number | null,
  maxHours: number,
  retrieveGraceS: number,
  running: boolean,
  nowMs: number,
): number {
  const nowS = Math.floor(nowMs / 1000);
  const byMaxHours = (createdUnixS ?? nowS) + Math.round(maxHours * 3600);
  if (byMaxHours > nowS || running) return byMaxHours;
  return nowS + Math.round(retrieveGraceS);
}
