import assert from 'node:assert/strict';
import { newPodRecord, type PodRecord } from '../../src/core/runs/podRecord';
import { spendOf, podSpend } from '../../src/core/runs/spend';
import { keptPodReminders, spendRows } from '../../src/ui/spend/spendModel';

const HOST = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGr3m1tG9sZ0bq7c6Q6b0m8Y1o7QyqfQ4b8nVJm9Wv0x';
const H = 3_600_000;
const NOON = Date.UTC(2026, 2, 15, 12);

function pod(
  runId: string,
  createdMs: number,
  o: { deletedMs?: number; keep?: boolean; billed?: number },
): PodRecord {
  const record = newPodRecord(runId, o.keep ?? false, 1, HOST);
  record.beginAttempt('NVIDIA A40', createdMs, 6);
  record.created({ id: `pod-${runId}`, costPerHourUsd: 1 }, 'created', createdMs);
  record.state = o.keep ? 'kept' : 'running';
  if (o.deletedMs !== undefined) record.deleted('client', o.deletedMs);
  if (o.billed !== undefined) record.billedUsd = o.billed;
  return record;
}

describe('Spend view (model)', () => {
  const budget = {
    maxUsdPerDay: 10,
    maxUsdPerMonth: null,
    fitRunsToBudget: false,
    keptPodReminderHours: 12,
  };
  const pods = [
    pod('a', NOON - 3 * H, { deletedMs: NOON - 2 * H, billed: 1.2 }),
    pod('b', NOON - 2 * H, { deletedMs: NOON - H, billed: 1.005 }),
    pod('k', NOON - 13 * H, { keep: true }),
  ];
  const spend = spendOf(
    pods.map((p) => podSpend(p, NOON)),
    budget,
    NOON,
  );

  it('shows today and this month against the budget, then each run: estimate, bill, difference, over 1 % flagged', () => {
    const rows = spendRows(spend);
    assert.equal(rows[0]!.label, 'Today');
    assert.match(rows[0]!.description, /spent of \$10\.00; \$0\.00 left/);
    assert.equal(rows[1]!.label, 'This month');
    const a = rows.find((r) => r.id === 'run-a')!;
    assert.equal(a.flagged, true);
    assert.match(
      a.description,
      /estimate \$1\.0000 · billed \$1\.2000 · difference -\$0\.2000 · over 1 % apart/,
    );
    assert.equal(rows.find((r) => r.id === 'run-b')!.flagged, false);
    assert.match(rows.find((r) => r.id === 'run-k')!.label, /\(kept, billing\)/);
  });

  it('reminds once of a kept pod older than the reminder age, with its spend so far', () => {
    const reminded = new Set<string>();
    const first = keptPodReminders(spend, 12, reminded);
    assert.equal(first.length, 1);
    assert.match(
      first[0]!.message,
      /Kept pod pod-k of run k has billed for 13 h: about \$13\.00 so far, \$1\.00\/h/,
    );
    reminded.add(first[0]!.podId);
    assert.deepEqual(keptPodReminders(spend, 12, reminded), []);
    assert.deepEqual(keptPodReminders(spend, 24, new Set()), []);
  });
});
