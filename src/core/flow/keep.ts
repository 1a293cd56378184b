/**
 * Keep and release a run's pod at runtime.
 */
import type { OverbrainerConfig } from '../config/types';
import { log } from '../runpod/context';
import { reconnect, setKeep } from '../runpod/lifecycle';
import { jobStatus } from '../train/job';
import type { PodRecord } from '../runs/podRecord';
import { attach } from './attach';
import { type FlowDeps, FlowError, podCtx } from './deps';

/**
 * Keeps (or releases) the pod of a run at runtime. A release whose job already ended while
 * nobody followed collects the run here (retrieves and verifies its results, then deletes the
 * pod, as attach would): left to its watchdog, a pod past its deadline would be deleted with
 * results nobody brought home. `config` gives the artifacts to bring back (the defaults without).
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
    throw new FlowError(`run ${runId} has no pod to ${keep ? 'keep' : 'release'}`, null);
  }
  if (!['running', 'awaiting_retrieval', 'kept', 'ready'].includes(pod.state)) {
    throw new FlowError(
      `the pod of run ${runId} is ${pod.state}: only a running or awaiting pod can be ${keep ? 'kept' : 'released'}`,
      null,
    );
  }
  // A pod kept at creation carries OVERBRAINER_KEEP_POD=1 and no deadline in its env: removing
  // the runtime keep marker would leave its watchdog keeping it while pod.json said released.
  if (!keep && pod.keep && pod.deadlineUnixS === null) {
    throw new FlowError(
      `pod ${pod.podId} of run ${runId} was kept when it was created (--keep-pod): its watchdog never deletes it, so it cannot be released`,
      `Remove it with "overbrainer pod rm ${runId}" when you no longer need it.`,
    );
  }
  const ctx = podCtx(deps);
  const executor = await reconnect(ctx, pod, run);
  if (executor === null)
    throw new FlowError(`pod ${pod.podId} of run ${runId} no longer exists`, null);
  let ended: boolean;
  try {
    await setKeep(ctx, pod, run, executor, keep);
    ended =
      !keep &&
      // setKeep deletes a released pod whose results were already retrieved.
      (pod.state as PodRecord['state']) !== 'deleted' &&
      (await jobStatus(executor, run.remoteDir)).kind !== 'running' &&
      deps.store.lockHolder(runId) === null;
  } finally {
    executor.dispose();
  }
  if (!ended) return pod;
  log(
    ctx,
    'info',
    `the job of run ${runId} has ended: retrieving its results, then deleting the pod`,
  );
  const collected = await attach(deps, config, runId);
  return collected.pod ?? pod;
}
