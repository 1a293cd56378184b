/**
 * A run on THREE nodes (issue 37's figure "2-node and 3-node runs of examples/ddp succeed with
 * verified output"; two nodes are cluster.train's): the product's train on a 3-node target, one
 * Instant Cluster of three real emulated members, examples/ddp under torchrun on each (gloo on
 * CPU over the cluster network), rank 0's results home verified, then the whole cluster deleted
 * and confirmed; every member in the ledger, none billing, spend within 1 % of it.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { train } from '../../src/core/flow';
import type { Lab } from '../helpers/lifecycle';
import { ddpLab, loggedSteps, recordOf } from '../helpers/clusterRun';
import { assertWithin1Percent, ledgerSum, spendRowOf } from '../helpers/runSpend';

const STEPS = 8;

describe('train on a 3-node cluster, launched by torchrun', function () {
  this.timeout(600_000); // three torch imports on a shared 2-core machine
  let lab: Lab | null = null;
  afterEach(async () => {
    await lab?.close();
    lab = null;
  });

  it('runs examples/ddp on 3 nodes to verified results, then deletes the whole cluster; nothing billing', async () => {
    const { l, config } = await ddpLab({
      steps: STEPS,
      stepSeconds: 0,
      saveEvery: 100,
      nodes: 3,
      globalBatch: 48,
    });
    lab = l;
    let runId = '';
    const result = await l.track(
      train(l.deps, config, l.workspace, { onRun: (r) => (runId = r.id) }),
    );
    const record = recordOf(l, runId);
    const logs = [0, 1, 2].map((rank) => {
      const file = path.join(l.runDir(runId), 'nodes', String(rank), 'job.log');
      return fs.existsSync(file) ? fs.readFileSync(file, 'utf8').slice(0, 2500) : '(none)';
    });
    assert.equal(result.run.state, 'succeeded', `${result.summary}\n${logs.join('\n---\n')}`);
    assert.equal(record.cluster?.nodes.length, 3);
    assert.notEqual(record.cluster?.deletedAt, null, 'the cluster confirmed gone');
    const out = JSON.parse(
      fs.readFileSync(path.join(l.runDir(runId), 'output', 'result.json'), 'utf8'),
    ) as { world_size: number; steps: number };
    assert.deepEqual([out.world_size, out.steps], [3, STEPS]);
    assert.deepEqual(
      loggedSteps(l, runId),
      Array.from({ length: STEPS }, (_, i) => i + 1),
    );
    assert.deepEqual(l.emulator.clusters(), []);
    const pods = l.emulator.ledger().pods.filter((p) => p.runId === runId);
    assert.equal(pods.length, 3, JSON.stringify(pods));
    assert.ok(
      pods.every((p) => !p.billing),
      JSON.stringify(pods),
    );
    const row = await spendRowOf(l, runId);
    const usdPerHour = pods[0]!.gpuUsdPerHour;
    assertWithin1Percent(row.estimated_usd, ledgerSum(pods), 'spend: estimated', 3, usdPerHour);
  });
});
