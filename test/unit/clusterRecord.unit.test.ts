/**
 * A run on a cluster in its records (issue 37 step 2): run.json's `cluster` (its ID, name, each
 * node's pod, rank, private address, state and the limits its watchdog holds) written and read
 * back unchanged, a damaged one refused at its place, and what `runs show` and the Runs tree
 * make of it: a line and a row per node, `"nodes"` and `"cluster"` in the JSON.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { runShowJson, runShowLines, type RunView } from '../../src/cli/commands/runsShow';
import { clusterSpendRow } from '../../src/cli/spend';
import type { RunCluster } from '../../src/core/runs/clusterRecord';
import { clusterSpends } from '../../src/core/runs/clusterSpend';
import { podSpends } from '../../src/core/runs/spend';
import { decodeRunRecord, encodeRunRecord, type RunRecord } from '../../src/core/runs/runRecord';
import { presentRunChild } from '../../src/ui/runs/runChildView';
import { readRunChildren } from '../../src/ui/runs/runChildren';
import { readRuns } from '../../src/ui/runs/runsSource';
import { clusterPodSummary } from '../../src/ui/runs/clusterSummary';

/** Up to $0.0001, as a spend figure is shown. */
const upTo4 = (usd: number): number => Math.ceil(Math.round(usd * 1e8) / 1e4) / 1e4;

const CLUSTER: RunCluster = {
  id: 'clu-1',
  name: 'overbrainer-ddp-x-c1',
  gpuTypeId: 'NVIDIA A40',
  gpuCountPerPod: 2,
  costPerHourUsd: 0.8,
  createdAt: '2026-12-02T10:00:05Z',
  deletedAt: null,
  nodes: [
    {
      rank: 0,
      podId: 'pod-a',
      ip: '10.65.0.2',
      state: 'running',
      deadlineUnixS: 1_800_000_000,
      costCapAtUnixS: 1_799_000_000,
      message: null,
    },
    {
      rank: 1,
      podId: 'pod-b',
      ip: '10.65.0.3',
      state: 'failed',
      deadlineUnixS: 1_800_000_000,
      costCapAtUnixS: null,
      message: 'its pod is gone',
    },
  ],
  billedUsd: null,
  billedCheckedAt: null,
};

/** A cluster run's record while it runs, before its cluster fields. */
const RUNNING: Omit<RunRecord, 'cluster'> = {
  id: 'ddp-x',
  target: 'cluster',
  created: '2026-12-02T09:00:00Z',
  remoteDir: '/workspace/overbrainer/ddp-x',
  job: null,
  state: 'running',
  message: null,
};

function record(cluster: RunCluster | null | undefined): RunRecord {
  return {
    ...RUNNING,
    created: '2026-12-02T10:00:00Z',
    ...(cluster === undefined ? {} : { cluster }),
  };
}

describe('a run on a cluster in its records', () => {
  it('run.json keeps the cluster and every node, snake_case, and reads it back unchanged', () => {
    const text = encodeRunRecord(record(CLUSTER));
    const raw = JSON.parse(text) as { cluster: { nodes: Record<string, unknown>[] } };
    assert.deepEqual(raw.cluster.nodes[1], {
      rank: 1,
      pod_id: 'pod-b',
      ip: '10.65.0.3',
      state: 'failed',
      deadline_unix_s: 1_800_000_000,
      cost_cap_at_unix_s: null,
      message: 'its pod is gone',
    });
    assert.deepEqual(decodeRunRecord(text, 'run.json').cluster, CLUSTER);
    // A run on one pod has none: the key is not written.
    assert.ok(!('cluster' in JSON.parse(encodeRunRecord(record(undefined)))));
    assert.equal(
      decodeRunRecord(encodeRunRecord(record(undefined)), 'run.json').cluster,
      undefined,
    );
  });

  it("run.json keeps the members' pinned host key (host_key) for a client that follows the run again; an older record has none", () => {
    const pinned = {
      ...CLUSTER,
      hostKey: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample overbrainer-x',
    };
    const text = encodeRunRecord(record(pinned));
    assert.equal(
      (JSON.parse(text) as { cluster: Record<string, unknown> }).cluster.host_key,
      pinned.hostKey,
    );
    assert.deepEqual(decodeRunRecord(text, 'run.json').cluster, pinned);
    const old = decodeRunRecord(encodeRunRecord(record(CLUSTER)), 'run.json').cluster;
    assert.ok(old && !('hostKey' in old));
  });

  it('refuses a damaged cluster at its place', () => {
    const text = encodeRunRecord(record(CLUSTER)).replace('"state": "failed"', '"state": "lost"');
    assert.throws(
      () => decodeRunRecord(text, 'run.json'),
      (error: unknown) =>
        error instanceof Error &&
        /line \d+, column \d+\): "cluster\.nodes\.1\.state"/.test(error.message),
    );
  });

  it('runs show: the cluster, a line per node, "nodes" and "cluster" in the JSON', () => {
    const view: RunView = {
      run: record(CLUSTER),
      pod: null,
      podProblem: null,
      step: null,
      maxSteps: null,
      lastLoss: null,
      etaMs: null,
      outputPath: null,
    } as unknown as RunView;
    const lines = runShowLines(view);
    const at = lines.findIndex((l) => l.startsWith('  cluster: '));
    assert.ok(at > 0, lines.join('\n'));
    assert.equal(
      lines[at],
      '  cluster: clu-1 (overbrainer-ddp-x-c1), 2 nodes of 2 × NVIDIA A40, $1.60/h for all',
    );
    assert.deepEqual(lines.slice(at + 1, at + 3), [
      '    node 0: pod pod-a (10.65.0.2) running',
      '    node 1: pod pod-b (10.65.0.3) failed: its pod is gone',
    ]);
    const json = runShowJson(view);
    assert.equal(json.nodes, 2);
    assert.equal((json.cluster as { id: string }).id, 'clu-1');
    assert.equal((json.cluster as { nodes: unknown[] }).nodes.length, 2);
    const single = runShowJson({ ...view, run: record(undefined) });
    assert.equal(single.nodes, 1);
    assert.equal(single.cluster, null);
  });

  it('the Runs tree: a row per node under the run, a failed one marked with its reason', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'ob-cluster-tree-'));
    try {
      const runsDir = path.join(root, 'runs');
      mkdirSync(path.join(runsDir, 'ddp-x'), { recursive: true });
      writeFileSync(path.join(runsDir, 'ddp-x', 'run.json'), encodeRunRecord(record(CLUSTER)));
      const [run] = await readRuns([{ dir: runsDir, workspaceName: 'ws' }]);
      assert.ok(run);
      assert.deepEqual(run.cluster, CLUSTER);
      const nodes = (await readRunChildren(run)).filter((c) => c.kind === 'node');
      const views = nodes.map((child) => presentRunChild(child, 1_790_000_000));
      assert.deepEqual(
        views.map((v) => [v.label, v.description, v.iconId]),
        [
          ['node 0 (primary)', 'running · pod pod-a · 10.65.0.2', 'server'],
          ['node 1', 'failed · pod pod-b · 10.65.0.3', 'error'],
        ],
      );
      assert.match(views[1]?.tooltip ?? '', /its pod is gone/);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('the spend of a run on a cluster', () => {
  it('counts every member: N pods at the member rate, each bounded by its own watchdog', () => {
    const cluster: RunCluster = {
      ...CLUSTER,
      createdAt: '2026-12-02T10:00:00Z',
      deletedAt: '2026-12-02T11:00:00Z',
    };
    const spends = clusterSpends('ddp-x', cluster, Date.parse('2026-12-02T12:00:00Z'));
    assert.deepEqual(
      spends.map((s) => [s.podId, s.status, s.estimatedUsd]),
      [
        ['pod-a', 'ended', 0.8],
        ['pod-b', 'ended', 0.8],
      ],
    );
    const created = Date.parse('2026-12-02T10:00:00Z') / 1000;
    const live = clusterSpends(
      'ddp-x',
      {
        ...cluster,
        deletedAt: null,
        nodes: cluster.nodes.map((n) => ({
          ...n,
          costCapAtUnixS: created + 1800,
          deadlineUnixS: created + 3600,
        })),
      },
      Date.parse('2026-12-02T10:15:00Z'),
    );
    assert.deepEqual(
      live.map((s) => [s.status, s.estimatedUsd, s.boundUsd]),
      [
        ['live', 0.2, 0.4],
        ['live', 0.2, 0.4],
      ],
    );
    // Through the store's list, as `spend` and the budget read it: a run without pod.json.
    const store = {
      list: () => ({
        runs: [
          {
            id: 'ddp-x',
            state: 'succeeded' as const,
            created: cluster.createdAt,
            budgetCapUsd: null,
            cluster,
          },
        ],
      }),
      loadPod: () => null,
    };
    const all = podSpends(store, Date.parse('2026-12-02T12:00:00Z'));
    assert.equal(all.length, 2);
    assert.equal(
      all.reduce((sum, s) => sum + (s.estimatedUsd ?? 0), 0),
      1.6,
    );
  });

  it('a cluster replaced after a node died: run.json keeps it in earlier_clusters, and the spend counts its members too', () => {
    const dead: RunCluster = {
      ...CLUSTER,
      id: 'clu-0',
      createdAt: '2026-12-02T09:00:00.250Z',
      deletedAt: '2026-12-02T09:30:00.250Z',
    };
    const record: RunRecord = {
      ...RUNNING,
      earlierClusters: [dead],
      cluster: null,
    };
    const back = decodeRunRecord(encodeRunRecord(record), 'run.json');
    assert.deepEqual(back.earlierClusters, [dead]);
    assert.match(encodeRunRecord(record), /"earlier_clusters"/);
    // Between the two clusters (the new one not created yet), and once it is: every member.
    const nowMs = Date.parse('2026-12-02T10:30:00Z');
    const store = (r: RunRecord) => ({ list: () => ({ runs: [r] }), loadPod: () => null });
    const between = podSpends(store(record), nowMs);
    assert.deepEqual(
      between.map((p) => [p.podId, p.estimatedUsd]),
      [
        ['pod-a', 0.4],
        ['pod-b', 0.4],
      ],
    );
    const both = podSpends(
      store({ ...record, cluster: { ...CLUSTER, createdAt: '2026-12-02T09:30:00Z' } }),
      nowMs,
    );
    assert.equal(both.length, 4);
    assert.equal(Math.round(both.reduce((s, p) => s + (p.estimatedUsd ?? 0), 0) * 1e4) / 1e4, 2.4);
  });

  it("a member's refused cluster delete is kept in run.json (member_delete_refused) and read back", () => {
    const record: RunRecord = {
      ...RUNNING,
      cluster: { ...CLUSTER, memberDeleteRefused: 'node 1: refused http_403' },
    };
    const text = encodeRunRecord(record);
    assert.match(text, /"member_delete_refused": "node 1: refused http_403"/);
    assert.equal(
      decodeRunRecord(text, 'run.json').cluster?.memberDeleteRefused,
      'node 1: refused http_403',
    );
    // None seen: the field is not written.
    assert.doesNotMatch(encodeRunRecord({ ...record, cluster: CLUSTER }), /member_delete_refused/);
  });

  it('the run page and the Runs tree: the cluster stands for its pod, at N × the member rate', () => {
    const live = clusterPodSummary({ ...CLUSTER, createdAt: '2026-12-02T10:00:00.500Z' });
    assert.equal(live.podId, 'clu-1');
    assert.equal(live.state, 'running');
    assert.equal(live.costPerHourUsd, 1.6, '2 nodes × $0.80/h');
    assert.equal(live.gpuType, '2 nodes × 2 × NVIDIA A40');
    assert.equal(live.createdUnixS, Date.parse('2026-12-02T10:00:00Z') / 1000);
    assert.equal(live.deadlineUnixS, 1_800_000_000);
    assert.equal(live.estimatedSpendUsd, null);
    const ended = clusterPodSummary({
      ...CLUSTER,
      createdAt: '2026-12-02T10:00:00Z',
      deletedAt: '2026-12-02T10:30:00Z',
    });
    assert.equal(ended.state, 'deleted');
    assert.equal(ended.estimatedSpendUsd, 0.8, 'half an hour of 2 nodes at $0.80/h');
    // Each member as Runpod bills it (spend's rule): node 1 created 10 s late and found gone at
    // 10:10, node 0 until the delete. The run page's figure is spend's, not N × rate × the span.
    const [node0, node1] = CLUSTER.nodes;
    const members = clusterPodSummary({
      ...CLUSTER,
      createdAt: '2026-12-02T10:00:00Z',
      deletedAt: '2026-12-02T10:30:00Z',
      nodes: [
        { ...node0!, createdAt: '2026-12-02T10:00:00Z' },
        { ...node1!, createdAt: '2026-12-02T10:00:10Z', endedAt: '2026-12-02T10:10:00Z' },
      ],
    });
    assert.equal(members.estimatedSpendUsd, upTo4(0.4 + (0.8 * 590) / 3600));
  });

  it("the cluster's bill (GET /billing/clusters) in equal shares that sum to it; spend's row beside the estimate", () => {
    const cluster: RunCluster = {
      ...CLUSTER,
      nodes: [...CLUSTER.nodes, { ...CLUSTER.nodes[0]!, rank: 2, podId: 'pod-c' }],
      createdAt: '2026-12-02T10:00:00Z',
      deletedAt: '2026-12-02T11:00:00Z',
      billedUsd: 2.3999,
      billedCheckedAt: '2026-12-02T11:05:00Z',
    };
    const text = encodeRunRecord(record(cluster));
    const raw = JSON.parse(text) as { cluster: Record<string, unknown> };
    assert.equal(raw.cluster.billed_usd, 2.3999);
    assert.equal(raw.cluster.billed_checked_at, '2026-12-02T11:05:00Z');
    assert.deepEqual(decodeRunRecord(text, 'run.json').cluster, cluster);
    const spends = clusterSpends('ddp-x', cluster, Date.parse('2026-12-02T12:00:00Z'));
    assert.deepEqual(
      spends.map((s) => s.billedUsd),
      [0.7999, 0.8, 0.8],
    );
    const row = clusterSpendRow('ddp-x', cluster.createdAt, 'succeeded', [cluster], Date.now());
    assert.deepEqual(
      [row.podId, row.podState, row.pods, row.estimatedUsd, row.billedUsd, row.differenceUsd],
      ['clu-1', 'deleted', 3, 2.4, 2.3999, 0.0001],
    );
    assert.equal(row.flagged, false);
    // Not read yet: no bill, the estimate alone; a record written before bills has none.
    const unread = clusterSpendRow('ddp-x', cluster.createdAt, 'succeeded', [CLUSTER], Date.now());
    assert.equal(unread.billedUsd, null);
    const old = JSON.parse(encodeRunRecord(record(CLUSTER))) as {
      cluster: Record<string, unknown>;
    };
    delete old.cluster.billed_usd;
    delete old.cluster.billed_checked_at;
    assert.equal(decodeRunRecord(JSON.stringify(old), 'run.json').cluster?.billedUsd, null);
  });

  it("spend's row of a recovered cluster run counts every cluster: the replaced one's members and bill too", () => {
    const ended = { deletedAt: '2026-12-02T11:00:00Z', billedCheckedAt: '2026-12-02T11:05:00Z' };
    const dead: RunCluster = {
      ...CLUSTER,
      ...ended,
      id: 'clu-0',
      createdAt: '2026-12-02T10:00:00Z',
      billedUsd: 1.6,
    };
    const last: RunCluster = {
      ...CLUSTER,
      id: 'clu-1',
      createdAt: '2026-12-02T11:00:00Z',
      deletedAt: '2026-12-02T11:30:00Z',
      billedUsd: null,
      billedCheckedAt: null,
    };
    const nowMs = Date.parse('2026-12-02T12:00:00Z');
    const unread = clusterSpendRow('ddp-x', CLUSTER.createdAt, 'succeeded', [dead, last], nowMs);
    assert.deepEqual(
      [unread.podId, unread.pods, unread.estimatedUsd, unread.billedUsd],
      ['clu-1', 4, 2.4, null],
      'an hour and half an hour of 2 nodes at $0.80/h; no bill until each cluster was read',
    );
    const read = clusterSpendRow(
      'ddp-x',
      CLUSTER.createdAt,
      'succeeded',
      [dead, { ...last, billedUsd: 0.8, billedCheckedAt: '2026-12-02T11:35:00Z' }],
      nowMs,
    );
    assert.deepEqual([read.billedUsd, read.differenceUsd, read.flagged], [2.4, 0, false]);
  });
});
