/**
 * A node of a 2-node cluster dies mid-run (issue 37): the client sees it, deletes the whole
 * cluster (Runpod cannot replace one member) and goes on on a NEW cluster from the newest
 * checkpoint streamed home from rank 0 and verified, within the run's cost cap and
 * max_recoveries, as one pod's recovery does. A real torchrun job across two emulated members each
 * time, of the step trainer (clusterStepTrainer.py: examples/ddp's arguments and files, its ranks
 * in lockstep, no torch import); the emulator's member-death fault (the pod EXITED under its job).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { settleGonePods } from '../../src/core/flow';
import { budgetGate } from '../../src/core/flow/budget';
import type { Lab } from '../helpers/lifecycle';
import {
  ddpLab,
  ledgerUsdOf,
  loggedSteps,
  recordOf,
  trainUntilCheckpointHome,
} from '../helpers/clusterRun';
import { assertWithin1Percent, ledgerSum, spendRowOf } from '../helpers/runSpend';

/**
 * Long enough for each attempt to bill over a minute: the estimate counts from before the create
 * is sent to the delete's answer, about a second more than the ledger's members in all on this
 * machine, which is under 1 % of two members' minute each.
 */
const STEPS = 400;
/** The first cluster's member dies once a checkpoint at least this far is home. */
const KILL_AFTER_STEP = 200;

describe('a cluster node dies mid-run: recovered on a new cluster', function () {
  this.timeout(900_000); // two clusters, four torchrun agents, on a shared 2-core machine
  let lab: Lab | null = null;
  afterEach(async () => {
    await lab?.close();
    lab = null;
  });

  it('a member dies (EXITED): the whole cluster deleted, the run completes on a new cluster from its newest verified checkpoint; 0 leaked; each attempt within 1 % of the ledger, never under; spend and the budget gate count both clusters from Runpod bills', async () => {
    const { l, config } = await ddpLab({
      steps: STEPS,
      stepSeconds: 0.3,
      saveEvery: 20,
      trainer: 'steps',
    });
    lab = l;
    const { training, runId, step, members } = await trainUntilCheckpointHome(
      l,
      config,
      KILL_AFTER_STEP,
    );
    await l.emulator.faults.podDies(members[1]!);
    const result = await training;
    const record = recordOf(l, runId);
    assert.equal(result.run.state, 'succeeded', `${result.summary}\n${JSON.stringify(record)}`);

    // Two attempts: the first ended by its node's death, the second resumed from a checkpoint
    // streamed home (at least the one seen home before the kill), each with its cost.
    const attempts = record.attempts ?? [];
    assert.equal(attempts.length, 2, JSON.stringify(attempts));
    const [first, second] = attempts as [(typeof attempts)[0], (typeof attempts)[0]];
    assert.equal(first.reason, 'node_failed');
    assert.equal(second.reason, null);
    assert.ok((second.resumedFromStep ?? 0) >= step, JSON.stringify(second));
    assert.equal(second.resumedFromCheckpoint, `checkpoints/checkpoint-${second.resumedFromStep}`);
    const earlier = record.earlierClusters ?? [];
    assert.equal(earlier.length, 1);
    assert.ok(record.cluster);
    assert.equal(first.podId, earlier[0]!.id);
    assert.equal(second.podId, record.cluster.id);
    assert.notEqual(earlier[0]!.id, record.cluster.id);
    assert.equal(earlier[0]!.nodes[1]?.state, 'failed');
    assert.match(earlier[0]!.nodes[1]?.message ?? '', /its pod \S+ is EXITED/);
    assert.ok(earlier[0]!.nodes[1]?.gpuStoppedAt, 'when the look found it EXITED, recorded');

    // The job went on from that checkpoint on the new cluster: 2 processes, to the last step.
    const runDir = l.runDir(runId);
    const resultJson = JSON.parse(
      fs.readFileSync(path.join(runDir, 'output', 'result.json'), 'utf8'),
    );
    assert.equal(resultJson.started_at, second.resumedFromStep);
    assert.equal(resultJson.world_size, 2);
    assert.equal(resultJson.steps, STEPS);
    assert.deepEqual(
      loggedSteps(l, runId),
      Array.from({ length: STEPS }, (_, i) => i + 1),
      'one curve, the prefix up to the checkpoint then the new cluster',
    );

    // Nothing left: no cluster, every member of both deleted.
    assert.deepEqual(l.emulator.clusters(), []);
    const pods = l.emulator.ledger().pods.filter((p) => p.runId === runId);
    assert.equal(pods.length, 4);
    assert.ok(
      pods.every((p) => !p.billing),
      JSON.stringify(pods),
    );
    // Each attempt's estimate: within 1 % of what the ledger billed its cluster, never under.
    for (const [i, cluster] of [earlier[0]!, record.cluster].entries()) {
      const billed = ledgerUsdOf(l, cluster);
      const estimated = attempts[i]!.costUsd;
      assert.ok(estimated !== null);
      const ids = new Set(cluster.nodes.map((n) => n.podId));
      const entries = l.emulator.ledger().pods.filter((p) => ids.has(p.id));
      const line = `attempt ${i + 1}: estimated $${estimated} against the ledger's $${billed.toFixed(6)} (${cluster.createdAt} to ${cluster.deletedAt}; ledger ${entries.map((p) => `${new Date(p.createdAtMs).toISOString()}..${new Date(p.deletedAtMs ?? 0).toISOString()} gpu ${p.gpuBilledSeconds}s disk ${p.diskBilledSeconds}s $${p.gpuUsdPerHour}/h`).join(', ')})`;
      // The rule every spend test holds (the product's own: never under the ledger but for the
      // $0.0001 rounding; within 1 %, or where 1 % is less, each member's resolution: a member
      // that died stops its GPU's bill before the look that finds it, and 4 decimals round up
      // by up to $0.0001; CI saw +1.02 % on a $0.03 attempt at $0.69/h: $0.0003 over, $0.00097 allowed).
      const usdPerHour = entries[0]?.gpuUsdPerHour ?? null;
      assert.ok(usdPerHour !== null, line);
      // A member that died stopped its GPU's bill at its death (disk only after): the estimate
      // counts its GPU until the look that found it EXITED and its disk after, as Runpod bills.
      assertWithin1Percent(estimated, billed, line, cluster.nodes.length, usdPerHour);
    }

    // The budget gate, as train runs it (settle the run's bills, then the gate): every member
    // of both clusters counted from Runpod's cluster bills (GET /billing/clusters).
    const ledgerTotal = ledgerSum(pods);
    const usdPerHour = pods[0]!.gpuUsdPerHour;
    const target = config.targets.cluster;
    assert.ok(target?.kind === 'runpod');
    const budget = {
      maxUsdPerDay: 1000,
      maxUsdPerMonth: null,
      fitRunsToBudget: false,
      keptPodReminderHours: 12,
    };
    await settleGonePods(l.deps, config);
    const gate = await budgetGate(
      l.deps.client!,
      l.deps.store,
      { ...config, budget },
      target,
      false,
      Date.now(),
      l.deps.timing,
    );
    assert.ok(gate);
    const gated = gate.spend.pods.filter((p) => p.runId === runId);
    assert.deepEqual(
      gated.map((p) => p.podId).sort(),
      pods.map((p) => p.id).sort(),
      'the gate counts every member of every cluster',
    );
    assert.ok(
      gated.every((p) => p.billedUsd !== null),
      `every cluster's bill read before the gate: ${JSON.stringify(gated)}`,
    );
    const gatedBilled = gated.reduce((sum, p) => sum + p.billedUsd!, 0);
    assertWithin1Percent(gatedBilled, ledgerTotal, 'the gate: the run billed', 4, usdPerHour);
    assertWithin1Percent(
      gate.spend.day.spentUsd,
      ledgerTotal,
      'the gate: spent today',
      4,
      usdPerHour,
    );
    const saved = recordOf(l, runId);
    assert.ok(saved.earlierClusters?.[0]?.billedUsd !== null, "the replaced cluster's bill saved");
    assert.ok(saved.cluster?.billedUsd !== null, "the last cluster's bill saved");

    // spend: the run's row counts both clusters, all 4 members, billed and estimated.
    const row = (await spendRowOf(l, runId)) as Awaited<ReturnType<typeof spendRowOf>> & {
      pods: number;
    };
    assert.equal(row.pods, 4, JSON.stringify(row));
    assert.equal(row.pod_id, saved.cluster?.id);
    assertWithin1Percent(row.billed_usd, ledgerTotal, 'spend: billed', 4, usdPerHour);
    assertWithin1Percent(row.estimated_usd, ledgerTotal, 'spend: estimated', 4, usdPerHour);
  });
});
