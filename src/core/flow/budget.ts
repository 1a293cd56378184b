/**
 * The budget gate at train start (before any run directory or pod exists): the run's worst case
 * (the quote's: max_hours at the dearest GPU type that may be tried, or max_cost_usd, plus the
 * graces) against what is left of `[budget]` today and this month. A run that would pass it is
 * refused with the figures, or, with `fit_runs_to_budget = true`, given a `max_cost_usd` that
 * fits. Either way the pod gets a cost cap of at most what is left, armed on its watchdog at
 * creation: the budget holds with no client running.
 */
import type { OverbrainerConfig, RunpodTargetConfig } from '../config/types';
import type { RunpodClient } from '../runpod/client';
import { heldByEarlierRuns, type Quote } from '../runs/quote';
import { projectSpend, type ProjectSpend } from '../runs/spend';
import type { RunLock } from '../runs/lock';
import type { RunStore } from '../runs/store';
import { FlowError, type FlowDeps } from './deps';
import { quoteForTarget } from './quote';

/** A run refused by the budget: `figures` holds what the message says. */
export class BudgetError extends FlowError {
  constructor(
    message: string,
    hint: string,
    readonly figures: { worstUsd: number | null; leftUsd: number; period: 'day' | 'month' },
  ) {
    super(message, hint);
    this.name = 'BudgetError';
  }
}

/** What the gate decided for a run it lets start. */
export interface BudgetDecision {
  /** The cost cap the pod's watchdog gets: min(max_cost_usd, what is left); null when kept. */
  maxCostUsd: number | null;
  /** The cap was lowered to fit the budget (`fit_runs_to_budget`): the run says so. */
  fitted: boolean;
  /** One line for the run's log: the figures the decision rests on. */
  line: string;
  spend: ProjectSpend;
  quote: Quote;
}

/** How often a train waiting for the budget lock looks again. */
const BUDGET_LOCK_POLL_MS = 200;

/**
 * Takes the project's budget lock, waiting while another train of this project holds it (it
 * reads the spend and the catalog, then records its run's cap): held from the gate's read of
 * the spend until the new run records its cap, so two trains started at once cannot both count
 * the same dollars as left. Gives up after `timing.budgetLockWaitMs`, naming the holder.
 */
export async function lockBudget(deps: FlowDeps, signal?: AbortSignal): Promise<RunLock> {
  const giveUpAtMs = deps.clock.nowMs() + deps.timing.budgetLockWaitMs;
  for (;;) {
    const lock = deps.store.lockBudget(deps.owner);
    if (lock !== null) return lock;
    if (deps.clock.nowMs() >= giveUpAtMs) {
      throw new FlowError(
        `another train of this project has been checking the budget for ${Math.round(deps.timing.budgetLockWaitMs / 1000)} s (${deps.store.budgetLockHolder() ?? 'its holder is unknown'})`,
        'Wait for that train to start its pod (or close the window or CLI that is stuck), then train again.',
      );
    }
    await deps.clock.sleep(BUDGET_LOCK_POLL_MS, signal);
  }
}

/** The smallest cap worth starting a pod for. */
const MIN_FITTED_CAP_USD = 0.01;

const money = (usd: number): string => `$${usd.toFixed(2)}`;
const floorCents = (usd: number): number => Math.floor(usd * 100 + 1e-9) / 100;

/**
 * Checks a run of `target` against `config.budget` at `nowMs`; null when no budget applies (none
 * set). Throws {@link BudgetError} for a run that would pass it.
 */
export async function budgetGate(
  client: RunpodClient,
  store: RunStore,
  config: OverbrainerConfig,
  target: RunpodTargetConfig,
  keep: boolean,
  nowMs: number,
  signal?: AbortSignal,
): Promise<BudgetDecision | null> {
  const budget = config.budget ?? null;
  if (budget === null || (budget.maxUsdPerDay === null && budget.maxUsdPerMonth === null)) {
    return null;
  }
  const spend = projectSpend(store, budget, nowMs);
  const left = spend.leftUsd ?? 0;
  const period = spend.bindingPeriod ?? 'day';
  const p = period === 'day' ? spend.day : spend.month;
  const where = `${period === 'day' ? 'today (UTC)' : 'this month (UTC)'}: ${money(p.spentUsd)} spent${p.reservedUsd > 0 ? `, ${money(p.reservedUsd)} held for live pods` : ''} of ${money(p.limitUsd ?? 0)}`;
  const catalog = await client.listGpuTypes({
    count: target.gpuCount,
    cloud: 'SECURE',
    includeAvailability: true,
    signal,
  });
  const q = quoteForTarget(target, catalog, heldByEarlierRuns(store, target.name));
  const key = period === 'day' ? 'max_usd_per_day' : 'max_usd_per_month';
  if (q.worstUsd === null) {
    throw new BudgetError(
      `the run cannot be checked against the budget: the Runpod catalog gives no price for ${q.rates.map((r) => r.gpuType).join(', ') || 'any GPU type of the target'}`,
      `Pick GPU types the catalog prices in [targets.${target.name}] gpu_types (\`overbrainer train --dry-run\` shows them), or remove ${key} from [budget].`,
      { worstUsd: null, leftUsd: left, period },
    );
  }
  const dearest = Math.max(
    ...q.rates.map((r) => r.usdPerHour).filter((r): r is number => r !== null),
  );
  const gracesUsd = (dearest * (target.bootGraceS + target.retrieveGraceS)) / 3600;
  if (q.worstUsd <= left) {
    const cap = keep
      ? null
      : floorCents(target.maxCostUsd === null ? left : Math.min(target.maxCostUsd, left));
    return {
      maxCostUsd: cap,
      fitted: false,
      line: `budget: worst case ${money(q.worstUsd)} fits what is left ${money(left)} ${where}${cap === null ? '; the pod is kept, so no cost cap bounds it: remove it when done' : `; the pod's watchdog deletes it at ${money(cap)}`}`,
      spend,
      quote: q,
    };
  }
  const fittedCap = floorCents(left - gracesUsd);
  if (budget.fitRunsToBudget && !keep && fittedCap >= MIN_FITTED_CAP_USD) {
    return {
      maxCostUsd: fittedCap,
      fitted: true,
      line: `budget: worst case ${money(q.worstUsd)} would pass what is left ${money(left)} ${where}; fit_runs_to_budget gives this run max_cost_usd = ${money(fittedCap)} (graces ${money(gracesUsd)} on top): the job is asked for a snapshot before its pod is deleted there`,
      spend,
      quote: quoteForTarget(target, catalog, heldByEarlierRuns(store, target.name), fittedCap),
    };
  }
  const why =
    budget.fitRunsToBudget && !keep
      ? `; too little is left to fit a run (graces alone cost ${money(gracesUsd)})`
      : budget.fitRunsToBudget
        ? '; a kept pod has no cost cap, so it cannot be fitted'
        : '';
  throw new BudgetError(
    `the run's worst case ${money(q.worstUsd)} would pass what is left of the budget, ${money(left)} ${where}${why}`,
    fittedCap >= MIN_FITTED_CAP_USD && !keep
      ? `Set max_cost_usd = ${fittedCap.toFixed(2)} (or lower max_hours) in [targets.${target.name}], or set fit_runs_to_budget = true in [budget] to do that for each run, or raise ${key}.`
      : `Wait until the ${period === 'day' ? 'next UTC day' : 'next UTC month'}, remove kept pods you no longer need (\`overbrainer pod rm RUN\`), or raise ${key} in [budget].`,
    { worstUsd: q.worstUsd, leftUsd: left, period },
  );
}
