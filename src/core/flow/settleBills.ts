/**
 * Pods that ended while no client ran (the watchdog deleted them at a limit, or someone removed
 * them elsewhere) are found at the next start: a pod record that still says the pod exists, of a
 * run no live client follows, is looked up; a pod Runpod no longer knows is recorded deleted
 * (by attach: the run fails with the limit that ended it) and its bill is read. Deleted pods of
 * this month whose bill was never read (a run's current pod and its other pods, each cluster of a
 * run: its current one and those a node's death replaced) get it read too. The spend then counts what Runpod
 * billed, beside our estimate.
 */
import type { OverbrainerConfig } from '../config/types';
import { recordBilled, recordOtherBills } from '../pod/billing';
import { clusterBillDue, recordClusterBilled } from '../pod/clusterBilling';
import { runClusters } from '../runs/clusterSpend';
import { log } from '../pod/context';
import { lookUp } from '../pod/remove';
import type { PodRecord } from '../runs/podRecord';
import { monthStartMs } from '../runs/spend';
import { attach } from './attach';
import { type FlowDeps, podCtx } from './deps';
import { describeError } from '../errors';

/** The runs whose records changed: a pod found gone, or a bill read. */
export async function settleGonePods(
  deps: FlowDeps,
  config: OverbrainerConfig | null,
  signal?: AbortSignal,
): Promise<string[]> {
  if (deps.client === null) return [];
  const ctx = podCtx(deps);
  const settled: string[] = [];
  const fromMs = monthStartMs(deps.clock.nowMs());
  for (const run of deps.store.list().runs) {
    let pod: PodRecord | null;
    try {
      pod = deps.store.loadPod(run.id);
    } catch {
      continue;
    }
    const clusters = runClusters(run);
    if (pod === null && clusters.length > 0) {
      // A run on a cluster: each deleted cluster's bill (GET /billing/clusters), this month's,
      // the clusters a node's death replaced too (every attempt bills).
      const due = clusters.some(
        (c) => clusterBillDue(c) && Date.parse(c.deletedAt ?? '') >= fromMs,
      );
      if (due && (await recordClusterBilled(ctx, run.id, signal)) > 0) settled.push(run.id);
      continue;
    }
    if (pod === null || pod.podId === null) continue;
    if (pod.state !== 'deleted') {
      const holder = deps.store.lockHolder(run.id);
      if (holder !== null && holder.stale === null) continue;
      const remote = await lookUp(ctx, pod.podId, signal).catch(() => undefined);
      if (remote !== null) continue; // there (or unknown): it is counted while it exists
      try {
        await attach(deps, config, run.id, signal);
      } catch (error) {
        log(ctx, 'warn', `cannot record the end of run ${run.id}'s pod: ${describeError(error)}`);
        continue;
      }
      pod = deps.store.loadPod(run.id);
      if (pod === null || pod.state !== 'deleted') continue;
      settled.push(run.id);
    }
    const deletedMs = pod.deletedAt === null ? NaN : Date.parse(pod.deletedAt);
    if (pod.billedUsd === null && !(deletedMs < fromMs)) {
      if ((await recordBilled(ctx, pod, signal)) !== null && !settled.includes(run.id)) {
        settled.push(run.id);
      }
    }
    // The run's other pods (earlier attempts, deleted duplicates) this month: their bills too.
    const unbilled = pod.otherPods.some(
      (o) => o.billedUsd === null && o.endedMs !== null && o.endedMs >= fromMs,
    );
    if (unbilled && (await recordOtherBills(ctx, pod, signal)) > 0 && !settled.includes(run.id)) {
      settled.push(run.id);
    }
  }
  return settled;
}
