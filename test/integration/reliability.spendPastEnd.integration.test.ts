/**
 * Spend of pods that outlive their job or their deadline (issue 33, items 2 and 3), against the
 * emulator's ledger (what Runpod bills) with real pods; timings production / 60, a GPU at $36/h:
 *  - a pod its watchdog deleted past its deadline is estimated to the confirmed deletion, within
 *    1 % of the ledger and never under it;
 *  - a kept pod's time after its job is counted by `overbrainer spend` and the budget.
 * A run recovered on a new pod under a budget cap: reliability.runSpend.
 */
import assert from 'node:assert/strict';
import { attach, train } from '../../src/core/flow';
import { projectSpend } from '../../src/core/runs/spend';
import {
  Lab,
  matrixLabs,
  runCli,
  spawnLifecycleChild,
  type LabOptions,
} from '../helpers/lifecycle';
import { recordFault, recordFigure, recordResult } from '../helpers/reliability';
import {
  assertWithin1Percent,
  pricedCatalog,
  RUN_SPEND_FIGURES as FIGURES,
  spendRowOf,
} from '../helpers/runSpend';

describe('reliability: spend of pods that outlive their job or their deadline', function () {
  this.timeout(900_000);
  const lab = matrixLabs();

  const start = (options: LabOptions): Promise<Lab> =>
    lab({ emulator: { catalog: pricedCatalog() }, ...options });

  it("a pod its watchdog deleted past its deadline: `overbrainer spend` estimates it to the deletion's confirmation, within 1 % of the ledger and never under it", async function () {
    // max_hours 0.06 (216 s); the job needs five minutes. The client follows past the deadline
    // (its lease holds it off), is killed, and the watchdog deletes the pod once the lease is
    // stale and the deadline's snapshot ended the job. The pod lives about 4.5 minutes: the API
    // gives its times to the second (createdAt, an answer's Date), and the first look after the
    // delete comes a loaded machine's second or so late, so a shorter pod cannot show 1 %.
    const l = await start({ maxHours: 0.06, steps: 3000, stepSeconds: 0.1 });
    const child = spawnLifecycleChild(l);
    await l.waitFor(
      'the child running the job',
      () => child.events.some((e) => e.type === 'runState' && e.state === 'running'),
      180_000,
    );
    const runId = l.onlyRunId();
    const podId = String(l.podJson(runId).pod_id);
    const deadlineMs = (l.podJson(runId).deadline_unix as number) * 1000;
    await l.waitFor('the deadline passed', () => Date.now() > deadlineMs + 1000, 300_000);
    await child.kill();
    recordFault(this, 'client killed past the deadline');
    await l.waitFor('the watchdog deleting the pod', () => !l.ledgerOf(podId).billing, 180_000);
    const sawDeleteMs = Date.now();
    assert.equal(l.ledgerOf(podId).deletedBy, 'pod');
    await l.track(attach(l.deps, l.config, runId)).catch(() => undefined);
    const pod = l.podJson(runId);
    assert.equal(pod.state, 'deleted');
    const ledger = l.ledgerOf(podId).costUsd;
    const row = await spendRowOf(l, runId);
    recordFigure(
      this,
      FIGURES,
      `watchdog-deleted past the deadline: spend estimate $${(row.estimated_usd ?? 0).toFixed(4)}, ledger $${ledger.toFixed(4)}`,
    );
    // How far the estimate starts before the ledger's creation and ends after its deletion, when
    // this test saw the deletion and when the first look after it reached the API (nobody looks
    // before attach).
    const entry = l.ledgerOf(podId);
    const deletedAtMs = entry.deletedAtMs ?? 0;
    const look = l.emulator
      .requests()
      .find(
        (r) => r.method === 'GET' && r.path.endsWith(`/pods/${podId}`) && r.atMs >= deletedAtMs,
      );
    const span = `starts ${((entry.createdAtMs - (pod.billed_from_ms as number)) / 1000).toFixed(2)} s early, ends ${(((pod.deleted_ms as number) - deletedAtMs) / 1000).toFixed(2)} s late; the test saw the delete ${((sawDeleteMs - deletedAtMs) / 1000).toFixed(2)} s after it, the first look reached the API ${look ? `${((look.atMs - deletedAtMs) / 1000).toFixed(2)} s` : 'never'} after the delete`;
    assertWithin1Percent(row.estimated_usd, ledger, `spend --json (${span})`);
    recordResult(this, { verified: 0, lost: 0 });
  });

  it('a kept pod after its job: `overbrainer spend` and the budget count its time so far, as the ledger bills it', async function () {
    const l = await start({ steps: 10, stepSeconds: 0.05, emulator: {} });
    let runId: string | null = null;
    const result = await l.track(
      train(l.deps, l.config, l.workspace, { keepPod: true, onRun: (r) => (runId = r.id) }),
    );
    assert.equal(result.run.state, 'succeeded', result.summary);
    const podId = String(l.podJson(runId!).pod_id);
    assert.equal(l.ledgerOf(podId).billing, true, 'the kept pod bills');
    const before = l.ledgerOf(podId).costUsd;
    const row = await spendRowOf(l, runId!);
    const after = l.ledgerOf(podId).costUsd;
    assert.ok(row.estimated_usd !== null, 'spend shows no estimate for the kept pod');
    // $0.69/h: a second of the pod is $0.0002.
    assert.ok(
      row.estimated_usd >= before - 0.0001 && row.estimated_usd <= after + 0.0002,
      `estimate $${row.estimated_usd} outside the ledger's $${before}–$${after}`,
    );
    const spent = projectSpend(l.store, null, Date.now()).day.spentUsd;
    assert.ok(spent >= before - 0.0001, `the budget counts $${spent}, the ledger $${before}`);
    const removed = await runCli(l, ['pod', 'rm', runId!]);
    assert.equal(removed.code, 0, removed.stderr);
    recordResult(this, { verified: 1, lost: 0 });
  });
});
