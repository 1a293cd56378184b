/**
 * What a limit (the cost cap or `max_hours`) makes of a run whose pod it ended: the run's cause
 * and message, and the error the flow throws.
 */
import type { PodRecord } from '../runs/podRecord';
import { limitPassed } from './lease';
import { PodError } from './podError';

/** Why a run fails when its pod was deleted on `max_hours`. */
export const MAX_HOURS_REACHED = 'max_hours reached: the pod was deleted before the job ended';
/** Why a run fails when its pod was deleted on `max_cost_usd`. */
export const MAX_COST_REACHED = 'max_cost_usd reached: the pod was deleted before the job ended';

/**
 * The run's failure when a limit ended its pod at `nowMs` (the cost cap or `max_hours`, whichever
 * came first), with the error the flow throws; null when neither passed.
 */
export function limitFailure(pod: PodRecord, nowMs: number): LimitEnd | null {
  const limit = limitPassed(pod, nowMs);
  return limit === null ? null : limitEnd(limit);
}

/** What a limit makes of a run whose pod it ended: its cause and message, and the error to throw. */
export interface LimitEnd {
  cause: 'cost_cap' | 'deadline';
  message: string;
  error: PodError;
}

export function limitEnd(limit: 'cost_cap' | 'deadline'): LimitEnd {
  return limit === 'cost_cap'
    ? {
        cause: limit,
        message: MAX_COST_REACHED,
        error: new PodError(
          'cost_cap_reached',
          MAX_COST_REACHED,
          "Raise the target's max_cost_usd (or remove it) for jobs this costly.",
        ),
      }
    : {
        cause: limit,
        message: MAX_HOURS_REACHED,
        error: new PodError(
          'deadline_reached',
          MAX_HOURS_REACHED,
          "Raise the target's max_hours, or keep the pod, for jobs this long.",
        ),
      };
}
