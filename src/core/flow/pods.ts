/**
 * The account's pods as the front ends list and remove them (`pod ls`, `pod rm`, the Pods view
 * and its Remove), each a command on the Workspace; the Runpod catalog, a pod's live log, and the
 * Runpod API's errors a front end words.
 */
import { EventBus } from '../events';
import * as podAdmin from '../pod/podAdmin';
import type { Pod } from '../runpod/api';
import type { RunpodClient } from '../runpod/client';
import type { RunStore } from '../runs/store';
import type { Workspace } from './workspace';

export {
  cell,
  PodAdminError,
  podTable,
  type PodAdminErrorKind,
  type PodRow,
  type PodRowKind,
  type RemovedPod,
  type Removal,
} from '../pod/podAdmin';
export {
  inStock,
  type AvailabilityLevel,
  type DataCenter,
  type GpuType,
  type NetworkVolume,
  type Pod,
  type Template,
} from '../runpod/api';
export { ApiError, isApiError, RunpodConfigError } from '../runpod/apiErrors';
export { CallLimits, type RateLimitWait } from '../runpod/callLimits';
export { streamPodLogs } from '../runpod/podLogs';

/** The Runpod client a command's calls go through when not the workspace's own (the CLI's read-only limits). */
export interface Via {
  client?: RunpodClient;
}

/**
 * `pod ls`: the account's overbrainer pods matched with the workspace's runs, the recorded pods
 * the account no longer shows looked up and recorded gone once confirmed.
 */
export function listPods(
  ws: Workspace,
  options: podAdmin.ListPodsOptions & Via = {},
): Promise<podAdmin.PodRow[]> {
  return podAdmin.listPods(ws.podCtx(options.client), options);
}

/** `pod rm ID`: a run's pods, or one pod by its ID under its run's rules. Never throws. */
export function removeRunOrPod(
  ws: Workspace,
  id: string,
  options: podAdmin.RemoveOptions = {},
): Promise<podAdmin.Removal> {
  return podAdmin.removeRunOrPod(ws.podCtx(), id, options);
}

/** `pod rm RUN_ID`: the run's pods, with its refusals. Never throws. */
export function removePods(
  ws: Workspace,
  runId: string,
  options: podAdmin.RemoveOptions = {},
): Promise<podAdmin.Removal> {
  return podAdmin.removePods(ws.podCtx(), runId, options);
}

/** One pod of no run, by its ID, confirmed gone (the Pods view's Remove of an orphan). */
export function removePodById(ws: Workspace, podId: string): Promise<podAdmin.RemovedPod> {
  return podAdmin.removePodById(ws.podCtx(), podId);
}

/** How specific a row's knowledge is: a folder that holds the run beats one that does not. */
function rowRank(kind: podAdmin.PodRowKind): number {
  return kind === 'no_marker' ? 0 : kind === 'not_in_runs' ? 1 : 2;
}

/**
 * The account's pods of one listing classified against the records of each runs folder by the
 * rules of `pod ls`, without calling the API again. Several folders: a pod takes the row of the
 * folder that knows its run. The damaged records' warnings are the Runs view's to show, not said
 * here at each listing.
 */
export function classifyAccountPods(
  pods: readonly Pod[],
  stores: readonly RunStore[],
): podAdmin.PodRow[] {
  const best = new Map<string, podAdmin.PodRow>();
  for (const store of stores) {
    for (const row of podAdmin.podRows({ store, bus: new EventBus() }, pods)) {
      const known = best.get(row.podId);
      if (known === undefined || rowRank(row.kind) > rowRank(known.kind)) best.set(row.podId, row);
    }
  }
  return [...best.values()];
}
