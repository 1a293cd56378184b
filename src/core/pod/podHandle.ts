/**
 * One pod as following its job needs it: its id at Runpod, SSH access to it, the limits armed on
 * it and its network volume. Whatever watches a pod (the lease, the guard, the disk) takes this
 * handle, not the run's pod record, so a cluster hands one per member pod.
 */
import type { Executor } from '../exec/executor';
import type { PodRecord } from '../runs/podRecord';
import type { PodCtx } from './context';
import type { CostCapView, DeadlineView } from './lease';
import { syncKeep } from './podEnd';

export interface PodHandle {
  /** The pod's id at Runpod (null: no create was answered). */
  readonly podId: string | null;
  /** SSH access to the pod. */
  readonly executor: Executor;
  /**
   * Its limits as armed: kept or not, the deadline, the cost cap and the rate it spends at. Read
   * live: {@link PodHandle.refresh} takes up a keep or a release another client made.
   */
  readonly limits: DeadlineView & CostCapView;
  /** The run's network volume mounted on it (its id, how far it may grow), or null. */
  readonly volume: { id: string; maxGb: number | null } | null;
  /** Takes up what another process changed in its limits (a keep, a release's deadline). */
  refresh(): void;
}

/** The handle of the run's pod `pod`, reached through `executor`. */
export function podHandle(ctx: PodCtx, pod: PodRecord, executor: Executor): PodHandle {
  const volumeId = pod.networkVolumeId;
  return {
    podId: pod.podId,
    executor,
    limits: pod,
    volume: volumeId === null ? null : { id: volumeId, maxGb: pod.maxVolumeGb },
    refresh: () => syncKeep(ctx, pod),
  };
}
