/**
 * The money of a run's pods beside its current one (pod.json `other_pods`) and the rules every
 * pod's estimate follows: when Runpod started billing it, what it cost by a moment.
 */
import { podSpendUsd } from './spend';

/**
 * A pod of the run other than its current one, with its money: an earlier attempt's (the run
 * recovered on a new pod), one the provisioning walk deleted (not ready, refused), a duplicate a
 * sweep deleted, or a stray whose deletion is not confirmed (`endedMs` null: it may still bill).
 */
export interface OtherPod {
  podId: string;
  costPerHourUsd: number | null;
  /** When Runpod started billing it, unix ms (see {@link PodRecord.billedFromMs}); null unknown. */
  billedFromMs: number | null;
  /** When its deletion was confirmed, unix ms; null while it may still exist. */
  endedMs: number | null;
  /** Rate × life, USD to 1/10000, once it ended; null before or when unknown. */
  estimatedSpendUsd: number | null;
  /** What Runpod billed it; null until read. */
  billedUsd: number | null;
  billedCheckedAt: string | null;
}

/** The rate to keep from Runpod's `cost`: only a positive, finite one. */
export function rate(cost: number | null | undefined): number | null {
  return typeof cost === 'number' && Number.isFinite(cost) && cost > 0 ? cost : null;
}

/**
 * When Runpod started billing a pod whose create call was sent at `sentMs` and answered at
 * `answeredMs`: its `createdAt` (whole seconds, so at most a second early), but never before the
 * call was sent; the sending alone when `createdAt` is missing or later than the answer (a clock
 * this client cannot compare with Runpod's).
 */
export function billedFrom(
  createdAt: string | null | undefined,
  sentMs: number,
  answeredMs: number,
): number {
  const apiMs = createdAt ? Date.parse(createdAt) : NaN;
  if (Number.isNaN(apiMs) || apiMs > answeredMs) return sentMs;
  return Math.max(apiMs, sentMs);
}

/** What another pod of a run has cost by `nowMs` (to its end once it ended); null unknown. */
export function otherSpendUsd(other: OtherPod, nowMs: number): number | null {
  if (other.endedMs !== null) return other.estimatedSpendUsd;
  return podSpendUsd(other, nowMs);
}

export function endOther(other: OtherPod, endedMs: number): void {
  other.endedMs = endedMs;
  other.estimatedSpendUsd = podSpendUsd(other, endedMs);
}
