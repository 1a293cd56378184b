/**
 * A cluster member costs what Runpod bills it (issue 37): from its own createdAt (never before the
 * create was sent) to its own end; found dead, its GPU's rate until the look that found it EXITED,
 * TERMINATED or gone, then its disk's until the cluster's delete (nothing once gone), in the
 * attempt's cost and in spend alike; a record without the disk size or the times keeps the GPU's
 * rate throughout from the create's send (over, never under).
 */
import assert from 'node:assert/strict';
import { clusterCostUsd } from '../../src/core/runs/clusterSpend';
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
    assert.equal(clusterCostUsd(CLUSTER, T0 + 2 * H), Math.ceil((1.2 + diskUsd) * 1e6) / 1e6);
    // Without the disk size (an older record): the GPU's rate throughout, as before.
    const { diskGbPerNode: _, ...older } = CLUSTER;
    assert.equal(clusterCostUsd(older, T0 + 2 * H), 1.6);
  });

  it("counts each member from its own createdAt (never before the create was sent) to its own end (found gone, else the cluster's delete)", () => {
    const own: RunCluster = {
      ...CLUSTER,
      // Member 0 created 30 s after the create was sent, member 1's time before it (Runpod's
      // whole second): counted from the send. Member 1 found gone half an hour in.
      nodes: [
        { ...node(0), createdAt: '2026-12-02T10:00:30Z' },
        {
          ...node(1, new Date(T0 + H / 2).toISOString()),
          createdAt: '2026-12-02T09:59:59Z',
          endedAt: new Date(T0 + H / 2).toISOString(),
        },
      ],
    };
    const spends = clusterSpends('x', own, T0 + 2 * H);
    const first = (0.8 * (H - 30_000)) / H;
    assert.deepEqual(
      spends.map((s) => [s.estimatedUsd, s.createdMs, s.endedMs]),
      [
        [Math.ceil(first * 1e4) / 1e4, T0 + 30_000, T0 + H],
        [0.4, T0, T0 + H / 2],
      ],
    );
    assert.equal(clusterCostUsd(own, T0 + 2 * H), Math.ceil((first + 0.4) * 1e6) / 1e6);
    // A member found gone while its cluster is not yet confirmed deleted: ended, billing no more.
    const live = clusterSpends('x', { ...own, deletedAt: null }, T0 + 2 * H);
    assert.deepEqual(
      live.map((s) => [s.status, s.estimatedUsd]),
      [
        ['live', Math.ceil(((0.8 * (2 * H - 30_000)) / H) * 1e4) / 1e4],
        ['ended', 0.4],
      ],
    );
  });

  it("an attempt's cost is rounded up to the micro-dollar: never under, and within 1 % of a short attempt", () => {
    // 2 members at $0.69/h for 23.5 s: $0.0090083; to $0.0001 it was $0.0091, 1.02 % over.
    const short: RunCluster = {
      ...CLUSTER,
      costPerHourUsd: 0.69,
      deletedAt: new Date(T0 + 23_500).toISOString(),
      nodes: [node(0), node(1)],
    };
    const exact = (2 * 0.69 * 23.5) / 3600;
    const cost = clusterCostUsd(short, T0 + H);
    assert.ok(cost >= exact && cost - exact <= 1e-6, `${cost} against ${exact}`);
    assert.ok(cost - exact <= 0.01 * exact);
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
    const [n0, n1] = CLUSTER.nodes as [RunCluster['nodes'][number], RunCluster['nodes'][number]];
    const times = {
      ...CLUSTER,
      nodes: [
        { ...n0, createdAt: '2026-12-02T10:00:01Z' },
        { ...n1, endedAt: '2026-12-02T10:30:00.000Z' },
      ],
    };
    const timed = encodeRunRecord({ ...record, cluster: times });
    assert.match(timed, /"created_at": "2026-12-02T10:00:01Z"/);
    assert.match(timed, /"ended_at": "2026-12-02T10:30:00.000Z"/);
    assert.deepEqual(decodeRunRecord(timed, 'run.json').cluster, times);
  });
});
