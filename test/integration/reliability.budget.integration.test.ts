/**
 * Figures for spend you can trust (real pods on the emulator, timings production / 60):
 *  - our estimate of every run's spend against the emulator's ledger (what Runpod bills);
 *  - quote accuracy: a run with earlier runs of the same config finishes inside its quoted range;
 *  - a budget held over a scripted day of runs whose client is killed at seeded random points:
 *    overspend within max(1 %, $0.50) plus one watchdog tick of every pod, no pod left billing.
 * Each prints its figures and records them for scripts/reliability.ts.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { train } from '../../src/core/flow';
import { billedMismatch } from '../../src/core/pod/billing';
import { quoteForTarget } from '../../src/core/flow';
import { heldByEarlierRuns } from '../../src/core/pod/quote';
import type { RunpodTargetConfig } from '../../src/core/config';
import {
  type Lab,
  matrixLabs,
  runIdHolder,
  spawnLifecycleChild,
  tomlFor,
} from '../helpers/lifecycle';
import {
  recordFault,
  recordFigure,
  recordResult,
  seededRandom,
  sleep,
  until,
} from '../helpers/reliability';
import { PRICE_USD_PER_HOUR, pricedCatalog } from '../helpers/runSpend';

/** The sections of docs/RELIABILITY.md's figures. */
const ESTIMATES = 'Spend: each run estimated against the ledger, and its quote (issue 16)';
const BUDGET_DAY = 'Spend: a day of runs under a budget, clients killed at random (issue 16)';

/** A GPU at $36/h ($0.01 a second): a pod of seconds costs cents. */
const PER_S = PRICE_USD_PER_HOUR / 3600;

describe('reliability: spend you can trust (figures)', function () {
  this.timeout(900_000);
  const lab = matrixLabs();

  it('estimates every run within 1 % of the ledger, and each run with earlier runs of its config finishes inside its quote', async function () {
    const l: Lab = await lab({
      // Pods of ~15 s. The estimate counts from the pod's createdAt as the API gives it (whole
      // seconds, never before the create was sent) to the delete's answer: over the bill by at
      // most a second and that answer, never under it, however long a loaded machine makes the
      // calls (counted from the create's sending, a slow create once made it +21 %). 1 % of a
      // pod is meaningful once the pod lives 200 s (1 % then covers that 2 s resolution): on
      // these pods the resolution is what is asserted, and never under the ledger.
      steps: 100,
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
        estimate >= ledger.costUsd - 0.00005 && !billedMismatch(estimate, ledger.costUsd, rate);
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

  it('holds a daily budget over a scripted day of runs with the client killed at seeded random points: overspend within max(1 %, $0.50) + one tick per pod, no pod billing', async function () {
    const l: Lab = await lab({
      maxHours: 0.01,
      emulator: { catalog: pricedCatalog() },
    });
    // The gate lets a run start only while what is left covers its worst case (the quote's, from
    // the target's graces and the watchdog's timing: $1.87 here, a 36 s pod plus what its
    // watchdog allows past the deadline), so every quote holds that much back. The budget is
    // that worst case, taken from the rule the gate uses, plus room for the day's first three
    // runs (about $0.60 of pods) and one long followed run (about $0.70): the gate refuses at
    // about the fifth run. Sized from a fixed figure instead, the day ran as many pods as that
    // figure's room allowed (six pods, five minutes, at $4.20 once the worst case shrank).
    const target = l.config.targets.pod as RunpodTargetConfig;
    const catalog = await l.client.listGpuTypes({ count: 1, cloud: 'SECURE' });
    const worstUsd = quoteForTarget(target, catalog, [], l.timing).worstUsd!;
    const ROOM_USD = 0.95;
    const BUDGET = Math.round((worstUsd + ROOM_USD) * 100) / 100;
    const extra = `\n[budget]\nmax_usd_per_day = ${BUDGET}\nfit_runs_to_budget = true\n`;
    const toml = path.join(l.workspace, 'overbrainer.toml');
    const random = seededRandom(16);
    const script: string[] = [];
    let refused = false;
    let killed = 0;
    for (let i = 0; i < 7 && !refused; i++) {
      // The last runs are long (60 s of job, 36 s of max_hours) and followed to the end: the
      // deadline's snapshot ends them, their pod armed with a cost cap of what is left.
      const last = i >= 3;
      const long = last || random() < 0.4;
      const kind = last
        ? 'none'
        : (['none', 'created', 'running'] as const)[Math.floor(random() * 3)]!;
      const delayMs = Math.floor(random() * 3000);
      fs.writeFileSync(
        toml,
        tomlFor({ maxHours: 0.01, steps: long ? 600 : 30, stepSeconds: 0.1, targetExtra: extra }),
      );
      const child = spawnLifecycleChild(l);
      const ended = (): boolean =>
        child.events.some(
          (e) =>
            (e as { type: string }).type === 'done' || (e as { type: string }).type === 'error',
        );
      const podEvent = (kind: string): boolean =>
        child.events.some((e) => e.type === 'pod' && e.status.kind === kind);
      let what: string;
      if (kind === 'none') {
        await until('the run to end', ended, 300_000);
        await child.exited;
        const error = child.events.find((e) => (e as { type: string }).type === 'error') as
          { message: string } | undefined;
        refused =
          error !== undefined && /would pass what is left of the budget/.test(error.message);
        what = refused
          ? 'refused by the budget'
          : error
            ? `failed: ${error.message.slice(0, 80)}`
            : 'ran to its end';
      } else {
        const seen = (): boolean =>
          ended() ||
          (kind === 'created'
            ? podEvent('created')
            : child.events.some((e) => e.type === 'runState' && e.state === 'running'));
        await until(`the run to reach ${kind}`, seen, 300_000);
        if (ended()) {
          await child.exited;
          const error = child.events.find((e) => (e as { type: string }).type === 'error') as
            { message: string } | undefined;
          refused =
            error !== undefined && /would pass what is left of the budget/.test(error.message);
          what = refused ? 'refused by the budget' : 'ended before the kill';
        } else {
          await sleep(delayMs);
          await child.kill();
          killed++;
          recordFault(this, `client killed after ${kind}`);
          what = `client killed ${delayMs} ms after ${kind}`;
        }
      }
      // Whatever happened, the pod's watchdog (or the client) ends the pod: wait for it.
      await until('no pod billing', () => l.billing().length === 0, 300_000);
      script.push(`run ${i + 1} (${long ? 'long' : 'short'} job): ${what}`);
    }
    const ledger = l.emulator.ledger();
    const cost = ledger.totals.costUsd;
    const tickUsd = (l.timing.leaseTickMs / 1000) * PER_S;
    const bound =
      Math.max(0.01 * BUDGET, 0.5) + ledger.totals.podsCreated * Math.max(tickUsd, PER_S);
    const overspend = Math.max(0, cost - BUDGET);
    const total = `budget $${BUDGET.toFixed(2)}/day; billed $${cost.toFixed(4)} over ${ledger.totals.podsCreated} pods (${killed} clients killed); overspend $${overspend.toFixed(4)} (bound $${bound.toFixed(2)}); pods billing: ${ledger.totals.podsBilling}`;
    console.log(`    budget day:\n      ${script.join('\n      ')}\n    ${total}`);
    for (const line of [...script, total]) recordFigure(this, BUDGET_DAY, line);
    assert.ok(refused, `the day ended without a refusal:\n${script.join('\n')}`);
    assert.ok(overspend <= bound, `overspend $${overspend} > bound $${bound}`);
    assert.equal(ledger.totals.podsBilling, 0);
    recordResult(this, { verified: 1, lost: 0 });
  });
});
