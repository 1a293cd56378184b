/**
 * A sweep's budget pool (src/core/sweep/budget.ts): a trial starts only when spent + every live
 * trial's cap + its own cap fit in budget_usd; an ending trial gives back what it did not spend;
 * the quote says how many trials the budget starts at worst and at best.
 */
import assert from 'node:assert/strict';
import {
  admit,
  committedUsd,
  emptyPool,
  leftUsd,
  quoteSweepBudget,
  settle,
  type BudgetPool,
} from '../../src/core/sweep/budget';

function admitted(pool: BudgetPool, number: number, capUsd: number): BudgetPool {
  const result = admit(pool, number, capUsd);
  assert.ok(result.admitted, `trial ${number} was refused`);
  return result.pool;
}

describe('sweep budget: the pool', () => {
  it('admits trials while spent + live caps + the new cap fit, exactly to the budget', () => {
    let pool = emptyPool(15);
    pool = admitted(pool, 0, 5);
    pool = admitted(pool, 1, 5);
    pool = admitted(pool, 2, 5);
    assert.equal(committedUsd(pool), 15);
    assert.equal(leftUsd(pool), 0);
    assert.deepEqual(admit(pool, 3, 5), { admitted: false, leftUsd: 0, capUsd: 5, reason: 'wait' });
  });

  it('a trial ending under its cap gives the rest back; its cost stays spent', () => {
    let pool = admitted(admitted(emptyPool(10), 0, 4), 1, 4);
    assert.equal(admit(pool, 2, 4).admitted, false);
    pool = settle(pool, 0, 1.25);
    assert.equal(pool.spentUsd, 1.25);
    assert.equal(committedUsd(pool), 4);
    assert.equal(leftUsd(pool), 4.75);
    pool = admitted(pool, 2, 4);
    assert.equal(leftUsd(pool), 0.75);
  });

  it('says whether waiting for a live trial can help, or the budget is exhausted', () => {
    let pool = admitted(emptyPool(10), 0, 4);
    pool = settle(pool, 0, 4);
    pool = admitted(pool, 1, 4);
    const refused = admit(pool, 2, 4);
    assert.deepEqual(refused, { admitted: false, leftUsd: 2, capUsd: 4, reason: 'wait' });
    pool = settle(pool, 1, 3);
    assert.deepEqual(admit(pool, 2, 4), {
      admitted: false,
      leftUsd: 3,
      capUsd: 4,
      reason: 'exhausted',
    });
  });

  it('keeps cents exact: caps of 0.1 and 0.2 fill a budget of 0.3', () => {
    let pool = admitted(admitted(emptyPool(0.3), 0, 0.1), 1, 0.2);
    assert.equal(leftUsd(pool), 0);
    pool = settle(settle(pool, 0, 0.1), 1, 0.2);
    assert.equal(pool.spentUsd, 0.3);
    assert.equal(admit(pool, 2, 0.000001).admitted, false);
  });

  it('a bill over the cap is spent all the same, never hidden', () => {
    const pool = settle(admitted(emptyPool(10), 0, 2), 0, 2.5);
    assert.equal(pool.spentUsd, 2.5);
    assert.equal(leftUsd(pool), 7.5);
  });

  it('refuses nonsense: a cap of 0, a trial live twice, a settle of a trial not live', () => {
    const pool = admitted(emptyPool(10), 0, 2);
    assert.throws(() => admit(pool, 1, 0), /cap must be > 0/);
    assert.throws(() => admit(pool, 0, 1), /already live/);
    assert.throws(() => settle(pool, 5, 1), /not live/);
    assert.throws(() => emptyPool(0), /budget must be > 0/);
  });

  it('holds the budget if the client dies at any moment: spent + every live cap never passes it', () => {
    // A deterministic walk: trials with random caps start when admitted and end at random costs
    // up to their caps. At every step, if the client died then and every live pod spent its whole
    // cap (its watchdog's limit), the sweep's total would still fit the budget.
    let seed = 12345;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let sweep = 0; sweep < 50; sweep++) {
      const budget = 5 + Math.round(random() * 5000) / 100;
      let pool = emptyPool(budget);
      let next = 0;
      for (let step = 0; step < 200; step++) {
        const live = Object.keys(pool.live).map(Number);
        if (live.length < 4 && random() < 0.6) {
          const result = admit(pool, next, 0.5 + Math.round(random() * 800) / 100);
          next++;
          if (result.admitted) pool = result.pool;
        } else if (live.length > 0) {
          const number = live[Math.floor(random() * live.length)]!;
          pool = settle(pool, number, Math.round(random() * pool.live[number]! * 100) / 100);
        }
        assert.ok(
          pool.spentUsd + committedUsd(pool) <= budget + 1e-9,
          `sweep ${sweep} step ${step}`,
        );
      }
    }
  });
});

describe('sweep budget: the quote', () => {
  it("the issue's sweep: 24 trials, 4 at once, $15, a $1.50 cap, a trial costs at least $0.20", () => {
    assert.deepEqual(
      quoteSweepBudget({ budgetUsd: 15, capUsd: 1.5, minTrialUsd: 0.2, trials: 24, parallel: 4 }),
      {
        allTrialsAtCapUsd: 36,
        coversAllTrials: false,
        trialsAtWorst: 10,
        trialsAtBest: 24,
        podsAtOnce: 4,
      },
    );
  });

  it('at best: the last trial starts while what was spent leaves room for its cap', () => {
    // $10, cap $4, least $1: trials cost $1 each; the 7th starts at spent $6 (6 + 4 = 10).
    const quote = quoteSweepBudget({
      budgetUsd: 10,
      capUsd: 4,
      minTrialUsd: 1,
      trials: 100,
      parallel: 2,
    });
    assert.equal(quote.trialsAtWorst, 2);
    assert.equal(quote.trialsAtBest, 7);
    assert.equal(quote.podsAtOnce, 2);
    // The same by the pool itself: trials ending at $1 each, one at a time.
    let pool = emptyPool(10);
    let started = 0;
    for (let number = 0; ; number++) {
      const result = admit(pool, number, 4);
      if (!result.admitted) break;
      started++;
      pool = settle(result.pool, number, 1);
    }
    assert.equal(started, 7);
  });

  it('a budget under one cap starts no trial; fewer pods at once than parallel when caps do not fit', () => {
    assert.deepEqual(
      quoteSweepBudget({ budgetUsd: 1, capUsd: 2, minTrialUsd: 0.5, trials: 5, parallel: 3 }),
      {
        allTrialsAtCapUsd: 10,
        coversAllTrials: false,
        trialsAtWorst: 0,
        trialsAtBest: 0,
        podsAtOnce: 0,
      },
    );
    const two = quoteSweepBudget({
      budgetUsd: 5,
      capUsd: 2,
      minTrialUsd: 0.5,
      trials: 5,
      parallel: 4,
    });
    assert.equal(two.podsAtOnce, 2);
    assert.equal(
      quoteSweepBudget({ budgetUsd: 50, capUsd: 2, minTrialUsd: 0.5, trials: 5, parallel: 4 })
        .coversAllTrials,
      true,
    );
  });
});
