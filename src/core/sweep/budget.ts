/**
 * A sweep's budget pool, as pure arithmetic: what the sweep has spent, what is committed (the cost
 * cap armed on every live trial's pod, which its watchdog enforces with no client running) and what
 * is left of `budget_usd`. A trial may start only when spent + every live trial's cap + its own
 * cap fits in the budget, so the sweep's total cannot pass the budget even if the client dies and
 * never returns; a trial that ends under its cap gives the rest back to the pool.
 *
 * Amounts are kept in whole micro-dollars inside, so that adding and taking back the same caps
 * never drifts (0.1 + 0.2 is 0.3 here); they are USD outside.
 */

/** The pool at one moment. Never mutated: each change returns a new pool. */
export interface BudgetPool {
  /** `budget_usd`: the most the whole sweep may cost. */
  readonly budgetUsd: number;
  /** What ended trials cost, all together. */
  readonly spentUsd: number;
  /** The cap armed on each live trial's pod, by trial number. */
  readonly live: Readonly<Record<number, number>>;
}

const MICRO = 1_000_000;
const micro = (usd: number): number => Math.round(usd * MICRO);
const usd = (micros: number): number => micros / MICRO;

export function emptyPool(budgetUsd: number): BudgetPool {
  if (!(budgetUsd > 0)) throw new RangeError(`a sweep's budget must be > 0 USD, not ${budgetUsd}`);
  return { budgetUsd, spentUsd: 0, live: {} };
}

/** What the live trials' caps hold back: the most they can still cost all together. */
export function committedUsd(pool: BudgetPool): number {
  return usd(committedMicro(pool));
}

/** What no trial has spent or holds: room for new trials' caps. */
export function leftUsd(pool: BudgetPool): number {
  return usd(micro(pool.budgetUsd) - micro(pool.spentUsd) - committedMicro(pool));
}

function committedMicro(pool: BudgetPool): number {
  let total = 0;
  for (const cap of Object.values(pool.live)) total += micro(cap);
  return total;
}

export type Admission =
  | { admitted: true; pool: BudgetPool }
  | {
      admitted: false;
      /** What is left of the budget, and what the trial's cap needs. */
      leftUsd: number;
      capUsd: number;
      /** `wait`: a live trial's end may give room back; `exhausted`: none can. */
      reason: 'wait' | 'exhausted';
    };

/**
 * Trial `number` with its pod's cap `capUsd`: admitted (its cap now committed) when spent + the
 * live trials' caps + `capUsd` fit in the budget; otherwise not, saying whether a live trial's
 * end could still make room.
 */
export function admit(pool: BudgetPool, number: number, capUsd: number): Admission {
  if (!(capUsd > 0)) throw new RangeError(`a trial's cap must be > 0 USD, not ${capUsd}`);
  if (Object.hasOwn(pool.live, number)) throw new RangeError(`trial ${number} is already live`);
  const left = micro(pool.budgetUsd) - micro(pool.spentUsd) - committedMicro(pool);
  if (micro(capUsd) <= left) {
    return { admitted: true, pool: { ...pool, live: { ...pool.live, [number]: capUsd } } };
  }
  const withoutLive = micro(pool.budgetUsd) - micro(pool.spentUsd);
  return {
    admitted: false,
    leftUsd: usd(left),
    capUsd,
    reason:
      Object.keys(pool.live).length > 0 && micro(capUsd) <= withoutLive ? 'wait' : 'exhausted',
  };
}

/**
 * Live trial `number` ended having cost `costUsd`: its cap is released and its cost spent. A cost
 * under the cap gives the rest back; one over it (a bill above the estimate) is spent all the
 * same: the pool says what was spent, never less.
 */
export function settle(pool: BudgetPool, number: number, costUsd: number): BudgetPool {
  if (!Object.hasOwn(pool.live, number)) throw new RangeError(`trial ${number} is not live`);
  if (!(costUsd >= 0)) throw new RangeError(`a trial's cost must be >= 0 USD, not ${costUsd}`);
  const live = { ...pool.live };
  delete live[number];
  return { ...pool, spentUsd: usd(micro(pool.spentUsd) + micro(costUsd)), live };
}

/** The quote of a sweep before it starts: its trials' caps against its budget. */
export interface SweepBudgetQuote {
  /** Trials × the per-trial cap: what the sweep would need if every trial spent its cap. */
  allTrialsAtCapUsd: number;
  /** Whether the budget covers every trial at its cap. */
  coversAllTrials: boolean;
  /** Trials the budget starts if every trial spends its whole cap. */
  trialsAtWorst: number;
  /** Trials the budget starts if every trial costs the least a trial can cost. */
  trialsAtBest: number;
  /** Pods at once at the start: `parallel`, or fewer when the budget cannot hold their caps. */
  podsAtOnce: number;
}

/**
 * How many trials `budgetUsd` allows. At worst each trial spends its cap (`capUsd`): a new one
 * starts only while spent + its cap fit. At best each costs `minTrialUsd` (the least a trial can
 * cost: its pod's boot and first evaluation, before any prune), and the last one starts while
 * what was spent leaves room for one more cap: 1 + (budget − cap) / least.
 */
export function quoteSweepBudget(input: {
  budgetUsd: number;
  capUsd: number;
  minTrialUsd: number;
  trials: number;
  parallel: number;
}): SweepBudgetQuote {
  const { trials, parallel } = input;
  const budget = micro(input.budgetUsd);
  const cap = micro(input.capUsd);
  const least = Math.min(micro(input.minTrialUsd), cap);
  if (!(cap > 0) || !(least > 0))
    throw new RangeError('a trial’s cap and its least cost must be > 0');
  const atWorst = Math.min(trials, Math.floor(budget / cap));
  const atBest = budget < cap ? 0 : Math.min(trials, 1 + Math.floor((budget - cap) / least));
  return {
    allTrialsAtCapUsd: usd(cap * trials),
    coversAllTrials: cap * trials <= budget,
    trialsAtWorst: atWorst,
    trialsAtBest: atBest,
    podsAtOnce: Math.min(parallel, atWorst),
  };
}
