/**
 * A cluster run whose client died (SIGKILLed while the job runs). Cancel: the whole cluster
 * deleted and confirmed, the run cancelled. Attach, when one of its members' host stopped
 * answering while no client followed (issue 37: "Hung node … cluster deleted within 2 minutes of production time", on
 * attach as on the first follow). The client that trained a 2-node torchrun run is SIGKILLed
 * while the job runs, member 1's host is frozen (the API still lists it RUNNING), and attach
 * names the node after the same missed looks as the follow, never waiting out the readyTimeoutMs
 * a member's first boot gets (set here far past the test's bound), and deletes the whole
 * cluster: with `max_recoveries = 0` the run fails naming the node, nothing billing. The job is
 * the step trainer (clusterStepTrainer.py: examples/ddp's arguments and files under the real
 * torchrun, its ranks in lockstep, no torch import).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { attach, cancel } from '../../src/core/flow';
import { spawnLifecycleChild, type Lab } from '../helpers/lifecycle';
import { ddpLab, recordOf } from '../helpers/clusterRun';
import { waitFor } from '../emulator/testing';

/** A job far longer than the test: only the node's death ends it. */
const JOB = {
  steps: 100_000,
  stepSeconds: 0.3,
  saveEvery: 1_000,
  targetExtra: 'max_recoveries = 0\n',
  trainer: 'steps',
} as const;
/** A first boot's limit, which a silent member on attach must not wait out. */
const READY_TIMEOUT_MS = 30 * 60_000;
/**
 * The bound on the attach, wall time: the missed looks at this scale take seconds (3 SSH
 * connects of 5 s); a loaded machine gets many times that, the old wait (readyTimeoutMs) never.
 */
const ATTACH_BOUND_MS = 150_000;

describe('a cluster run its client no longer follows', function () {
  this.timeout(600_000); // a torchrun agent per node on a shared 2-core machine
  let lab: Lab | null = null;
  afterEach(async () => {
    await lab?.close();
    lab = null;
  });

  /** A lab whose client (a child process) trained until rank 0 logged a step, then died. */
  async function orphaned() {
    const { l, config } = await ddpLab(JOB, { readyTimeoutMs: READY_TIMEOUT_MS });
    lab = l;
    const child = spawnLifecycleChild(l);
    let runId = '';
    let members: string[];
    try {
      // Rank 0's first step on its pod: the job runs on both nodes.
      members = await waitFor(
        () => `rank 0's first step (client: ${child.stderr()})`,
        () => {
          const runs = path.join(l.workspace, 'runs');
          runId = fs.existsSync(runs) ? (fs.readdirSync(runs)[0] ?? '') : '';
          const ids = l.emulator.clusters()[0]?.memberIds;
          const rank0 = ids?.[0] === undefined ? undefined : l.emulator.pod(ids[0]);
          if (runId === '' || !ids || !rank0) return undefined;
          const file = path.join(rank0.dirs.workspace, 'overbrainer', runId, 'metrics.jsonl');
          return fs.existsSync(file) && /"event": ?"log"/.test(fs.readFileSync(file, 'utf8'))
            ? ids
            : undefined;
        },
        400_000,
        200,
      );
    } finally {
      await child.kill();
    }
    assert.equal(recordOf(l, runId).state, 'running');
    return { l, config, runId, members, clusterId: l.emulator.clusters()[0]!.id };
  }

  /** Both members in the ledger, neither billing; the emulator holds no cluster. */
  function assertNothingBilling(l: Lab, runId: string) {
    assert.deepEqual(l.emulator.clusters(), []);
    const pods = l.emulator.ledger().pods.filter((p) => p.runId === runId);
    assert.equal(pods.length, 2, JSON.stringify(pods));
    assert.ok(
      pods.every((p) => !p.billing),
      JSON.stringify(pods),
    );
  }

  it("a member's host stopped answering while no client followed: attach names it after 3 missed looks, not readyTimeoutMs, and deletes the whole cluster; nothing billing", async () => {
    const { l, config, runId, members, clusterId } = await orphaned();
    await l.emulator.faults.hostLost(members[1]!);
    assert.equal(l.emulator.pod(members[1]!)?.status, 'RUNNING', 'the API lists the lost host');

    const attached = l.track(attach(l.deps, config, runId));
    attached.catch(() => undefined);
    // The cluster's end is the bound's state: the whole cluster deleted in the emulator.
    await waitFor(
      () =>
        `cluster ${clusterId} deleted by the attach (${JSON.stringify(recordOf(l, runId).cluster?.nodes)})`,
      () => (l.emulator.clusters().length === 0 ? true : undefined),
      ATTACH_BOUND_MS,
      200,
    );
    const result = await attached;
    const record = recordOf(l, runId);
    assert.equal(result.run.state, 'failed', `${result.summary}\n${JSON.stringify(record)}`);
    assert.match(result.run.message ?? '', /^node 1 failed the run: .*its host stopped answering/);
    assert.match(result.run.message ?? '', /not recovered: max_recoveries = 0/);
    assert.equal(record.cluster?.id, clusterId);
    assert.equal(record.cluster?.nodes[1]?.state, 'failed');
    assert.match(record.cluster?.nodes[1]?.message ?? '', /its host stopped answering/);
    assert.notEqual(record.cluster?.deletedAt, null, 'the cluster confirmed gone');
    assertNothingBilling(l, runId);
  });

  it('cancel of a cluster run no client follows: the whole cluster deleted and confirmed, the run cancelled; nothing billing', async () => {
    const { l, config, runId, clusterId } = await orphaned();
    const result = await cancel(l.deps, config, runId);
    const record = recordOf(l, runId);
    assert.equal(result.run.state, 'cancelled', `${result.summary}\n${JSON.stringify(record)}`);
    assert.equal(record.state, 'cancelled');
    assert.equal(record.message, 'cancelled: the whole cluster was deleted');
    assert.equal(record.cluster?.id, clusterId);
    assert.notEqual(record.cluster?.deletedAt, null, 'the cluster confirmed gone');
    assert.ok(
      (record.attempts ?? []).every((a) => a.endedAt !== null),
      JSON.stringify(record.attempts),
    );
    assertNothingBilling(l, runId);
    // A second cancel: the run already ended.
    await assert.rejects(cancel(l.deps, config, runId), /already ended: cancelled/);
  });
});
