/**
 * The budget gate at train start (before any run directory or pod exists): the run's worst case
 * (the quote's: the most its pod can bill at the dearest GPU type that may be tried if every
 * client dies, src/core/pod/worstCase.ts) against what is left of `[budget]` today and this
 * month. A run that would pass it is
 * refused with the figures, or, with `fit_runs_to_budget = true`, given a `max_cost_usd` that
 * fits. Either way the pod gets a cost cap of at most what is left, armed on its watchdog at
 * creation: the budget holds with no client running.
 */
import type { OverbrainerConfig, RunpodTargetConfig } from '../config/types';
import type { RunpodClient } from '../runpod/client';
import { heldByEarlierRuns, type Quote } from '../pod/quote';
import { projectSpend, type ProjectSpend } from '../runs/spend';
import { watchdogSpans } from '../pod/worstCase';
import type { Timing } from '../timing';
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
    super('over_budget', message, hint);
    this.name = 'BudgetError';
  }
}

/** What the gate decided for a run it lets start. */
export interface BudgetDecision {
  /**
   * The cost cap the gate grants the run (run.json `budget_cap_usd`): min(max_cost_usd, what is
   * left), the one its pod's watchdog gets; null when kept.
   */
  budgetCapUsd: number | null;
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
        'budget_busy',
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
  timing: Timing,
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
  const history = heldByEarlierRuns(store, target.name);
  const q = quoteForTarget(target, catalog, history, timing);
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
  // On top of a cap, the watchdog's last tick and delete; a run fits with the cap that leaves
  // room for them, unless a pod whose job never starts could cost more than is left.
  const spans = watchdogSpans(timing, target);
  const tailUsd = (dearest * spans.afterCapS) / 3600;
  if (q.worstUsd <= left) {
    const cap = keep
      ? null
      : floorCents(target.maxCostUsd === null ? left : Math.min(target.maxCostUsd, left));
    return {
      budgetCapUsd: cap,
      fitted: false,
      line: `budget: worst case ${money(q.worstUsd)} fits what is left ${money(left)} ${where}${cap === null ? '; the pod is kept, so no cost cap bounds it: remove it when done' : `; the pod's watchdog deletes it at ${money(cap)}`}`,
      spend,
      quote: q,
    };
  }
  const fittedCap = floorCents(left - tailUsd);
  const fittedQuote =
    fittedCap >= MIN_FITTED_CAP_USD
      ? quoteForTarget(target, catalog, history, timing, fittedCap)
      : null;
  const fits = fittedQuote !== null && (fittedQuote.worstUsd ?? Infinity) <= left;
  if (budget.fitRunsToBudget && !keep && fits) {
    return {
      budgetCapUsd: fittedCap,
      fitted: true,
      line: `budget: worst case ${money(q.worstUsd)} would pass what is left ${money(left)} ${where}; fit_runs_to_budget gives this run max_cost_usd = ${money(fittedCap)} (its worst case ${money(fittedQuote.worstUsd ?? 0)}, the watchdog's last tick and delete on top): the job is asked for a snapshot before its pod is deleted there`,
      spend,
      quote: fittedQuote,
    };
  }
  const leastUsd = Math.max(
    MIN_FITTED_CAP_USD + tailUsd,
    (dearest * Math.min(spans.neverStartedS, target.maxHours * 3600 + spans.afterDeadlineS)) / 3600,
  );
  const why =
    budget.fitRunsToBudget && !keep
      ? `; too little is left to fit a run (the least a capped run may cost with every client gone is ${money(leastUsd)})`
      : budget.fitRunsToBudget
        ? '; a kept pod has no cost cap, so it cannot be fitted'
        : '';
  throw new BudgetError(
    `the run's worst case ${money(q.worstUsd)} would pass what is left of the budget, ${money(left)} ${where}${why}`,
    fits && !keep
      ? `Set max_cost_usd = ${fittedCap.toFixed(2)} (or lower max_hours) in [targets.${target.name}], or set fit_runs_to_budget = true in [budget] to do that for each run, or raise ${key}.`
      : `Wait until the ${period === 'day' ? 'next UTC day' : 'next UTC month'}, remove kept pods you no longer need (\`overbrainer pod rm RUN\`), or raise ${key} in [budget].`,
    { worstUsd: q.worstUsd, leftUsd: left, period },
  );
}
