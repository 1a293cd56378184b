/**
 * The Spend view's rows, free of `vscode`: today's and this month's spend against `[budget]`,
 * then one row per run with a pod: our estimate, Runpod's bill, the difference (over 1 %
 * flagged); kept pods older than the reminder age are picked out for one notification each.
 */
import type { CoreEvent } from '../../core/events';
import {
  billedMismatch,
  budgetLines,
  runTotals,
  usd4,
  type ProjectSpend,
} from '../../core/flow/spend';

export interface SpendRowView {
  id: string;
  label: string;
  description: string;
  tooltip: string;
  flagged: boolean;
}

const money = usd4;

/**
 * Whether the Spend view reads the records again on `event`: a pod's life, a run's state, and a
 * bill read after its pod ended (no file event is sure to follow that write in time).
 */
export function refreshesSpend(event: CoreEvent): boolean {
  return event.type === 'pod' || event.type === 'runState' || event.type === 'billed';
}

/** The rows of the Spend view: the budget lines, then each run newest first. */
export function spendRows(spend: ProjectSpend): SpendRowView[] {
  const rows: SpendRowView[] = budgetLines(spend).map((line, i) => ({
    id: `budget-${i}`,
    label: line.split(':')[0]!,
    description: line.slice(line.indexOf(':') + 2),
    tooltip: line,
    flagged: false,
  }));
  // One row per run: every pod of it counts (a recovered run's attempts, duplicates, strays).
  for (const t of runTotals(spend.pods)) {
    const p = t.current;
    const flagged = billedMismatch(t.estimatedUsd, t.billedUsd, t.resolutionUsd);
    const diff =
      t.estimatedUsd === null || t.billedUsd === null ? null : t.estimatedUsd - t.billedUsd;
    const state = p.status === 'ended' ? '' : p.status === 'kept' ? ' (kept, billing)' : ' (live)';
    rows.push({
      id: `run-${p.runId}`,
      label: `${p.runId}${state}`,
      description: `estimate ${money(t.estimatedUsd)} · billed ${t.billedUsd === null ? (p.status === 'ended' ? 'not read' : 'while it runs') : money(t.billedUsd)} · difference ${money(diff === null ? null : Math.round(diff * 10_000) / 10_000)}${flagged ? ' · over 1 % apart' : ''}`,
      tooltip: `Run ${p.runId}, pod ${p.podId ?? '(none)'}${p.usdPerHour === null ? '' : ` at $${p.usdPerHour.toFixed(2)}/h`}${t.pods > 1 ? ` (and ${t.pods - 1} earlier pod${t.pods > 2 ? 's' : ''})` : ''}`,
      flagged,
    });
  }
  return rows;
}

/**
 * Kept pods older than `reminderHours` at `nowMs` not reminded of yet: the notification's text
 * for each (its spend so far), keyed by pod ID.
 */
export function keptPodReminders(
  spend: ProjectSpend,
  reminderHours: number,
  reminded: ReadonlySet<string>,
): { podId: string; runId: string; message: string }[] {
  const out: { podId: string; runId: string; message: string }[] = [];
  for (const p of spend.keptPods) {
    if (p.podId === null || p.createdMs === null || reminded.has(p.podId)) continue;
    const ageH = (spend.nowMs - p.createdMs) / 3_600_000;
    if (ageH < reminderHours) continue;
    out.push({
      podId: p.podId,
      runId: p.runId,
      message: `Kept pod ${p.podId} of run ${p.runId} has billed for ${Math.floor(ageH)} h: about $${(p.estimatedUsd ?? 0).toFixed(2)} so far${p.usdPerHour === null ? '' : `, $${p.usdPerHour.toFixed(2)}/h`} until you release or remove it.`,
    });
  }
  return out;
}
