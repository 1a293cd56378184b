/**
 * The client's side of the deadline: when to renew the lease, when the guard fires, the
 * countdown, when a pod is gone by, and the overrun warning. Pure functions
 * of the pod's deadline, the lease and the time: the follow loop and the UI
 * (status bar countdown, overrun banner) call the same rules.
 */
import type { Timing } from '../timing';

/** What the rules need of a pod record. */
export interface DeadlineView {
  keep: boolean;
  /** The watchdog's deadline (seconds since the epoch); null when kept. */
  deadlineUnixS: number | null;
  /** The same deadline as RFC 3339, for messages. */
  deadline: string | null;
}

/** What the rules need of a pace: the time the job still needs, if known. */
export interface EtaSource {
  etaMs(): number | null;
}

/**
 * Whether the lease, last renewed at `renewedMs`, should be renewed at `nowMs`:
 * once `leaseRenewMs` passed, and only while the job made progress (its last
 * metric at `lastMetricMs`) within `stallMs`.
 */
export function renewalDue(
  timing: Timing,
  renewedMs: number | null,
  lastMetricMs: number,
  nowMs: number,
): boolean {
  const since = (atMs: number): number => Math.max(0, nowMs - atMs);
  return (
    since(lastMetricMs) < timing.stallMs &&
    (renewedMs === null || since(renewedMs) >= timing.leaseRenewMs)
  );
}

/**
 * Time left at `nowMs` until the client's own deadline (the watchdog's plus
 * `deadlineMarginMs`), zero once it passed; null for a kept pod, or one without
 * a deadline. Whole seconds, as the watchdog counts.
 */
export function untilDeadlineMs(timing: Timing, pod: DeadlineView, nowMs: number): number | null {
  if (pod.keep || pod.deadlineUnixS === null) return null;
  const deadlineS = pod.deadlineUnixS + Math.floor(timing.deadlineMarginMs / 1000);
  const nowS = Math.floor(nowMs / 1000);
  return Math.max(0, deadlineS - nowS) * 1000;
}

/**
 * Whether the client's own guard deletes `pod` at `nowMs`: its deadline plus
 * the margin passed, and no lease renewed within `leaseTtlMs`.
 */
export function guardFires(
  timing: Timing,
  pod: DeadlineView,
  renewedMs: number | null,
  nowMs: number,
): boolean {
  const held = renewedMs !== null && Math.max(0, nowMs - renewedMs) < timing.leaseTtlMs;
  return !held && untilDeadlineMs(timing, pod, nowMs) === 0;
}

/**
 * Whether the watchdog's own deadline for `pod` has passed at `nowMs`; never
 * for a kept pod, or one without a deadline. A pod found gone then was deleted
 * by its watchdog on `max_hours`.
 */
export function pastDeadline(pod: DeadlineView, nowMs: number): boolean {
  return !pod.keep && pod.deadlineUnixS !== null && Math.floor(nowMs / 1000) >= pod.deadlineUnixS;
}

/** What the cost cap needs of a pod record. */
export interface CostCapView {
  keep: boolean;
  /** The cap armed on the pod (pod.json `max_cost_usd`); null when kept or unset. */
  costCapUsd: number | null;
  costPerHourUsd: number | null;
  createdUnixS: number | null;
}

/**
 * When `max_cost_usd` is spent at the pod's rate (seconds since the epoch): its creation plus
 * max_cost_usd / rate hours, the moment its watchdog deletes it (`.pod/cost_cap_at`);
 * null for a kept pod, one without a cap, or one whose rate or creation is unknown.
 */
export function costCapAtUnixS(pod: CostCapView): number | null {
  if (pod.keep || pod.costCapUsd === null) return null;
  if (pod.costPerHourUsd === null || pod.createdUnixS === null) return null;
  return pod.createdUnixS + Math.floor((pod.costCapUsd / pod.costPerHourUsd) * 3600);
}

/**
 * When the cost cap's snapshot is asked for (`.pod/snapshot_at`): the earlier of 95 %
 * of the cap's time and `leadS` before it, so the job has time to save and the client to bring
 * the checkpoint home before the pod is deleted; null where there is no cap.
 */
export function snapshotAtUnixS(pod: CostCapView, leadS: number): number | null {
  const capAtUnixS = costCapAtUnixS(pod);
  if (capAtUnixS === null || pod.createdUnixS === null) return null;
  const span = capAtUnixS - pod.createdUnixS;
  return Math.min(pod.createdUnixS + Math.floor(span * 0.95), capAtUnixS - leadS);
}

/**
 * Whether the cost cap of `pod` is spent at `nowMs`: the client's guard deletes the pod then,
 * whatever the lease, should its watchdog not have.
 */
export function pastCostCap(pod: CostCapView, nowMs: number): boolean {
  const capAtUnixS = costCapAtUnixS(pod);
  return capAtUnixS !== null && Math.floor(nowMs / 1000) >= capAtUnixS;
}

/**
 * Which limit ended a pod found gone (or due for deletion) at `nowMs`: the cost cap or
 * `max_hours`, whichever came first; null when neither has passed.
 */
export function limitPassed(
  pod: DeadlineView & CostCapView,
  nowMs: number,
): 'cost_cap' | 'deadline' | null {
  const cost = pastCostCap(pod, nowMs);
  const deadline = pastDeadline(pod, nowMs);
  if (cost && deadline) {
    return (costCapAtUnixS(pod) ?? 0) <= (pod.deadlineUnixS ?? 0) ? 'cost_cap' : 'deadline';
  }
  return cost ? 'cost_cap' : deadline ? 'deadline' : null;
}

/** Who deleted a pod found gone at `nowMs` without us deleting it. */
export function goneBy(pod: DeadlineView & CostCapView, nowMs: number): 'watchdog' | 'unknown' {
  return limitPassed(pod, nowMs) !== null ? 'watchdog' : 'unknown';
}

/**
 * The warning when, at `pace`, the job of `pod` still running at `nowMs` would
 * end after its watchdog's deadline; null when it ends in time, for a kept pod,
 * or while the pace is unknown. With a `leased` pod the deadline only applies
 * once the client stops following the job, and the text says so.
 */
export function overrun(
  pace: EtaSource,
  pod: DeadlineView,
  nowMs: number,
  leased: boolean,
): string | null {
  if (pod.keep || pod.deadlineUnixS === null) return null;
  const leftMs = pace.etaMs();
  if (leftMs === null) return null;
  const endS = Math.floor((nowMs + leftMs) / 1000);
  if (endS <= pod.deadlineUnixS) return null;
  const hours = (leftMs / 3_600_000).toFixed(1);
  const at = pod.deadline ?? 'its deadline';
  if (leased) {
    return (
      `at this pace the job needs about ${hours}h more, past max_hours (${at}): ` +
      'the pod stays while overbrainer follows the job; if it stops following, ' +
      "the pod's watchdog deletes the pod"
    );
  }
  return (
    `at this pace the job needs about ${hours}h more, but the pod's watchdog deletes it by ${at} (max_hours): ` +
    "raise the target's max_hours, or train with --keep-pod, to let it finish"
  );
}
