/**
 * A new run on a Runpod target (one pod or a cluster), made past the `[budget]` gate: before any
 * run directory or pod, a run that would pass the budget is refused (or fitted). Pods that ended
 * while no client ran are recorded (with their bills) before the spend is read, and the budget
 * lock spans that read to the new run's record of its cap (which the spend counts as held until
 * its pod record holds it): two trains never share the same dollars.
 */
import { type OverbrainerConfig, type RunpodTargetConfig, workdirFor } from '../config/types';
import type { RunRecord } from '../runs/runRecord';
import { budgetGate, lockBudget, type BudgetDecision } from './budget';
import { type FlowDeps, podCtx } from './deps';
import { settleGonePods } from './settleBills';

/** The run made, with the gate's decision (null without `[budget]` limits). */
export interface BudgetedRun {
  run: RunRecord;
  budget: BudgetDecision | null;
}

/** Makes the run of a train on `target` (`keep`: its pod is kept), once the budget lets it. */
export async function createBudgetedRun(
  deps: FlowDeps,
  config: OverbrainerConfig,
  target: RunpodTargetConfig,
  keep: boolean,
  signal?: AbortSignal,
): Promise<BudgetedRun> {
  const budgetLock = config.budget ? await lockBudget(deps, signal) : null;
  try {
    if (budgetLock !== null) await settleGonePods(deps, config, signal);
    const { client } = podCtx(deps);
    const nowMs = deps.clock.nowMs();
    const budget = await budgetGate(
      client,
      deps.store,
      config,
      target,
      keep,
      nowMs,
      deps.timing,
      signal,
    );
    const run = deps.store.create({
      project: config.projectName,
      target: target.name,
      remoteDir: (id) => `${workdirFor(target)}/${id}`,
      budgetCapUsd: budget?.budgetCapUsd ?? null,
    });
    return { run, budget };
  } finally {
    budgetLock?.dispose();
  }
}
