import assert from 'node:assert/strict';
import type { BudgetConfig } from '../../src/core/config';
import { newPodRecord, type PodRecord } from '../../src/core/runs/podRecord';
import { budgetLines, runSpendLines } from '../../src/core/runs/spendLines';
import {
  dayStartMs,
  PENDING_CAP_HOLD_MS,
  monthStartMs,
  podSpend,
  projectSpend,
  type SpendSource,
} from '../../src/core/runs/spend';

const HOST = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGr3m1tG9sZ0bq7c6Q6b0m8Y1o7QyqfQ4b8nVJm9Wv0x';
const H = 3_600_000;
/** 2026-03-15 12:00 UTC. */
const NOON = Date.UTC(2026, 2, 15, 12);

function pod(
  runId: string,
  o: {
    rate: number;
    createdMs: number;
    deletedMs?: number;
    keep?: boolean;
    cap?: number;
    billed?: number;
  },
): PodRecord {
  const record = newPodRecord(runId, o.keep ?? false, 1, HOST, { costCapUsd: o.cap ?? null });
  record.beginAttempt('NVIDIA A40', o.createdMs, 6);
  record.created({ id: `pod-${runId}`, costPerHourUsd: o.rate }, 'created', o.createdMs);
  record.state = o.keep ? 'kept' : 'running';
  if (o.deletedMs !== undefined) record.deleted('client', o.deletedMs);
  if (o.billed !== undefined) record.billedUsd = o.billed;
  return record;
}

/** Runs with those pod records, and `pending` runs the gate let start that have none yet. */
function store(
  pods: PodRecord[],
  pending: { id: string; capUsd: number; createdMs: number }[] = [],
): SpendSource {
  return {
    list: () => ({
      runs: [
        ...pods.map((p) => ({ id: p.runId, state: 'running' as const, created: '' })),
        ...pending.map((r) => ({
          id: r.id,
          state: 'preparing' as const,
          created: new Date(r.createdMs).toISOString(),
          budgetCapUsd: r.capUsd,
        })),
      ],
    }),
    loadPod: (id) => pods.find((p) => p.runId === id) ?? null,
  };
}

const budget = (day: number | null, month: number | null): BudgetConfig => ({
  maxUsdPerDay: day,
  maxUsdPerMonth: month,
  fitRunsToBudget: false,
  keptPodReminderHours: 12,
});

describe('spend: what the project spent and what is left', () => {
  it('UTC day and month starts', () => {
    assert.equal(dayStartMs(NOON), Date.UTC(2026, 2, 15));
    assert.equal(monthStartMs(NOON), Date.UTC(2026, 2, 1));
  });

  it('counts ended pods by bill where read, else estimate; live pods so far; kept pods apart', () => {
    const s = store([
      pod('a', { rate: 2, createdMs: NOON - 4 * H, deletedMs: NOON - 3 * H }), // est $2
      pod('b', { rate: 1, createdMs: NOON - 3 * H, deletedMs: NOON - H, billed: 2.5 }), // bill $2.5
      pod('c', { rate: 0.5, createdMs: NOON - 2 * H }), // live, $1 so far
      pod('d', { rate: 1, createdMs: NOON - H, keep: true }), // kept, $1 so far
    ]);
    const spend = projectSpend(s, budget(20, null), NOON);
    assert.equal(spend.day.spentUsd, 6.5);
    assert.equal(spend.day.reservedUsd, 2); // c: until its deadline (6 h at $0.5 = $3) less $1
    assert.equal(spend.day.leftUsd, 11.5);
    assert.equal(spend.bindingPeriod, 'day');
    assert.deepEqual(
      spend.keptPods.map((p) => p.runId),
      ['d'],
    );
    assert.equal(spend.month.leftUsd, null);
  });

  it("a live pod's cost cap is what it holds back from what is left", () => {
    const s = store([pod('c', { rate: 1, createdMs: NOON - H, cap: 5 })]);
    const spend = projectSpend(s, budget(10, null), NOON);
    assert.equal(spend.day.spentUsd, 1);
    assert.equal(spend.day.reservedUsd, 4);
    assert.equal(spend.leftUsd, 5);
  });

  it("a run let start without its pod record yet holds its budget cap back (two trains at once can't share it)", () => {
    const live = pod('c', { rate: 1, createdMs: NOON - H, cap: 5 });
    const s = store([live], [{ id: 'n', capUsd: 3, createdMs: NOON - 60_000 }]);
    const spend = projectSpend(s, budget(10, null), NOON);
    assert.equal(spend.day.spentUsd, 1);
    assert.equal(spend.day.reservedUsd, 7);
    assert.equal(spend.leftUsd, 2);
    // A train that died before writing its pod record stops holding its cap after a while.
    const stale = store([live], [{ id: 'n', capUsd: 3, createdMs: NOON - PENDING_CAP_HOLD_MS }]);
    assert.equal(projectSpend(stale, budget(10, null), NOON).leftUsd, 5);
  });

  it('splits a pod across midnight by the share of its life in each day', () => {
    const midnight = dayStartMs(NOON);
    const s = store([
      pod('a', { rate: 1, createdMs: midnight - 2 * H, deletedMs: midnight + 2 * H, billed: 8 }),
    ]);
    const spend = projectSpend(s, budget(10, 100), NOON);
    assert.equal(spend.day.spentUsd, 4);
    assert.equal(spend.month.spentUsd, 8);
    assert.equal(spend.leftUsd, 6);
  });

  it('the tighter budget binds', () => {
    const s = store([pod('a', { rate: 1, createdMs: NOON - 3 * H, deletedMs: NOON - 2 * H })]);
    const spend = projectSpend(s, budget(50, 3), NOON);
    assert.equal(spend.bindingPeriod, 'month');
    assert.equal(spend.leftUsd, 2);
    assert.deepEqual(budgetLines(spend), [
      'Today: $1.00 spent of $50.00; $49.00 left',
      'This month: $1.00 spent of $3.00; $2.00 left',
    ]);
  });

  it("a run's spend lines: so far, at the ETA (capped), budget left; in all once deleted", () => {
    const live = pod('c', { rate: 2, createdMs: NOON - H, cap: 3 });
    const ended = pod('a', {
      rate: 1,
      createdMs: NOON - 3 * H,
      deletedMs: NOON - 2 * H,
      billed: 1.01,
    });
    const s = store([live, ended]);
    assert.deepEqual(runSpendLines(s, 'c', budget(10, null), NOON, { etaMs: H }), [
      'Spent so far: $2.00 at $2.00/h',
      'At the ETA: about $3.00 (its cost cap ends it first)',
      'Cost cap: $3.00 (the watchdog deletes the pod there)',
      'Budget left: $5.99 (today)',
    ]);
    assert.deepEqual(runSpendLines(s, 'a', null, NOON), ['Spent: about $1.00; billed $1.01']);
    assert.deepEqual(runSpendLines(s, 'none', null, NOON), []);
    assert.equal(podSpend(ended, NOON).status, 'ended');
  });
});

describe('spend: the status bar tooltip', () => {
  it("lists the run's spend lines before the click hint", async () => {
    const { statusForPod } = await import('../../src/ui/runs/statusModel');
    const view = statusForPod('r1', null, NOON, null, ['Spent so far: $2.00 at $2.00/h']);
    assert.match(view.tooltip, /Spent so far: \$2\.00 at \$2\.00\/h\nClick to show the run\.$/);
  });
});
