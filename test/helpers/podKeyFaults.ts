/**
 * Faults on what a pod's own key asks the emulated API (its watchdog's calls, not the client's).
 */
import type { FaultEffect, RouteName } from '../emulator/faults';
import type { FaultsApi } from '../emulator/types';

/** From now on, every call of `route` made with a pod's own key gets `effect`. */
export function podKeyCallsFail(
  faults: FaultsApi,
  route: RouteName,
  effect: FaultEffect,
): Promise<string> {
  return faults.add({ kind: 'request', route, key: 'pod', times: 'always', effect });
}
