/** `spend`: the CLI's spend listing (its words and JSON are in ../spend.ts). */
import { type PodRecord } from '../../core/flow/records';
import { readBills, readClusterBill, runClusters } from '../../core/flow/spend';
import { clusterSpendRow, spendJson, spendRow, spendTable, type SpendRow } from '../spend';
import { EXIT_OK, type Session } from '../session';
import { describeError } from '../../core/errors';

/**
 * `spend`: each run's estimated pod spend (every pod of the run: a recovered run's attempts,
 * swept duplicates, strays, a live or kept pod so far) beside what Runpod billed. A deleted pod
 * whose bill was never read, or read too soon after the deletion to be final, is read now
 * (`GET /billing/pods`) and saved in its pod.json, a deleted cluster's likewise (`GET
 * /billing/clusters`, saved in run.json); without an API key the figures on disk are
 * listed as they are.
 */
export async function spend(s: Session, sinceMs: number | null, json: boolean): Promise<number> {
  s.config(false);
  const { runs, warnings } = s.store.list();
  for (const w of warnings) s.io.stderr(`warning: ${w.message}`);
  const client = s.api(false);
  const rows: SpendRow[] = [];
  for (const run of runs) {
    if (sinceMs !== null && Date.parse(run.created) < sinceMs) continue;
    let pod: PodRecord | null;
    try {
      pod = s.store.loadPod(run.id);
    } catch (error) {
      s.io.stderr(`warning: run ${run.id}: ${describeError(error)}`);
      continue;
    }
    if (pod === null) {
      // A run on a cluster: the members of each of its clusters (a node's death replaces the
      // whole cluster) summed, and each cluster's bill (GET /billing/clusters).
      if (runClusters(run).length === 0) continue;
      if (client !== null) {
        await s.readOnly(client, (api, signal) =>
          readClusterBill(s.workspace, run.id, { client: api, signal }),
        );
      }
      const fresh = s.store.loadRun(run.id);
      const clusters = runClusters(fresh);
      if (clusters.length > 0) {
        rows.push(clusterSpendRow(run.id, run.created, fresh.state, clusters, s.clock.nowMs()));
      }
      continue;
    }
    if (client !== null) {
      await s.readOnly(client, (api, signal) =>
        readBills(s.workspace, pod, { client: api, signal }),
      );
    }
    rows.push(spendRow(run.id, run.created, run.state, pod, s.clock.nowMs()));
  }
  if (json) {
    s.io.stdout(JSON.stringify(spendJson(rows), null, 2));
    return EXIT_OK;
  }
  for (const line of spendTable(rows)) s.io.stdout(line);
  return EXIT_OK;
}
