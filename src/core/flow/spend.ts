/**
 * What runs cost as the front ends show it (`spend`, `runs show`, the Spend view, the run page):
 * the estimates from the records, the bills Runpod reports (read by {@link readBills}) and the
 * budget's lines.
 */
import { billSettled, recordBilled, recordOtherBills } from '../pod/billing';
import { recordClusterBilled } from '../pod/clusterBilling';
import type { PodRecord } from '../runs/podRecord';
import type { Via } from './pods';
import type { Workspace } from './workspace';

export { billedMismatch, billSettled } from '../pod/billing';
export { clusterSpends, runClusters } from '../runs/clusterSpend';
export type { RunCluster } from '../runs/clusterRecord';
export {
  podSpendUsd,
  projectSpend,
  runPodSpends,
  runTotals,
  usd4,
  type ProjectSpend,
} from '../runs/spend';
export { budgetLines, runSpendLines } from '../runs/spendLines';

/**
 * `spend`'s look at Runpod's bills for one run's pods: the run's pod, once deleted, when its bill
 * was never read or read too soon after the deletion to be final (`GET /billing/pods`), and its
 * other pods' (earlier attempts, swept duplicates) likewise; each bill read is saved in pod.json.
 */
export async function readBills(
  ws: Workspace,
  pod: PodRecord,
  options: Via & { signal?: AbortSignal } = {},
): Promise<void> {
  const ctx = ws.podCtx(options.client);
  if (pod.state === 'deleted' && !billSettled(pod)) await recordBilled(ctx, pod, options.signal);
  await recordOtherBills(ctx, pod, options.signal);
}

/**
 * `spend`'s look at Runpod's bills of a run's clusters (`GET /billing/clusters`): each, the ones
 * a node's death replaced too, once deleted, until the bill read is final; saved in run.json.
 */
export async function readClusterBill(
  ws: Workspace,
  runId: string,
  options: Via & { signal?: AbortSignal } = {},
): Promise<void> {
  await recordClusterBilled(ws.podCtx(options.client), runId, options.signal);
}
