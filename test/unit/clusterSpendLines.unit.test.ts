/**
 * The spend lines of a run on a cluster (issue 37): `runs show` and the status bar's tooltip
 * read them (runSpendLines) from the run's records in a real run store, as for a run on one pod:
 * in all over every member of every cluster the run had, each attempt's cluster on a line of its
 * own (N nodes × the member rate, the estimate beside the cluster's bill once read), and while
 * it runs the rate for all nodes, the ETA and the cost cap for the whole cluster.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { runShowLines } from '../../src/cli/commands/runsShow';
import { runSpendLines } from '../../src/core/flow/spend';
import type { RunCluster } from '../../src/core/runs/clusterRecord';
import { RunStore } from '../../src/core/runs/store';
import { statusForPod } from '../../src/ui/runs/statusModel';

const H = 3_600_000;
const CREATED = '2026-12-02T10:00:00Z';
const T0 = Date.parse(CREATED);

function cluster(id: string, fromMs: number, toMs: number | null, billedUsd: number | null) {
  const node = (rank: number) => ({
    rank,
    podId: `${id}-pod-${rank}`,
    ip: `10.65.0.${rank + 2}`,
    state: 'running' as const,
    deadlineUnixS: (fromMs + 2 * H) / 1000,
    costCapAtUnixS: (fromMs + H) / 1000,
    message: null,
  });
  const c: RunCluster = {
    id,
    name: `overbrainer-ddp-x-${id}`,
    gpuTypeId: 'NVIDIA A40',
    gpuCountPerPod: 1,
    costPerHourUsd: 0.8,
    createdAt: new Date(fromMs).toISOString(),
    deletedAt: toMs === null ? null : new Date(toMs).toISOString(),
    nodes: [node(0), node(1)],
    billedUsd,
    billedCheckedAt: billedUsd === null ? null : new Date((toMs ?? fromMs) + 60_000).toISOString(),
  };
  return c;
}

describe('the spend lines of a run on a cluster', () => {
  let dir = '';
  let store: RunStore;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ob-cluster-spend-'));
    store = new RunStore(path.join(dir, 'runs'), { nowMs: () => T0 } as never);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** A run on a cluster in the store: its earlier clusters, then `current`. */
  function runOn(current: RunCluster, earlier: RunCluster[], state: 'running' | 'succeeded') {
    const run = store.create({
      project: 'ddp',
      target: 'cluster',
      remoteDir: (i) => `/workspace/overbrainer/${i}`,
    });
    run.state = state;
    run.cluster = current;
    run.earlierClusters = earlier;
    store.saveRun(run);
    return run.id;
  }

  it('a recovered run that ended: in all over both clusters, each attempt on its line with its bill where read', () => {
    const first = cluster('clu-0', T0, T0 + H / 2, 0.81);
    const second = cluster('clu-1', T0 + H / 2, T0 + H, null);
    const id = runOn(second, [first], 'succeeded');
    const lines = runSpendLines(store, id, null, T0 + 2 * H);
    assert.deepEqual(lines, [
      'Spent: about $1.60 over 4 pods (bill not read yet)',
      'Cluster 1 (clu-0): 2 nodes × $0.80/h, about $0.80; billed $0.81',
      'Cluster 2 (clu-1): 2 nodes × $0.80/h, about $0.80 (bill not read yet)',
    ]);
    // Both bills read: the run's bill beside its estimate.
    const billed = runOn({ ...second, billedUsd: 0.8 }, [first], 'succeeded');
    assert.equal(
      runSpendLines(store, billed, null, T0 + 2 * H)[0],
      'Spent: about $1.60 over 4 pods; billed $1.61',
    );
    // runs show prints them in place of the short spend line.
    const shown = runShowLines(
      {
        run: store.loadRun(id),
        pod: null,
        podProblem: null,
        step: null,
        maxSteps: null,
        lastLoss: null,
        etaMs: null,
        outputPath: null,
      } as never,
      lines,
    );
    assert.ok(shown.includes('  Cluster 1 (clu-0): 2 nodes × $0.80/h, about $0.80; billed $0.81'));
    assert.ok(!shown.some((l) => l.startsWith('  spend:')), shown.join('\n'));
  });

  it('while it runs: so far at the rate of all nodes, at the ETA, the cost cap of the whole cluster; the status bar tooltip says them', () => {
    const id = runOn(cluster('clu-0', T0, null, null), [], 'running');
    const lines = runSpendLines(store, id, null, T0 + H / 4, { etaMs: H / 4 });
    assert.deepEqual(lines, [
      'Spent so far: $0.40 over 2 pods at $1.60/h for all 2 nodes',
      'At the ETA: about $0.80',
      'Cost cap: $1.60 in all (the whole cluster is deleted there; each node holds its share)',
      'Cluster 1 (clu-0): 2 nodes × $0.80/h, $0.40 so far',
    ]);
    // Past the cap's time the ETA is capped.
    assert.equal(
      runSpendLines(store, id, null, T0 + H / 4, { etaMs: 2 * H })[1],
      'At the ETA: about $1.60 (its cost cap ends it first)',
    );
    const tooltip = statusForPod(id, null, T0 + H / 4, H / 4, lines).tooltip;
    assert.match(tooltip, /Spent so far: \$0\.40 over 2 pods at \$1\.60\/h for all 2 nodes/);
    assert.match(tooltip, /Cluster 1 \(clu-0\): 2 nodes/);
  });

  it('a run with neither pod nor cluster has no lines', () => {
    const run = store.create({
      project: 'ddp',
      target: 'cluster',
      remoteDir: (i) => `/workspace/overbrainer/${i}`,
    });
    assert.deepEqual(runSpendLines(store, run.id, null, T0), []);
  });
});
