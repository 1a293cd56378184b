/**
 * What a run and the project spent, as lines for people: `runs show`, the Runs tree, the status
 * bar's tooltip and the Spend view, over the figures of ./spend.ts (one rule for every amount).
 * A run on a cluster has its lines from its clusters' records, one line per cluster it had (a
 * node's death replaces the whole cluster): N members at the member rate, the estimate beside
 * the cluster's bill once read.
 */
import type { BudgetConfig } from '../config/budget';
import type { RunCluster } from './clusterRecord';
import { clusterSpends, runClusters } from './clusterSpend';
import type { PodRecord } from './podRecord';
import {
  podSpend,
  projectSpend,
  runPodSpends,
  runTotals,
  type PodSpend,
  type ProjectSpend,
  type SpendSource,
} from './spend';

const money = (usd: number): string => `$${usd.toFixed(2)}`;

/** `today $3.20 of $50.00 (…left)`: one line per period that has a budget or any spend. */
export function budgetLines(spend: ProjectSpend): string[] {
  const lines: string[] = [];
  for (const p of [spend.day, spend.month]) {
    const name = p.period === 'day' ? 'Today' : 'This month';
    const reserved = p.reservedUsd > 0 ? `, ${money(p.reservedUsd)} held for live pods` : '';
    lines.push(
      p.limitUsd === null
        ? `${name}: ${money(p.spentUsd)} spent${reserved} (no budget)`
        : `${name}: ${money(p.spentUsd)} spent${reserved} of ${money(p.limitUsd)}; ${money(p.leftUsd ?? 0)} left`,
    );
  }
  return lines;
}

/** What a run's spend lines need to know of its pace: the time its job still needs. */
export interface RunSpendOptions {
  /** The job's remaining time, ms, when known (the pace's ETA). */
  etaMs?: number | null;
}

/**
 * A run's spend, one line each, for `runs show`, the Runs tree and the status bar tooltip: so
 * far (or in all once its pod is gone, with the bill beside the estimate), at the ETA, and what
 * is left of the budget. Empty when the run has no pod.
 */
export function runSpendLines(
  store: SpendSource,
  runId: string,
  budget: BudgetConfig | null | undefined,
  nowMs: number,
  options: RunSpendOptions = {},
): string[] {
  let pod: PodRecord | null;
  try {
    pod = store.loadPod(runId);
  } catch {
    return [];
  }
  if (pod === null) return clusterRunLines(store, runId, budget, nowMs, options);
  const p = podSpend(pod, nowMs);
  // Every pod of the run counts (a recovered run's earlier attempts, swept duplicates, strays).
  const total = runTotals(runPodSpends(pod, nowMs))[0]!;
  const pods = total.pods > 1 ? ` over ${total.pods} pods` : '';
  const lines: string[] = [];
  const est = total.estimatedUsd;
  if (p.status === 'ended') {
    lines.push(
      `Spent: ${est === null ? 'unknown' : `about ${money(est)}`}${pods}${total.billedUsd === null ? ' (bill not read yet)' : `; billed ${money(total.billedUsd)}`}`,
    );
  } else {
    const rate = p.usdPerHour === null ? '' : ` at ${money(p.usdPerHour)}/h`;
    lines.push(
      `Spent so far: ${est === null ? 'unknown' : money(est)}${pods}${rate}${p.status === 'kept' ? ' (kept: it bills until removed)' : ''}`,
    );
    if (
      options.etaMs !== undefined &&
      options.etaMs !== null &&
      options.etaMs >= 0 &&
      p.usdPerHour !== null &&
      est !== null
    ) {
      const atEta = est + (p.usdPerHour * options.etaMs) / 3_600_000;
      const capped = p.boundUsd === null ? atEta : Math.min(atEta, p.boundUsd);
      lines.push(
        `At the ETA: about ${money(capped)}${capped < atEta ? ' (its cost cap ends it first)' : ''}`,
      );
    }
    if (p.status === 'live' && pod.costCapUsd !== null) {
      lines.push(`Cost cap: ${money(pod.costCapUsd)} (the watchdog deletes the pod there)`);
    }
  }
  return [...lines, ...budgetLeft(store, budget, nowMs)];
}

/** `Budget left: …` of the tighter budget, or nothing without one. */
function budgetLeft(
  store: SpendSource,
  budget: BudgetConfig | null | undefined,
  nowMs: number,
): string[] {
  const project =
    budget === null || budget === undefined ? null : projectSpend(store, budget, nowMs);
  if (project === null || project.leftUsd === null) return [];
  return [
    `Budget left: ${money(project.leftUsd)} (${project.bindingPeriod === 'day' ? 'today' : 'this month'})`,
  ];
}

/**
 * {@link runSpendLines} of a run on a cluster (it has no pod.json): in all over every member of
 * every cluster it had, then a line per cluster (each attempt's), then the budget. Empty for a
 * run with no cluster.
 */
function clusterRunLines(
  store: SpendSource,
  runId: string,
  budget: BudgetConfig | null | undefined,
  nowMs: number,
  options: RunSpendOptions,
): string[] {
  const run = store.list().runs.find((r) => r.id === runId);
  const clusters = run ? runClusters(run) : [];
  if (clusters.length === 0) return [];
  const spends = clusters.map((c) => clusterSpends(runId, c, nowMs));
  const total = runTotals(spends.flat())[0]!;
  const est = total.estimatedUsd;
  const last = clusters[clusters.length - 1]!;
  const nodes = last.nodes.length;
  const pods = ` over ${total.pods} pods`;
  const lines: string[] = [];
  if (last.deletedAt !== null) {
    lines.push(
      `Spent: ${est === null ? 'unknown' : `about ${money(est)}`}${pods}${total.billedUsd === null ? ' (bill not read yet)' : `; billed ${money(total.billedUsd)}`}`,
    );
  } else {
    const rate = last.costPerHourUsd === null ? null : last.costPerHourUsd * nodes;
    lines.push(
      `Spent so far: ${est === null ? 'unknown' : money(est)}${pods}${rate === null ? '' : ` at ${money(rate)}/h for all ${nodes} nodes`}`,
    );
    const bounds = spends[spends.length - 1]!.map((p) => p.boundUsd);
    const boundUsd = bounds.includes(null)
      ? null
      : capOfRun(bounds as number[], spends.slice(0, -1).flat());
    const etaMs = options.etaMs ?? null;
    if (etaMs !== null && etaMs >= 0 && rate !== null && est !== null) {
      const atEta = est + (rate * etaMs) / 3_600_000;
      const capped = boundUsd === null ? atEta : Math.min(atEta, boundUsd);
      lines.push(
        `At the ETA: about ${money(capped)}${capped < atEta ? ' (its cost cap ends it first)' : ''}`,
      );
    }
    if (last.nodes.every((n) => n.costCapAtUnixS !== null) && boundUsd !== null) {
      lines.push(
        `Cost cap: ${money(boundUsd)} in all (the whole cluster is deleted there; each node holds its share)`,
      );
    }
  }
  clusters.forEach((cluster, i) => lines.push(clusterLine(cluster, spends[i]!, i + 1)));
  return [...lines, ...budgetLeft(store, budget, nowMs)];
}

/**
 * What the run may cost in all with its current cluster: what earlier clusters cost (their bills
 * where read) plus the current members' bounds.
 */
function capOfRun(currentBounds: number[], earlier: PodSpend[]): number {
  const before = earlier.reduce((a, p) => a + (p.billedUsd ?? p.estimatedUsd ?? 0), 0);
  return before + currentBounds.reduce((a, b) => a + b, 0);
}

/** `Cluster 1 (clu-0): 2 nodes × $0.80/h, about $0.80; billed $0.80`. */
function clusterLine(cluster: RunCluster, members: PodSpend[], attempt: number): string {
  const total = runTotals(members)[0];
  const est = total?.estimatedUsd ?? null;
  const rate = cluster.costPerHourUsd === null ? '' : ` × ${money(cluster.costPerHourUsd)}/h`;
  const spent =
    cluster.deletedAt === null
      ? `, ${est === null ? 'unknown' : money(est)} so far`
      : `, about ${est === null ? 'unknown' : money(est)}${cluster.billedUsd === null ? ' (bill not read yet)' : `; billed ${money(cluster.billedUsd)}`}`;
  return `Cluster ${attempt} (${cluster.id}): ${cluster.nodes.length} nodes${rate}${spent}`;
}
