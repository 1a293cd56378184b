/**
 * A cluster member found dead costs what Runpod bills a stopped pod (issue 37): its GPU's rate
 * until the look that found it EXITED, TERMINATED or gone, then its disk's until the cluster's
 * delete, in the attempt's cost and in spend alike; a record without the disk size or the time
 * keeps the GPU's rate throughout (over, never under).
 */
import assert from 'node:assert/strict';
import { clusterCostUsd } from '../../src/core/flow/clusterRecover';
import type { RunCluster } from '../../src/core/runs/clusterRecord';
import { clusterSpends, STOPPED_DISK_USD_PER_GB_MONTH } from '../../src/core/runs/clusterSpend';
import { decodeRunRecord, encodeRunRecord, type RunRecord } from '../../src/core/runs/runRecord';

const T0 = Date.parse('2026-12-02T10:00:00Z');
const H = 3_600_000;
const node = (rank: number, gpuStoppedAt?: string) => ({
  rank,
  podId: `pod-${rank}`,
  ip: null,
  state: (gpuStoppedAt ? 'failed' : 'ended') as 'failed' | 'ended',
  deadlineUnixS: null,
  costCapAtUnixS: null,
  message: gpuStoppedAt ? 'its pod pod-1 is EXITED' : null,
  ...(gpuStoppedAt ? { gpuStoppedAt } : {}),
});
const CLUSTER: RunCluster = {
  id: 'clu-1',
  name: 'overbrainer-x-c1',
  gpuTypeId: 'NVIDIA A40',
  gpuCountPerPod: 1,
  costPerHourUsd: 0.8,
  createdAt: new Date(T0).toISOString(),
  deletedAt: new Date(T0 + H).toISOString(),
  nodes: [node(0), node(1, new Date(T0 + H / 2).toISOString())],
  diskGbPerNode: 50,
  billedUsd: null,
  billedCheckedAt: null,
};

describe('a cluster member found dead, in the estimate', () => {
  it('bills its GPU until the look that found it stopped, then its disk until the delete', () => {
    const diskUsd = ((50 * STOPPED_DISK_USD_PER_GB_MONTH) / 720) * 0.5; // half an hour, stopped
    const spends = clusterSpends('x', CLUSTER, T0 + 2 * H);
    assert.deepEqual(
      spends.map((s) => s.estimatedUsd),
      [0.8, Math.ceil((0.4 + diskUsd) * 1e4) / 1e4],
    );
    assert.equal(clusterCostUsd(CLUSTER, T0 + 2 * H), Math.ceil((1.2 + diskUsd) * 1e4) / 1e4);
    // Without the disk size (an older record): the GPU's rate throughout, as before.
    const { diskGbPerNode: _, ...older } = CLUSTER;
    assert.equal(clusterCostUsd(older, T0 + 2 * H), 1.6);
  });

  it('run.json keeps when the member was found stopped and the disk size, and reads them back', () => {
    const record: RunRecord = {
      id: 'x',
      target: 'cluster',
      created: CLUSTER.createdAt,
      remoteDir: '/workspace/overbrainer/x',
      job: null,
      state: 'running',
      message: null,
      cluster: CLUSTER,
    };
    const text = encodeRunRecord(record);
    assert.match(text, /"gpu_stopped_at": "2026-12-02T10:30:00.000Z"/);
    assert.match(text, /"disk_gb_per_node": 50/);
    assert.deepEqual(decodeRunRecord(text, 'run.json').cluster, CLUSTER);
  });
});
