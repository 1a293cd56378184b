import assert from 'node:assert/strict';
import { billedMismatch, billSettled } from '../../src/core/pod/billing';
import { estimateResolutionUsd } from '../../src/core/runs/spend';
import { podHeldS, quote, quoteLines, type QuoteInput } from '../../src/core/pod/quote';
import { watchdogSpans } from '../../src/core/pod/worstCase';
import { PRODUCTION_TIMING } from '../../src/core/timing';

const base: QuoteInput = {
  candidates: [
    { gpuType: 'NVIDIA GeForce RTX 4090', pricePerHourUsd: 0.69, availability: 'HIGH' },
    { gpuType: 'NVIDIA L40S', pricePerHourUsd: 0.86, availability: 'LOW' },
  ],
  gpuCount: 2,
  maxHours: 6,
  maxCostUsd: null,
  // Past the deadline: max(15 + 1 + 15 min, 30 min) + 1 min + 90 s = 2010 s; past a cap 150 s.
  spans: watchdogSpans(PRODUCTION_TIMING, { bootGraceS: 1800, retrieveGraceS: 1800 }),
  historyS: [],
};

describe('quote', () => {
  it('without earlier runs: the first rate × count, up to max_hours, the worst case past the deadline at the dearest rate', () => {
    const q = quote(base);
    assert.deepEqual(
      q.rates.map((r) => [r.gpuType, r.usdPerHour]),
      [
        ['NVIDIA GeForce RTX 4090', 1.38],
        ['NVIDIA L40S', 1.72],
      ],
    );
    assert.deepEqual(q.expected, { lowUsd: 0, highUsd: 8.28, basis: 'max_hours', runs: 0 });
    // 6 h + 2010 s at 2 × $0.86 = $11.2803, up to the cent.
    assert.equal(q.worstUsd, 11.29);
    assert.deepEqual(quoteLines(q), [
      'Rate: $1.38/h on NVIDIA GeForce RTX 4090 (tried first)',
      'Fallbacks: NVIDIA L40S $1.72/h',
      'Expected: up to $8.28 (no earlier run of this config: up to max_hours)',
      "Worst case: $11.29 (if every client dies: what the pod's watchdog allows, deadline snapshot and graces included)",
    ]);
  });

  it('with earlier runs: their min −20 % to their max +20 % at the first rate', () => {
    const q = quote({ ...base, historyS: [1800, 3600, 2700] });
    assert.deepEqual(q.expected, { lowUsd: 0.55, highUsd: 1.66, basis: 'history', runs: 3 });
    assert.equal(quoteLines(q)[2], 'Expected: $0.55–$1.66 (from 3 earlier runs of this config)');
  });

  it('with one earlier run: ±20 % of it, never past max_hours', () => {
    assert.deepEqual(quote({ ...base, historyS: [3600] }).expected, {
      lowUsd: 1.1,
      highUsd: 1.66,
      basis: 'history',
      runs: 1,
    });
    assert.equal(quote({ ...base, maxHours: 1, historyS: [3600] }).expected?.highUsd, 1.38);
  });

  it('max_cost_usd below max_hours bounds the worst case and the expected cost', () => {
    const q = quote({ ...base, maxCostUsd: 5 });
    assert.equal(q.expected?.highUsd, 5);
    assert.equal(q.worstUsd, 5.08); // $5 + 150 s at $1.72 = $5.0717
  });

  it('without a price: rates say so, no figures', () => {
    const q = quote({
      ...base,
      candidates: [{ gpuType: 'X', pricePerHourUsd: null, availability: null }],
    });
    assert.equal(q.expected, null);
    assert.equal(q.worstUsd, null);
    assert.deepEqual(quoteLines(q), ['Rate: no price on X (tried first)']);
  });

  it('podHeldS: created → deleted, null before the pod was deleted', () => {
    assert.equal(
      podHeldS({ createdUnixS: 1_000, deletedAt: new Date(61_000_000).toISOString() }),
      60_000,
    );
    assert.equal(podHeldS({ createdUnixS: 1_000, deletedAt: null }), null);
  });
});

describe('billedMismatch', () => {
  it('flags a difference over 1 % of the bill, beyond the estimate resolution', () => {
    assert.equal(billedMismatch(10.0, 10.05, estimateResolutionUsd(1.38)), false);
    assert.equal(billedMismatch(10.0, 10.2, estimateResolutionUsd(1.38)), true);
    // A seconds-long pod: $0.0012 vs $0.0011 is a second at $0.69/h plus rounding.
    assert.equal(billedMismatch(0.0012, 0.0011, estimateResolutionUsd(0.69)), false);
    assert.equal(billedMismatch(null, 0.5, estimateResolutionUsd(0.69)), false);
  });
});

describe('billSettled', () => {
  it('a bill read within a day of the deletion is read again; one read later is final', () => {
    const deletedAt = '2026-09-29T12:00:00Z';
    assert.equal(billSettled({ billedUsd: null, billedCheckedAt: null, deletedAt }), false);
    assert.equal(
      billSettled({ billedUsd: 1, billedCheckedAt: '2026-09-29T12:00:05Z', deletedAt }),
      false,
    );
    assert.equal(
      billSettled({ billedUsd: 1, billedCheckedAt: '2026-09-30T12:00:00Z', deletedAt }),
      true,
    );
  });
});
