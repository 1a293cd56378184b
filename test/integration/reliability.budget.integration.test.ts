/**
 * Figures for spend you can trust (real pods on the emulator, timings production / 60):
 *  - our estimate of every run's spend against the emulator's ledger (what Runpod bills);
 *  - quote accuracy: a run with earlier runs of the same config finishes inside its quoted range.
 * It prints its figures and records them for scripts/reliability.ts. A budget held over a
 * scripted day of runs: reliability.budgetDay (a file of its own, so two workers run the two).
 */
import assert from 'node:assert/strict';
import { train } from '../../src/core/flow';
import { billedMismatch } from '../../src/core/pod/billing';
import { estimateResolutionUsd } from '../../src/core/runs/spend';
import { quoteForTarget } from '../../src/core/flow';
import { heldByEarlierRuns } from '../../src/core/pod/quote';
import type { RunpodTargetConfig } from '../../src/core/config';
import { type Lab, matrixLabs, runIdHolder } from '../helpers/lifecycle';
import { recordFigure, recordResult } from '../helpers/reliability';
import { pricedCatalog } from '../helpers/runSpend';

/** The section of docs/RELIABILITY.md's figures. */
const ESTIMATES = 'Spend: each run estimated against the ledger, and its quote (issue 16)';

describe('reliability: spend you can trust (figures)', function () {
  this.timeout(900_000);
  const lab = matrixLabs();

  it('estimates every run within 1 % of the ledger, and each run with earlier runs of its config finishes inside its quote', async function () {
    const l: Lab = await lab({
      // Pods of ~31 s: a job of 30 s, so that the seconds a loaded machine adds to a pod's
      // boot and retrieval (a CI saw a pod of 20.6 s after one of 14 s) stay inside the quote's
      // ±20 % and its three seconds of slack, as a real run's hours make them nothing. The
      // estimate counts from the pod's createdAt as the API gives it (whole seconds, never
      // before the create was sent) to the delete's answer: over the bill by at most a second
      // and that answer, never under it, however long a loaded machine makes the calls (counted
      // from the create's sending, a slow create once made it +21 %). 1 % of a pod is
      // meaningful once the pod lives 200 s (1 % then covers that 2 s resolution): on these
      // pods the resolution is what is asserted, and never under the ledger.
      steps: 300,
      stepSeconds: 0.1,
      emulator: { catalog: pricedCatalog() },
    });
    const target = l.config.targets.pod as RunpodTargetConfig;
    const catalog = await l.client.listGpuTypes({ count: 1, cloud: 'SECURE' });
    const rows: string[] = [];
    let inside = 0;
    let quoted = 0;
    let agreed = 0;
    const RUNS = 4;
    for (let i = 0; i < RUNS; i++) {
      const q = quoteForTarget(target, catalog, heldByEarlierRuns(l.store, target.name), l.timing);
      const run = runIdHolder();
      const result = await l.track(train(l.deps, l.config, l.workspace, { onRun: run.onRun }));
      assert.equal(result.run.state, 'succeeded', result.summary);
      const pod = l.podJson(run.id!);
      const ledger = l.ledgerOf(String(pod.pod_id));
      const estimate = pod.estimated_spend as number;
      const rate = pod.cost_per_hour as number;
      // Never under the bill (but for its rounding to $0.0001); within 1 % of it, or within
      // the estimate's resolution where 1 % of the pod is less (billedMismatch).
      const ok =
        estimate >= ledger.costUsd - 0.00005 &&
        !billedMismatch(estimate, ledger.costUsd, estimateResolutionUsd(rate));
      if (ok) agreed++;
      let range = '-';
      if (q.expected?.basis === 'history') {
        quoted++;
        // These runs last seconds, not hours: a loaded machine moves one by a few seconds of
        // boot and retrieval, which at this catalog's rate is several percent. The range is judged
        // to three seconds of the pod's time (a real run's hours make that nothing).
        const slackUsd = Math.max(0.005, (rate * 3) / 3600);
        const hit =
          ledger.costUsd >= q.expected.lowUsd - slackUsd &&
          ledger.costUsd <= q.expected.highUsd + slackUsd;
        if (hit) inside++;
        range = `$${q.expected.lowUsd.toFixed(2)}–$${q.expected.highUsd.toFixed(2)}${hit ? '' : ' MISSED'}`;
      }
      rows.push(
        `run ${i + 1}: estimate $${estimate.toFixed(4)}, ledger $${ledger.costUsd.toFixed(4)}, ${(((estimate - ledger.costUsd) / ledger.costUsd) * 100).toFixed(2)} %; quote ${range}`,
      );
    }
    rows.push(
      `estimates never under the ledger and within 1 % of it (or the estimate's resolution): ${agreed}/${RUNS}; finished inside the quote: ${inside}/${quoted}`,
    );
    console.log(`    spend figures:\n      ${rows.join('\n      ')}`);
    for (const row of rows) recordFigure(this, ESTIMATES, row);
    assert.equal(agreed, RUNS, rows.join('\n'));
    assert.equal(inside, quoted, rows.join('\n'));
    recordResult(this, { verified: RUNS, lost: 0 });
  });
});
