/**
 * How long a pod can exist if every client is gone (VS Code closed, the CLI killed, the laptop
 * asleep), from what its watchdog (src/core/pod/scripts/watchdog.sh) really does with the
 * target's graces and the timing it gets: the spans the quote's worst case prices. Pure.
 *
 * Past the deadline (create + `max_hours`), with no client left, the watchdog deletes the pod at
 * the latest when the longest of these ends:
 * - a lease the client renewed just before the deadline goes stale (the lease TTL); at its next
 *   tick the watchdog asks the job for the deadline's snapshot and holds the delete for the
 *   snapshot wait while the job runs: TTL + one tick + the snapshot wait;
 * - a job the snapshot ended keeps its pod for its retrieval until the deadline + the retrieve
 *   grace.
 * Then one more tick to see it, and the delete itself: DELETE, then the terminate action, then
 * the stop action, each a call of at most {@link WATCHDOG_CALL_LIMIT_S} (a failed round is
 * retried at the next tick; an API that never answers is not bounded by anything).
 *
 * Past the cost cap (`.pod/cost_cap_at`, written on the pod before the job starts) the delete
 * comes at the next tick whatever the job does: one tick and the delete. A pod whose job never
 * started (the client died before writing the cap) is deleted the boot grace after its
 * container started (or at the deadline, whichever is first), plus one tick and the delete.
 */
import type { Timing } from '../timing';

/** Curl's `--max-time` for each of the watchdog's API calls, seconds (watchdog.sh `wd_http`). */
export const WATCHDOG_CALL_LIMIT_S = 30;
/** The calls of one delete round before the next tick: DELETE, terminate, stop (watchdog.sh `wd_delete`). */
export const WATCHDOG_DELETE_CALLS = 3;

/** The spans, in seconds, the watchdog lets a pod live past each of its limits. */
export interface WatchdogSpans {
  /** Past the deadline: max(lease TTL + tick + snapshot wait, retrieve grace) + tick + delete. */
  afterDeadlineS: number;
  /** Past the cost cap: tick + delete. */
  afterCapS: number;
  /** A pod whose job never started: boot grace + tick + delete (never past the deadline's). */
  neverStartedS: number;
}

/** What the spans depend on: the watchdog's timing and the target's graces. */
export function watchdogSpans(
  timing: Pick<Timing, 'leaseTtlMs' | 'watchdogIntervalS' | 'snapshotWaitS'>,
  graces: { bootGraceS: number; retrieveGraceS: number },
): WatchdogSpans {
  const tickS = timing.watchdogIntervalS;
  const deleteS = WATCHDOG_DELETE_CALLS * WATCHDOG_CALL_LIMIT_S;
  const leaseTtlS = timing.leaseTtlMs / 1000;
  const heldS = Math.max(leaseTtlS + tickS + timing.snapshotWaitS, graces.retrieveGraceS);
  return {
    afterDeadlineS: heldS + tickS + deleteS,
    afterCapS: tickS + deleteS,
    neverStartedS: graces.bootGraceS + tickS + deleteS,
  };
}

/**
 * The most a pod at `usdPerHour` can bill if every client is gone: `maxHours` and the span past
 * the deadline; with a cost cap, the cap and the span past it, or the never-started pod's span
 * when that is more, never more than without a cap. USD, unrounded.
 */
export function worstCaseUsd(
  usdPerHour: number,
  maxHours: number,
  maxCostUsd: number | null,
  spans: WatchdogSpans,
): number {
  const atRate = (s: number): number => (usdPerHour * s) / 3600;
  const uncapped = atRate(maxHours * 3600 + spans.afterDeadlineS);
  if (maxCostUsd === null) return uncapped;
  const capped = Math.max(maxCostUsd + atRate(spans.afterCapS), atRate(spans.neverStartedS));
  return Math.min(uncapped, capped);
}
