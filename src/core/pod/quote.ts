/**
 * The quote shown before a pod is created: the hourly rate of the GPU type tried first (and of
 * its fallbacks), the expected cost to finish, and the worst case: the most the pod can bill if
 * every client is gone (./worstCase.ts). Pure: the caller brings the live catalog's rates, the
 * watchdog's spans and the durations of earlier runs.
 */
import { nodesLine } from '../config/nodes';
import type { PodRecord } from '../runs/podRecord';
import { worstCaseUsd, type WatchdogSpans } from './worstCase';

/** A GPU type the run would try, in order, with its catalog price for one GPU. */
export interface QuoteCandidate {
  gpuType: string;
  /** List price of one GPU per hour (Secure cloud); null when the catalog has none. */
  pricePerHourUsd: number | null;
  /** Stock for the requested count, as the catalog says (`HIGH`, `NONE`…); null when unknown. */
  availability: string | null;
}

export interface QuoteInput {
  candidates: readonly QuoteCandidate[];
  /** GPUs per node. */
  gpuCount: number;
  /** Nodes (pods) billed at once: 1 for a pod, N for a cluster; default 1. */
  nodes?: number;
  maxHours: number;
  maxCostUsd: number | null;
  /** How long the pod's watchdog lets it live past its limits ({@link watchdogSpans}). */
  spans: WatchdogSpans;
  /** How long earlier runs of the same target and config held their pod, seconds. */
  historyS: readonly number[];
  /** Seconds of work the job does after training (the LoRA merge of `merge = true`); 0: none. */
  afterS?: number;
}

export interface QuotedRate {
  gpuType: string;
  /** Price × GPUs per node × nodes, per hour; null when the catalog has no price. */
  usdPerHour: number | null;
  availability: string | null;
}

export interface Quote {
  /** Nodes every figure counts (1: one pod); with {@link gpuCount}, what the rates are for. */
  nodes: number;
  gpuCount: number;
  rates: QuotedRate[];
  /** Expected cost to finish at the first type's rate; null without a price. */
  expected: {
    lowUsd: number;
    highUsd: number;
    /** `history`: from earlier runs (their min −20 % to their max +20 %); `max_hours`: none to go by. */
    basis: 'history' | 'max_hours';
    runs: number;
  } | null;
  /**
   * Most the pod can cost at the dearest candidate if every client is gone ({@link worstCaseUsd}:
   * max_hours and what the watchdog does past the deadline, or max_cost_usd and its last tick),
   * rounded up to the cent; null without a price.
   */
  worstUsd: number | null;
  /**
   * The work after training (the LoRA merge): its seconds and its cost at the first type's rate
   * (null without a price); counted in `expected`. Null when the job does none.
   */
  after: { seconds: number; usd: number | null } | null;
}

/** ±20 % beyond the shortest and longest earlier runs. */
export const SINGLE_RUN_SPREAD = 0.2;

const cents = (usd: number): number => Math.round(usd * 100) / 100;
/** Up to the cent: a bound is never shown under what it bounds. */
const centsUp = (usd: number): number => Math.ceil(usd * 100 - 1e-9) / 100;

export function quote(input: QuoteInput): Quote {
  const nodes = input.nodes ?? 1;
  const rates = input.candidates.map((c) => ({
    gpuType: c.gpuType,
    usdPerHour: c.pricePerHourUsd === null ? null : c.pricePerHourUsd * input.gpuCount * nodes,
    availability: c.availability,
  }));
  const first = rates[0]?.usdPerHour ?? null;
  const afterS = Math.max(0, input.afterS ?? 0);
  let expected: Quote['expected'] = null;
  if (first !== null) {
    const history = input.historyS.filter((s) => Number.isFinite(s) && s > 0);
    const cap = (usd: number): number =>
      input.maxCostUsd === null ? usd : Math.min(usd, input.maxCostUsd);
    if (history.length === 0) {
      expected = {
        lowUsd: 0,
        highUsd: cents(cap(first * input.maxHours)),
        basis: 'max_hours',
        runs: 0,
      };
    } else {
      const lo = Math.min(...history);
      const hi = Math.max(...history);
      // Runs of one config vary by more than their own min–max on a shared machine (the figure
      // of the integration tier missed with two earlier runs): the spread goes on both ends.
      // Earlier runs' pods may not have merged: the merge's time goes on top (never under).
      const [lowS, highS] = [
        lo * (1 - SINGLE_RUN_SPREAD) + afterS,
        hi * (1 + SINGLE_RUN_SPREAD) + afterS,
      ];
      const maxS = input.maxHours * 3600;
      expected = {
        lowUsd: cents(cap((first * Math.min(lowS, maxS)) / 3600)),
        highUsd: cents(cap((first * Math.min(highS, maxS)) / 3600)),
        basis: 'history',
        runs: history.length,
      };
    }
  }
  const priced = rates.map((r) => r.usdPerHour).filter((r): r is number => r !== null);
  let worstUsd: number | null = null;
  if (priced.length > 0) {
    const dearest = Math.max(...priced);
    worstUsd = centsUp(worstCaseUsd(dearest, input.maxHours, input.maxCostUsd, input.spans));
  }
  const after =
    afterS > 0
      ? { seconds: afterS, usd: first === null ? null : centsUp((first * afterS) / 3600) }
      : null;
  return { nodes, gpuCount: input.gpuCount, rates, expected, worstUsd, after };
}

const usd = (v: number): string => `$${v.toFixed(2)}`;

/** The quote as the CLI prints it and the Train confirmation shows it, one line each. */
export function quoteLines(q: Quote): string[] {
  const lines: string[] = [];
  const nodes = nodesLine(q.nodes, q.gpuCount);
  if (nodes !== null) lines.push(nodes);
  const [first, ...fallbacks] = q.rates;
  if (first) {
    lines.push(
      `Rate: ${first.usdPerHour === null ? 'no price' : `${usd(first.usdPerHour)}/h`} on ${first.gpuType} (tried first)`,
    );
  }
  if (fallbacks.length > 0) {
    lines.push(
      `Fallbacks: ${fallbacks.map((r) => `${r.gpuType} ${r.usdPerHour === null ? 'no price' : `${usd(r.usdPerHour)}/h`}`).join(', ')}`,
    );
  }
  if (q.expected) {
    lines.push(
      q.expected.basis === 'history'
        ? `Expected: ${usd(q.expected.lowUsd)}–${usd(q.expected.highUsd)} (from ${q.expected.runs} earlier run${q.expected.runs === 1 ? '' : 's'} of this config)`
        : `Expected: up to ${usd(q.expected.highUsd)} (no earlier run of this config: up to max_hours)`,
    );
  }
  if (q.after !== null) {
    const minutes = Math.max(1, Math.round(q.after.seconds / 60));
    lines.push(
      `Merge: about ${minutes} min after training${q.after.usd === null ? '' : `, about ${usd(q.after.usd)} at the first rate`} (counted in the expected cost; Axolotl's LoRA merge into output/merged/)`,
    );
  }
  if (q.worstUsd !== null) {
    lines.push(
      q.nodes > 1
        ? `Worst case: ${usd(q.worstUsd)} for all ${q.nodes} nodes; each node's watchdog deletes the whole cluster at its deadline or cost cap (DELETE /v2/clusters/{id}, with its own key) if Runpod lets a member's key do so, which Runpod has not confirmed; if it refuses, the limits hold only while a client follows the run (its deadline, cost cap and lease), and if every client dies the cluster bills until \`overbrainer pod rm RUN_ID\` or Runpod's console deletes it`
        : `Worst case: ${usd(q.worstUsd)} (if every client dies: what the pod's watchdog allows, deadline snapshot and graces included)`,
    );
  }
  return lines;
}

/** How long a finished run held its pod (created → deleted), seconds; null when unknown. */
export function podHeldS(pod: Pick<PodRecord, 'createdUnixS' | 'deletedAt'>): number | null {
  if (pod.createdUnixS === null || pod.deletedAt === null) return null;
  const deletedMs = Date.parse(pod.deletedAt);
  if (Number.isNaN(deletedMs)) return null;
  const s = Math.floor(deletedMs / 1000) - pod.createdUnixS;
  return s > 0 ? s : null;
}

/**
 * How long each earlier succeeded run of `targetName` held its pod, seconds (the quote's
 * history). Damaged records are skipped: they tell nothing about durations.
 */
export function heldByEarlierRuns(
  store: {
    list(): { runs: readonly { id: string; target: string; state: string }[] };
    loadPod(id: string): Pick<PodRecord, 'createdUnixS' | 'deletedAt'> | null;
  },
  targetName: string,
): number[] {
  const held: number[] = [];
  for (const run of store.list().runs) {
    if (run.target !== targetName || run.state !== 'succeeded') continue;
    try {
      const pod = store.loadPod(run.id);
      const s = pod === null ? null : podHeldS(pod);
      if (s !== null) held.push(s);
    } catch {
      // A damaged pod.json.
    }
  }
  return held;
}
