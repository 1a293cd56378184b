import * as assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { RunCluster } from '../../src/core/runs/clusterRecord';
import { runSpendLines } from '../../src/core/flow/spend';
import { RunStore } from '../../src/core/runs/store';
import { PRODUCTION_TIMING } from '../../src/core/timing';
import {
  etaFromNow,
  followedDeadline,
  LAST_STRETCH_MS,
  statusForPod,
  statusView,
} from '../../src/ui/runs/statusModel';

const MIN = 60_000;
const HOUR = 60 * MIN;

describe('status bar countdown (model)', function () {
  it('shows the time left and the ETA as the product text', function () {
    const view = statusView({
      runId: 'tiny_1',
      untilDeadlineMs: 4 * HOUR + 12 * MIN + 30_000,
      etaMs: 3 * HOUR + 5 * MIN,
    });
    assert.equal(view.text, '$(watch) 4h 12m left · ETA 3h 05m');
    assert.equal(view.background, 'none');
    assert.match(view.tooltip, /tiny_1/);
  });

  it('warns when the ETA passes the deadline', function () {
    const view = statusView({ runId: 'r', untilDeadlineMs: 1 * HOUR, etaMs: 2 * HOUR });
    assert.equal(view.text, '$(watch) 1h 00m left · ETA 2h 00m');
    assert.equal(view.background, 'warning');
    assert.match(view.tooltip, /after the deadline/);
  });

  it('turns to the error background in the last 15 minutes, even with an ETA in time', function () {
    assert.equal(
      statusView({ runId: 'r', untilDeadlineMs: LAST_STRETCH_MS, etaMs: MIN }).background,
      'error',
    );
    assert.equal(
      statusView({ runId: 'r', untilDeadlineMs: LAST_STRETCH_MS + 1000, etaMs: MIN }).background,
      'none',
    );
    assert.equal(
      statusView({ runId: 'r', untilDeadlineMs: 0, etaMs: null }).text,
      '$(watch) 0s left',
    );
  });

  it('has no deadline for a kept pod and no ETA while the pace is unknown', function () {
    const kept = statusView({ runId: 'r', untilDeadlineMs: null, etaMs: 5 * MIN });
    assert.equal(kept.text, '$(watch) following · ETA 5m 00s');
    assert.equal(kept.background, 'none');
    assert.equal(
      statusView({ runId: 'r', untilDeadlineMs: 20 * MIN, etaMs: null }).text,
      '$(watch) 20m 00s left',
    );
  });

  it('shows seconds in the last hour, so the countdown moves every second', function () {
    const at = (ms: number): string =>
      statusView({ runId: 'r', untilDeadlineMs: ms, etaMs: null }).text;
    assert.equal(at(59 * MIN + 58_900), '$(watch) 59m 58s left');
    assert.equal(at(59 * MIN + 57_100), '$(watch) 59m 57s left');
    assert.equal(at(HOUR + 30_000), '$(watch) 1h 00m left');
    assert.equal(at(61_000), '$(watch) 1m 01s left');
    assert.equal(at(59_999), '$(watch) 59s left');
  });

  it('counts the ETA from now, not from the latest metric', function () {
    assert.equal(etaFromNow(null, 1000), null);
    assert.equal(etaFromNow(10_000, 4_000), 6_000);
    assert.equal(etaFromNow(10_000, 60_000), 0);
    assert.equal(etaFromNow(10_000, -5), 10_000);
  });

  it('counts down to the deadline the watchdog enforces (create + max_hours), not the client guard', function () {
    const nowMs = Date.UTC(2026, 11, 3, 12, 0, 0);
    const pod = {
      keep: false,
      deadlineUnixS: nowMs / 1000 + 3600,
      deadline: '2026-12-03T13:00:00Z',
    };
    // The run view says "1h until the deadline" for this pod: the status bar must agree.
    const view = statusForPod('r', pod, nowMs, null);
    assert.equal(view.text, '$(watch) 1h 00m left');
    assert.match(
      view.tooltip,
      /1h 00m until the watchdog's deadline \(max_hours, 2026-12-03T13:00:00Z\)/,
    );
    assert.match(view.tooltip, /At 0 the pod's watchdog deletes the pod/);
    assert.doesNotMatch(view.tooltip, /Keep Pod/);
    assert.ok(PRODUCTION_TIMING.deadlineMarginMs > 0, 'the guard margin this must not add');
    const late = statusForPod('r', pod, nowMs, 2 * HOUR);
    assert.equal(late.background, 'warning');
    assert.doesNotMatch(late.tooltip, /Keep Pod/);
    assert.equal(statusForPod('r', { ...pod, keep: true }, nowMs, null).text, '$(watch) following');
  });
});

/**
 * A run on a cluster (issue 37) has no pod.json: the status bar counts down to the earliest
 * deadline of its nodes (each node's watchdog deletes the whole cluster there) and shows the
 * spend of all N nodes, as it does for a pod; read from a real run store as the status bar does.
 */
describe('status bar countdown of a run on a cluster', function () {
  const T0 = Date.UTC(2026, 11, 7, 10, 0, 0);
  let dir = '';
  let store: RunStore;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ob-cluster-status-'));
    store = new RunStore(path.join(dir, 'runs'), { nowMs: () => T0 } as never);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  function clusterRun(deadlinesS: (number | null)[], deletedAt: string | null = null): string {
    const cluster: RunCluster = {
      id: 'clu-0',
      name: 'overbrainer-ddp-x-clu-0',
      gpuTypeId: 'NVIDIA A40',
      gpuCountPerPod: 1,
      costPerHourUsd: 0.8,
      createdAt: new Date(T0).toISOString(),
      deletedAt,
      nodes: deadlinesS.map((deadlineUnixS, rank) => ({
        rank,
        podId: `clu-0-pod-${rank}`,
        ip: `10.65.0.${rank + 2}`,
        state: 'running' as const,
        deadlineUnixS,
        costCapAtUnixS: null,
        message: null,
      })),
      billedUsd: null,
      billedCheckedAt: null,
    };
    const run = store.create({
      project: 'ddp',
      target: 'cluster',
      remoteDir: (i) => `/workspace/overbrainer/${i}`,
    });
    run.state = 'running';
    run.cluster = cluster;
    store.saveRun(run);
    return run.id;
  }

  it('counts down to the earliest deadline of its nodes, says the whole cluster ends there, and shows the spend of all nodes', function () {
    const s = T0 / 1000;
    // Node 1 was armed a second later than node 0 (each member is made ready in turn): the
    // earliest is the one the cluster ends at. A node not armed yet has no say.
    const id = clusterRun([s + 2 * 3600, s + 2 * 3600 + 1, null]);
    const now = T0 + 30 * MIN;
    const limit = followedDeadline(store, id);
    assert.equal(limit.nodes, 3);
    const lines = runSpendLines(store, id, null, now, { etaMs: 30 * MIN });
    const view = statusForPod(id, limit.deadline, now, 30 * MIN, lines, limit.nodes);
    assert.equal(view.text, '$(watch) 1h 30m left · ETA 30m 00s');
    assert.equal(view.background, 'none');
    assert.match(view.tooltip, /on a cluster of 3 nodes/);
    assert.match(
      view.tooltip,
      /1h 30m until the watchdog's deadline \(max_hours, 2026-12-07T12:00:00Z\)/,
    );
    assert.match(view.tooltip, /At 0 the watchdogs of its 3 nodes delete the whole cluster/);
    assert.doesNotMatch(view.tooltip, /deletes the pod/);
    // Spend at N × the member rate: 3 × $0.80/h for half an hour so far, an hour at the ETA.
    assert.match(view.tooltip, /Spent so far: \$1\.20 over 3 pods at \$2\.40\/h for all 3 nodes/);
    assert.match(view.tooltip, /At the ETA: about \$2\.40/);
    // In its last 15 minutes: the error background, as for a pod.
    const late = statusForPod(id, limit.deadline, T0 + 2 * HOUR - 10 * MIN, null, [], 3);
    assert.equal(late.text, '$(watch) 10m 00s left');
    assert.equal(late.background, 'error');
  });

  it('has no countdown once its cluster is deleted, nor before any node is armed', function () {
    const s = T0 / 1000;
    const gone = clusterRun([s + 3600, s + 3600], new Date(T0 + MIN).toISOString());
    const limit = followedDeadline(store, gone);
    assert.equal(
      statusForPod(gone, limit.deadline, T0, null, [], limit.nodes).text,
      '$(watch) following',
    );
    const unarmed = followedDeadline(store, clusterRun([null, null]));
    assert.equal(statusForPod('r', unarmed.deadline, T0, null).text, '$(watch) following');
  });

  it("a run on one pod counts down to its pod.json's deadline; a run with neither yet has none", function () {
    const pod = { keep: false, deadlineUnixS: T0 / 1000 + 3600, deadline: '2026-12-07T11:00:00Z' };
    const onePod = {
      loadPod: () => pod,
      loadRun: (): never => assert.fail('a run on a pod needs no run.json here'),
    };
    assert.deepEqual(followedDeadline(onePod, 'r'), { deadline: pod });
    const run = store.create({
      project: 'tiny',
      target: 'pod',
      remoteDir: (i) => `/workspace/overbrainer/${i}`,
    });
    store.saveRun(run);
    assert.deepEqual(followedDeadline(store, run.id), { deadline: null });
  });
});
