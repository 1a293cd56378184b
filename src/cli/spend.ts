/** `overbrainer spend`: estimates beside Runpod's bills, as a table or JSON. Pure. */
import { type PodRecord } from '../core/flow/records';
import {
  billedMismatch,
  clusterSpends,
  runPodSpends,
  runTotals,
  usd4,
  type RunCluster,
} from '../core/flow/spend';
import { snakeFields } from './listings';

export interface SpendRow {
  runId: string;
  created: string;
  state: string;
  /** The run's current (last) pod. */
  podId: string | null;
  podState: string;
  /** How many pods the run had (a recovered run's attempts, swept duplicates, strays). */
  pods: number;
  /** Every pod of the run: deleted ones to their end, the others so far. */
  estimatedUsd: number | null;
  billedUsd: number | null;
  billedCheckedAt: string | null;
  /** Estimate − bill, USD; null while either is unknown. */
  differenceUsd: number | null;
  /** Over 1 % apart (beyond the estimate's resolution). */
  flagged: boolean;
}

/** The row of run `runId` at `nowMs`: every pod of it summed (a live or kept one so far). */
export function spendRow(
  runId: string,
  created: string,
  state: string,
  pod: PodRecord,
  nowMs: number,
): SpendRow {
  const total = runTotals(runPodSpends(pod, nowMs))[0]!;
  const estimatedUsd = total.estimatedUsd;
  const billedUsd = total.billedUsd;
  const differenceUsd =
    estimatedUsd === null || billedUsd === null
      ? null
      : Math.round((estimatedUsd - billedUsd) * 10_000) / 10_000;
  return {
    runId,
    created,
    state,
    podId: pod.podId,
    podState: pod.state,
    pods: total.pods,
    estimatedUsd,
    billedUsd,
    billedCheckedAt: pod.billedCheckedAt,
    differenceUsd,
    flagged: billedMismatch(estimatedUsd, billedUsd, total.resolutionUsd),
  };
}

/**
 * The row of a run on a cluster: the members of every cluster of it summed (each as a pod of its
 * own; a node's death replaced the whole cluster, and every cluster billed), the clusters' bills
 * once all were read; its "pod" is its current cluster (the last of `clusters`).
 */
export function clusterSpendRow(
  runId: string,
  created: string,
  state: string,
  clusters: readonly RunCluster[],
  nowMs: number,
): SpendRow {
  const current = clusters.at(-1)!;
  const total = runTotals(clusters.flatMap((c) => clusterSpends(runId, c, nowMs)))[0];
  const estimatedUsd = total?.estimatedUsd ?? null;
  const billedUsd = total?.billedUsd ?? null;
  return {
    runId,
    created,
    state,
    podId: current.id,
    podState: current.deletedAt === null ? 'live' : 'deleted',
    pods: total?.pods ?? 0,
    estimatedUsd,
    billedUsd,
    billedCheckedAt: current.billedCheckedAt,
    differenceUsd:
      estimatedUsd === null || billedUsd === null
        ? null
        : Math.round((estimatedUsd - billedUsd) * 10_000) / 10_000,
    flagged: billedMismatch(estimatedUsd, billedUsd, total?.resolutionUsd ?? 0),
  };
}

const sum = (values: (number | null)[]): number =>
  Math.round(values.reduce<number>((a, v) => a + (v ?? 0), 0) * 10_000) / 10_000;

/** The fields of `spend --json`, in order (snake_case there). */
const SPEND_FIELDS = [
  'runId',
  'created',
  'state',
  'podId',
  'podState',
  'pods',
  'estimatedUsd',
  'billedUsd',
  'billedCheckedAt',
  'differenceUsd',
  'flagged',
] as const;

export function spendJson(rows: readonly SpendRow[]): Record<string, unknown> {
  return {
    runs: rows.map((r) => snakeFields(r, SPEND_FIELDS)),
    totals: {
      estimated_usd: sum(rows.map((r) => r.estimatedUsd)),
      billed_usd: sum(rows.map((r) => r.billedUsd)),
      flagged: rows.filter((r) => r.flagged).length,
    },
  };
}

const money = usd4;

export function spendTable(rows: readonly SpendRow[]): string[] {
  if (rows.length === 0) return ['spend: no run with a pod'];
  const table = [
    ['RUN', 'POD', 'ESTIMATED', 'BILLED', 'DIFFERENCE', ''],
    ...rows.map((r) => [
      r.runId,
      r.podId === null
        ? '-'
        : `${r.podId} (${r.podState})${r.pods > 1 ? ` +${r.pods - 1} earlier` : ''}`,
      money(r.estimatedUsd),
      r.billedUsd === null
        ? r.podState === 'deleted'
          ? 'not read'
          : 'while it runs'
        : money(r.billedUsd),
      r.differenceUsd === null ? '-' : money(r.differenceUsd),
      r.flagged ? 'over 1 % apart' : '',
    ]),
  ];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  const lines = table.map((row) =>
    row
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join('  ')
      .trimEnd(),
  );
  const json = spendJson(rows).totals as {
    estimated_usd: number;
    billed_usd: number;
    flagged: number;
  };
  lines.push(
    `total: estimated ${money(json.estimated_usd)}, billed ${money(json.billed_usd)}${json.flagged > 0 ? `; ${json.flagged} flagged` : ''}`,
  );
  return lines;
}
