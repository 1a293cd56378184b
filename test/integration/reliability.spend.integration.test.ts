/**
 * Spend reconciled with Runpod's billing: after a run's pod is deleted, the client reads what
 * Runpod billed it (`GET /v2/billing/pods`, served by the emulator from its ledger) and records it
 * in pod.json beside its own estimate; the two agree within 1 %. Real pods; timings production / 60.
 */
import assert from 'node:assert/strict';
import { billedMismatch } from '../../src/core/pod/billing';
import { estimateResolutionUsd } from '../../src/core/runs/spend';
import { train } from '../../src/core/flow';
import { Lab, matrixLabs } from '../helpers/lifecycle';
import { recordResult } from '../helpers/reliability';

describe('reliability: spend reconciled with the bill', function () {
  this.timeout(300_000);
  const lab = matrixLabs();

  it("a normal run records Runpod's billed amount in pod.json, within 1 % (or the estimate's resolution) of the estimate and equal to the ledger", async function () {
    const l: Lab = await lab({ steps: 40, stepSeconds: 0.1 });
    let runId: string | null = null;
    const result = await l.track(
      train(l.deps, l.config, l.workspace, { onRun: (r) => (runId = r.id) }),
    );
    assert.equal(result.run.state, 'succeeded', result.summary);
    assert.ok(runId);
    const pod = l.podJson(runId);
    assert.equal(pod.state, 'deleted');
    const ledger = l.emulator.ledger().pods.find((p) => p.id === pod.pod_id);
    assert.ok(ledger, 'the ledger has the pod');
    assert.equal(typeof pod.billed_usd, 'number', 'billed_usd recorded');
    assert.equal(typeof pod.billed_checked_at, 'string', 'billed_checked_at recorded');
    const billed = pod.billed_usd as number;
    const estimated = pod.estimated_spend as number;
    assert.ok(
      Math.abs(billed - ledger.costUsd) < 0.0001,
      `billed ${billed} ≠ ledger ${ledger.costUsd}`,
    );
    // Within 1 %, or within the estimate's resolution (whole seconds, $0.0001) for a short pod.
    assert.equal(
      billedMismatch(estimated, billed, estimateResolutionUsd(pod.cost_per_hour as number)),
      false,
      `estimate ${estimated} vs billed ${billed}`,
    );
    recordResult(this, { verified: 1, lost: 0 });
  });
});
