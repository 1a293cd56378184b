/**
 * What this project spent, from its run records: per pod, Runpod's bill where it was read, else
 * our estimate (rate × uptime); live pods so far; and what is left of `[budget]` for today and
 * this month (UTC). Pure over the records and the time: the train gate, the Spend view, the
 * status bar and `runs show` read the same figures.
 */
import type { BudgetConfig } from '../config/budget';
import type { OtherPod, PodRecord } from './podRecord';
import type { RunRecord } from './runRecord';
import { clusterSpends, runClusters } from './clusterSpend';

/** A budget's period: the UTC day or the UTC month. */
export type BudgetPeriod = 'day' | 'month';

/** Start of the UTC day holding `nowMs`. */
export function dayStartMs(nowMs: number): number {
  const d = new Date(nowMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
}

/** Start of the UTC month holding `nowMs`. */
export function monthStartMs(nowMs: number): number {
  const d = new Date(nowMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/** One pod's money, as the records say at `nowMs`. */
export interface PodSpend {
  runId: string;
  podId: string | null;
  /** `live`: it bills now (not kept); `kept`: it bills until removed; `ended`: deleted. */
  status: 'live' | 'kept' | 'ended';
  usdPerHour: number | null;
  createdMs: number | null;
  /** When it ended (deleted); null while it exists. */
  endedMs: number | null;
  /** Rate × uptime: so far while it exists, the final estimate once deleted. */
  estimatedUsd: number | null;
  /** Runpod's bill; null until read. */
  billedUsd: number | null;
  /**
   * The most this pod may cost in all, as far as the records bound it: its cost cap (the
   * watchdog deletes it there whatever the client does), else its rate until its deadline; null
   * for a kept pod or one whose rate is unknown (no bound).
   */
  boundUsd: number | null;
}

const round4 = (usd: number): number => Math.round(usd * 10_000) / 10_000;

/** An amount to the hundredth of a cent, as the spend listings show it: `$0.0123`, `-$0.2000`. */
export function usd4(value: number | null): string {
  return value === null ? '-' : `${value < 0 ? '-' : ''}$${Math.abs(value).toFixed(4)}`;
}

/**
 * What a pod has cost by `nowMs`, USD to a hundredth of a cent: its rate over the milliseconds
 * from its create call's sending (`billedFromMs`; a record without it counts from
 * `createdUnixS`). At most the create and delete calls' durations above Runpod's bill, never
 * below it; null while the rate or the creation is unknown. The one rule for every spend shown.
 */
export function podSpendUsd(
  pod: {
    costPerHourUsd: number | null;
    billedFromMs?: number | null;
    createdUnixS?: number | null;
  },
  nowMs: number,
): number | null {
  const createdUnixS = pod.createdUnixS ?? null;
  const fromMs = pod.billedFromMs ?? (createdUnixS === null ? null : createdUnixS * 1000);
  if (pod.costPerHourUsd === null || fromMs === null) return null;
  const usd = (pod.costPerHourUsd * Math.max(0, nowMs - fromMs)) / 3_600_000;
  return round4(usd);
}

/** The money side of one pod record at `nowMs`. */
export function podSpend(pod: PodRecord, nowMs: number): PodSpend {
  const rate = pod.costPerHourUsd;
  const createdMs = pod.createdUnixS === null ? null : pod.createdUnixS * 1000;
  const ended = pod.state === 'deleted';
  const deletedMs = pod.deletedAt === null ? NaN : Date.parse(pod.deletedAt);
  const endedMs = ended ? (Number.isNaN(deletedMs) ? null : deletedMs) : null;
  let estimatedUsd: number | null;
  if (ended) {
    estimatedUsd = pod.estimatedSpendUsd;
  } else {
    estimatedUsd = pod.spendUsd(nowMs) ?? (pod.podId === null ? 0 : null);
  }
  const status: PodSpend['status'] = ended
    ? 'ended'
    : pod.keep || pod.state === 'kept'
      ? 'kept'
      : 'live';
  let boundUsd: number | null = null;
  if (status === 'live') {
    if (pod.costCapUsd !== null) boundUsd = pod.costCapUsd;
    else if (rate !== null && createdMs !== null && pod.deadlineUnixS !== null) {
      boundUsd = round4((rate * Math.max(0, pod.deadlineUnixS * 1000 - createdMs)) / 3_600_000);
    }
    if (boundUsd !== null && estimatedUsd !== null) boundUsd = Math.max(boundUsd, estimatedUsd);
  }
  return {
    runId: pod.runId,
    podId: pod.podId,
    status,
    usdPerHour: rate,
    createdMs,
    endedMs,
    estimatedUsd,
    billedUsd: pod.billedUsd,
    boundUsd,
  };
}

/** The money side of another pod of run `runId` (see {@link OtherPod}) at `nowMs`. */
export function otherPodSpend(runId: string, other: OtherPod, nowMs: number): PodSpend {
  const ended = other.endedMs !== null;
  return {
    runId,
    podId: other.podId,
    status: ended ? 'ended' : 'live',
    usdPerHour: other.costPerHourUsd,
    createdMs: other.billedFromMs,
    endedMs: other.endedMs,
    estimatedUsd: ended ? other.estimatedSpendUsd : podSpendUsd(other, nowMs),
    billedUsd: other.billedUsd,
    boundUsd: null,
  };
}

/**
 * Every pod of the run `pod` records at `nowMs`: its current pod first, then the others (earlier
 * attempts of a recovered run, pods the provisioning walk or a sweep deleted, strays).
 */
export function runPodSpends(pod: PodRecord, nowMs: number): PodSpend[] {
  return [podSpend(pod, nowMs), ...pod.otherPods.map((o) => otherPodSpend(pod.runId, o, nowMs))];
}

/** A run's money over all its pods, as the spend listings show it. */
export interface RunSpendTotal {
  runId: string;
  /** Its current pod (the last one), as {@link PodSpend} has it. */
  current: PodSpend;
  /** How many pods it had. */
  pods: number;
  /** The estimates summed (what is known of them); null when none is known. */
  estimatedUsd: number | null;
  /** Runpod's bills summed, once every pod ended and each bill was read; else null. */
  billedUsd: number | null;
  /** How far the summed estimate may honestly be from the bill: each pod's resolution summed. */
  resolutionUsd: number;
}

/**
 * How far over its bill a pod's estimate may honestly be at `usdPerHour`: it counts from the
 * pod's `createdAt` (whole seconds, but never before the create call was sent) to the API's
 * confirmation of its deletion, so over by at most a second plus the delete call's answer (2 s
 * allowed together), and it is rounded to $0.0001 (a pod of a few seconds cannot agree to 1 %).
 */
export function estimateResolutionUsd(usdPerHour: number | null): number {
  return 0.0001 + ((usdPerHour ?? 0) * 2) / 3600;
}

/** The pods of {@link podSpends} summed per run, in their order. */
export function runTotals(pods: readonly PodSpend[]): RunSpendTotal[] {
  const byRun = new Map<string, PodSpend[]>();
  for (const p of pods) byRun.set(p.runId, [...(byRun.get(p.runId) ?? []), p]);
  return [...byRun.entries()].map(([runId, parts]) => {
    const known = parts.filter((p) => p.estimatedUsd !== null);
    const billed = parts
      .filter((p) => p.podId !== null)
      .every((p) => p.status === 'ended' && p.billedUsd !== null);
    return {
      runId,
      current: parts[0]!,
      pods: parts.filter((p) => p.podId !== null).length,
      estimatedUsd:
        known.length === 0 ? null : round4(known.reduce((a, p) => a + p.estimatedUsd!, 0)),
      billedUsd: billed ? round4(parts.reduce((a, p) => a + p.billedUsd!, 0)) : null,
      resolutionUsd: parts
        .filter((p) => p.podId !== null)
        .reduce((a, p) => a + estimateResolutionUsd(p.usdPerHour), 0),
    };
  });
}

/**
 * The part of a pod's spend that falls in [fromMs, nowMs]: its amount (the bill where read, else
 * the estimate) times the share of its life inside the window. A pod whose times are unknown
 * counts whole.
 */
export function spentWithin(p: PodSpend, fromMs: number, nowMs: number): number {
  const amount = p.billedUsd ?? p.estimatedUsd ?? 0;
  if (p.createdMs === null) return amount;
  const endMs = p.endedMs ?? nowMs;
  const lifeMs = endMs - p.createdMs;
  if (lifeMs <= 0) return p.createdMs >= fromMs ? amount : 0;
  const inside = Math.max(0, Math.min(endMs, nowMs) - Math.max(p.createdMs, fromMs));
  return (amount * inside) / lifeMs;
}

/** One period of the budget at `nowMs`. */
export interface PeriodSpend {
  period: BudgetPeriod;
  /** The budget; null when `[budget]` sets none for this period. */
  limitUsd: number | null;
  /** Spent in the period: ended pods (bill or estimate) and live and kept pods so far. */
  spentUsd: number;
  /**
   * What live pods may still cost on top (each up to its cap or deadline): held back from what
   * is left, so concurrent runs cannot share the same dollars.
   */
  reservedUsd: number;
  /** limit − spent − reserved, never below 0; null without a limit. */
  leftUsd: number | null;
}

export interface ProjectSpend {
  nowMs: number;
  pods: PodSpend[];
  day: PeriodSpend;
  month: PeriodSpend;
  /** What is left of the tighter budget; null when there is none. */
  leftUsd: number | null;
  /** Which budget is the tighter one; null when there is none. */
  bindingPeriod: BudgetPeriod | null;
  /** Kept pods: they bill with no cap until removed, so no budget can bound them. */
  keptPods: PodSpend[];
}

/** What the spend accounting needs of the run store. */
export interface SpendSource {
  list(): {
    runs: readonly Pick<
      RunRecord,
      'id' | 'state' | 'created' | 'budgetCapUsd' | 'cluster' | 'earlierClusters'
    >[];
  };
  loadPod(id: string): PodRecord | null;
}

/**
 * How long a run the budget gate let start holds its cap without a pod record: its train writes
 * one within seconds, so an older `preparing` run without one is a train that died before.
 */
export const PENDING_CAP_HOLD_MS = 10 * 60_000;

/**
 * Every pod of every pod record of the store (damaged ones skipped: they say nothing reliable),
 * each run's current pod and its other pods, and for a run
 * the budget gate let start that has no pod record yet, its cap held back as a live pod's bound
 * (for {@link PENDING_CAP_HOLD_MS} after its creation).
 */
export function podSpends(store: SpendSource, nowMs: number): PodSpend[] {
  const out: PodSpend[] = [];
  for (const run of store.list().runs) {
    let pod: PodRecord | null;
    try {
      pod = store.loadPod(run.id);
    } catch {
      continue;
    }
    if (pod !== null) out.push(...runPodSpends(pod, nowMs));
    else if (run.cluster || run.earlierClusters?.length) {
      // A cluster replaced after a node failed counts too: every member of every cluster.
      for (const cluster of runClusters(run)) {
        out.push(...clusterSpends(run.id, cluster, nowMs));
      }
    } else if (
      run.state === 'preparing' &&
      (run.budgetCapUsd ?? 0) > 0 &&
      nowMs - Date.parse(run.created) < PENDING_CAP_HOLD_MS
    ) {
      out.push(pendingSpend(run.id, run.budgetCapUsd!));
    }
  }
  return out;
}

/** A run let start with cap `capUsd` whose pod record is not written yet: nothing spent, all held. */
function pendingSpend(runId: string, capUsd: number): PodSpend {
  return {
    runId,
    podId: null,
    status: 'live',
    usdPerHour: null,
    createdMs: null,
    endedMs: null,
    estimatedUsd: 0,
    billedUsd: null,
    boundUsd: capUsd,
  };
}

function period(
  pods: readonly PodSpend[],
  which: BudgetPeriod,
  limitUsd: number | null,
  nowMs: number,
): PeriodSpend {
  const fromMs = which === 'day' ? dayStartMs(nowMs) : monthStartMs(nowMs);
  let spent = 0;
  let reserved = 0;
  for (const p of pods) {
    spent += spentWithin(p, fromMs, nowMs);
    if (p.status === 'live' && p.boundUsd !== null) {
      reserved += Math.max(0, p.boundUsd - (p.estimatedUsd ?? 0));
    }
  }
  const spentUsd = round4(spent);
  const reservedUsd = round4(reserved);
  return {
    period: which,
    limitUsd,
    spentUsd,
    reservedUsd,
    leftUsd: limitUsd === null ? null : round4(Math.max(0, limitUsd - spentUsd - reservedUsd)),
  };
}

/** The project's spend at `nowMs` against `budget` (null or absent: no budget). */
export function projectSpend(
  store: SpendSource,
  budget: BudgetConfig | null | undefined,
  nowMs: number,
): ProjectSpend {
  return spendOf(podSpends(store, nowMs), budget, nowMs);
}

/** {@link projectSpend} over pods already read. */
export function spendOf(
  pods: PodSpend[],
  budget: BudgetConfig | null | undefined,
  nowMs: number,
): ProjectSpend {
  const day = period(pods, 'day', budget?.maxUsdPerDay ?? null, nowMs);
  const month = period(pods, 'month', budget?.maxUsdPerMonth ?? null, nowMs);
  let leftUsd: number | null = null;
  let bindingPeriod: BudgetPeriod | null = null;
  for (const p of [day, month]) {
    if (p.leftUsd !== null && (leftUsd === null || p.leftUsd < leftUsd)) {
      leftUsd = p.leftUsd;
      bindingPeriod = p.period;
    }
  }
  return {
    nowMs,
    pods,
    day,
    month,
    leftUsd,
    bindingPeriod,
    keptPods: pods.filter((p) => p.status === 'kept'),
  };
}
