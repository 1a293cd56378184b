/**
 * Attach to a run on a cluster (issue 37): the client that trains a 2-node torchrun run is
 * SIGKILLed mid-job, and a client that starts again (the CLI's attach, VS Code's
 * re-follow after a reload: both call the flow's attach) follows the cluster run as train did:
 * every member connected again with the host key pinned in run.json, rank 0 followed to verified
 * results, the cluster deleted, nothing billing; a node that died while no client followed is
 * recovered on a new cluster from the newest verified checkpoint. The job is the step trainer
 * (clusterStepTrainer.py: examples/ddp's arguments and files under the real torchrun, its ranks in
 * lockstep, no torch import); the training itself is cluster.train's.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { attach, train } from '../../src/core/flow';
import { spawnLifecycleChild, type Lab } from '../helpers/lifecycle';
import { checkpointHome, ddpLab, loggedSteps, recordOf } from '../helpers/clusterRun';
import { waitFor } from '../emulator/testing';

const STEPS = 60;
const JOB = { steps: STEPS, stepSeconds: 0.3, saveEvery: 10, trainer: 'steps' } as const;

describe('attach to a cluster run whose client died', function () {
  this.timeout(900_000); // a torchrun agent per node per cluster on a shared 2-core machine
  let lab: Lab | null = null;
  afterEach(async () => {
    await lab?.close();
    lab = null;
  });

  /** A lab whose client (a child process) trained until a checkpoint was home, then died. */
  async function orphaned() {
    const { l, config } = await ddpLab(JOB);
    lab = l;
    const child = spawnLifecycleChild(l);
    let runId = '';
    try {
      await waitFor(
        () => `a checkpoint home (client: ${child.stderr()})`,
        () => {
          const runs = path.join(l.workspace, 'runs');
          runId = fs.existsSync(runs) ? (fs.readdirSync(runs)[0] ?? '') : '';
          return runId !== '' && (checkpointHome(l, runId) ?? 0) >= 10 ? true : undefined;
        },
        400_000,
        200,
      );
    } finally {
      await child.kill();
    }
    const cluster = l.emulator.clusters()[0];
    assert.ok(cluster?.memberIds.length === 2, JSON.stringify(l.emulator.clusters()));
    assert.equal(recordOf(l, runId).state, 'running');
    assert.match(recordOf(l, runId).cluster?.hostKey ?? '', /^ssh-ed25519 /);
    return { l, config, runId, clusterId: cluster.id, members: cluster.memberIds };
  }

  function assertNothingBilling(l: Lab, runId: string, pods: number) {
    assert.deepEqual(l.emulator.clusters(), []);
    const entries = l.emulator.ledger().pods.filter((p) => p.runId === runId);
    assert.equal(entries.length, pods, JSON.stringify(entries));
    assert.ok(
      entries.every((p) => !p.billing),
      JSON.stringify(entries),
    );
  }

  it('a follow aborted once the job runs (a VS Code window closing, Ctrl-C) stops following only: the cluster trains on, and attach brings the run to verified results', async () => {
    const { l, config } = await ddpLab(JOB);
    lab = l;
    const closing = new AbortController();
    let runId = '';
    const flow = l.track(
      train(l.deps, config, l.workspace, {
        signal: closing.signal,
        onRun: (run) => (runId = run.id),
      }),
    );
    await waitFor(
      'a checkpoint home',
      () => (runId !== '' && (checkpointHome(l, runId) ?? 0) >= 10 ? true : undefined),
      400_000,
      200,
    );
    closing.abort(Object.assign(new Error('VS Code window closing'), { name: 'AbortError' }));
    const stopped = await flow;
    const record = recordOf(l, runId);
    assert.equal(record.state, 'running', `${stopped.summary}\n${JSON.stringify(record)}`);
    assert.equal(record.cluster?.deletedAt, null, 'the cluster was not deleted');
    assert.match(stopped.summary, /attach/, stopped.summary);
    const cluster = l.emulator.clusters()[0];
    assert.ok(cluster?.memberIds.length === 2, JSON.stringify(l.emulator.clusters()));

    const result = await attach(l.deps, config, runId);
    assert.equal(result.run.state, 'succeeded', result.summary);
    assert.equal(recordOf(l, runId).cluster?.id, cluster.id, 'the same cluster, followed again');
    const out = JSON.parse(
      fs.readFileSync(path.join(l.runDir(runId), 'output', 'result.json'), 'utf8'),
    ) as { world_size: number; steps: number };
    assert.deepEqual([out.world_size, out.steps], [2, STEPS]);
    assertNothingBilling(l, runId, 2);
  });

  it('attach follows the cluster run to verified results, then deletes the whole cluster; one curve, nothing billing', async () => {
    const { l, config, runId, clusterId } = await orphaned();
    const result = await attach(l.deps, config, runId);
    const record = recordOf(l, runId);
    assert.equal(result.run.state, 'succeeded', `${result.summary}\n${JSON.stringify(record)}`);
    assert.equal(record.cluster?.id, clusterId, 'the same cluster, followed again');
    assert.notEqual(record.cluster?.deletedAt, null);
    const out = JSON.parse(
      fs.readFileSync(path.join(l.runDir(runId), 'output', 'result.json'), 'utf8'),
    ) as { world_size: number; steps: number };
    assert.deepEqual([out.world_size, out.steps], [2, STEPS]);
    assert.deepEqual(
      loggedSteps(l, runId),
      Array.from({ length: STEPS }, (_, i) => i + 1),
    );
    assertNothingBilling(l, runId, 2);
  });

  it('a node died while no client followed: attach finds it, deletes the whole cluster and completes the run on a new cluster; nothing billing', async () => {
    const { l, config, runId, clusterId, members } = await orphaned();
    await l.emulator.faults.podDies(members[1]!);
    const result = await attach(l.deps, config, runId);
    const record = recordOf(l, runId);
    assert.equal(result.run.state, 'succeeded', `${result.summary}\n${JSON.stringify(record)}`);
    assert.deepEqual(
      (record.attempts ?? []).map((a) => a.reason),
      ['node_failed', null],
    );
    assert.equal(record.earlierClusters?.[0]?.id, clusterId);
    assert.equal(record.earlierClusters?.[0]?.nodes[1]?.state, 'failed');
    assert.notEqual(record.cluster?.id, clusterId);
    assert.deepEqual(
      loggedSteps(l, runId),
      Array.from({ length: STEPS }, (_, i) => i + 1),
    );
    assertNothingBilling(l, runId, 4);
  });
});
