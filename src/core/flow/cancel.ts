/**
 * Cancel: the job's process group stopped, what it wrote retrieved, its pod ended.
 */
import { log } from '../pod/context';
import { againOnDrop, reconnect } from '../pod/reconnect';
import { cancelJob, jobStatus } from '../train/job';
import {
  FlowError,
  type RunCommand,
  artifactsOf,
  maxRetrieveGbOf,
  podCtx,
  publishState,
  summaryLine,
} from './deps';
import { collect } from '../follow/collect';
import { collectOnHost } from '../follow/host';
import { hostExecutor, hostResults } from './host';
import { endRun } from '../runs/runEnd';
import { cancelCluster } from './clusterCancel';

/** Cancels a run's job, then retrieves what it wrote and ends its pod. */
export const cancel: RunCommand = async (deps, config, runId, signal) => {
  const run = deps.store.loadRun(runId);
  if (run.state === 'cancelled')
    throw new FlowError('already_ended', `run ${runId} already ended: cancelled`, null);
  if (run.job === null) throw new FlowError('not_started', `run ${runId} has not started`, null);
  const pod = deps.store.loadPod(runId);
  const lock = deps.store.lock(runId, deps.owner);
  try {
    // A run on a cluster (no pod.json: run.json's cluster) is cancelled by deleting the cluster.
    if (pod === null && run.cluster) return await cancelCluster(deps, run, lock);
    if (pod === null) {
      const executor = await hostExecutor(deps, config, run, signal);
      try {
        await cancelJob(executor, run.remoteDir, { signal });
        const cancelled = (await jobStatus(executor, run.remoteDir)).kind === 'cancelled';
        if (lock !== null && cancelled && config?.targets[run.target]?.kind === 'ssh') {
          // What the job wrote on the user's machine comes home, verified; nothing is deleted there.
          return await collectOnHost(
            deps,
            executor,
            run,
            { state: 'cancelled', message: null },
            hostResults(config, run),
          );
        }
        if (lock !== null && cancelled) {
          endRun(run, 'cancelled', 'cancelled', run.message);
          deps.store.saveRun(run);
          publishState(deps, run);
        }
        return { run, pod: null, ending: null, summary: summaryLine(deps, run, null) };
      } finally {
        executor.dispose();
      }
    }
    const ctx = podCtx(deps);
    // The cancel may be done twice: a connection that drops under it reaches the pod again (its
    // port may have changed) and cancels again. A job a later try finds ended was most likely
    // ended by the try whose answer was lost (its status, cancelled, is read below): not said
    // to have ended by itself.
    let tries = 0;
    const { executor, result } = await againOnDrop(
      ctx,
      `cancelling the job of run ${runId}`,
      async () => {
        tries++;
        const reached = await reconnect(ctx, pod, run, signal);
        if (reached === null)
          throw new FlowError('no_pod', `run ${runId}: no pod left, nothing to cancel`, null);
        try {
          return { executor: reached, result: await cancelJob(reached, run.remoteDir, { signal }) };
        } catch (error) {
          reached.dispose();
          throw error;
        }
      },
      signal,
    );
    try {
      if (result === 'already_ended' && tries === 1) {
        log(
          ctx,
          'info',
          `the job of run ${runId} had already ended: collect it with \`overbrainer train attach ${runId}\``,
        );
      }
      const status = await jobStatus(executor, run.remoteDir);
      if (status.kind !== 'cancelled' || lock === null) {
        // Another client follows the run: it sees the cancel and collects the results.
        return { run, pod, ending: null, summary: summaryLine(deps, run, pod) };
      }
      return await collect(
        ctx,
        executor,
        run,
        pod,
        { state: 'cancelled', message: null },
        artifactsOf(config),
        maxRetrieveGbOf(config, run),
      );
    } finally {
      executor.dispose();
    }
  } finally {
    lock?.dispose();
  }
};
