/**
 * `overbrainer train --dry-run` and `overbrainer spend` as a user runs them: a child process with a cleared environment against the
 * Runpod emulator (real pods). A finished run's pod.json whose bill was never read gets it read
 * (`GET /v2/billing/pods`) and saved; `--json` lists estimate, bill and difference per run.
 * A dry run prints the quote and the plan and creates nothing (no run directory, pod or secret).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { cliSuite } from '../helpers/cliSuite';
import { tinyToml } from '../helpers/tinyWorkspace';

describe('overbrainer spend and train --dry-run against the Runpod emulator', function () {
  this.timeout(150_000);
  // One workspace: the last dry run quotes from the run the spend test trained.
  const suite = cliSuite(
    'cli-spend-it-',
    () => tinyToml('python3 train.py --steps 20 --step-seconds 0.05'),
    { sharedWorkspace: true },
  );
  const { cli, runsDir } = suite;

  it('train --dry-run prints the plan and the quote without earlier runs, and creates nothing', async () => {
    const before = suite.emulator.requests().length;
    const ran = await cli(['train', '--dry-run']);
    assert.equal(ran.code, 0, ran.stderr);
    const lines = ran.stdout.trimEnd().split('\n');
    assert.deepEqual(lines, [
      'dry run: target pod; nothing is created',
      'GPU types, in the order tried (1 GPU):',
      '  1. NVIDIA GeForce RTX 4090  $0.69/h  stock HIGH',
      'Data centers: any',
      'Volume: none; container disk 50 GB',
      'Rate: $0.69/h on NVIDIA GeForce RTX 4090 (tried first)',
      'Expected: up to $0.69 (no earlier run of this config: up to max_hours)',
      // At $0.69/h: 1 h, then (timing / 8) the 10 min retrieve grace (longer than the lease's
      // 112.5 s + a tick of 8 s + the snapshot wait's 113 s), a tick and 90 s of delete calls:
      // 4298 s, $0.8238, up to the cent.
      "Worst case: $0.83 (if every client dies: what the pod's watchdog allows, deadline snapshot and graces included)",
    ]);
    assert.ok(!fs.existsSync(runsDir()), 'a run directory was created');
    assert.equal(suite.emulator.ledger().pods.length, 0, 'a pod was created');
    const calls = suite.emulator.requests().slice(before);
    assert.ok(calls.length > 0);
    assert.deepEqual(
      calls.filter((c) => c.method !== 'GET').map((c) => `${c.method} ${c.path}`),
      [],
      'only reads',
    );
  });

  it('spend --json reads a missing bill, saves it in pod.json and lists estimate, bill and difference', async () => {
    const trained = await cli(['train']);
    assert.equal(trained.code, 0, trained.stderr);
    const runId = suite.onlyRun();
    const podFile = path.join(runsDir(), runId, 'pod.json');
    const pod = JSON.parse(fs.readFileSync(podFile, 'utf8')) as Record<string, unknown>;
    const ledger = suite.ledgerOf(String(pod.pod_id));
    // A record written before the bill was read (an older version, or the API down then).
    delete pod.billed_usd;
    delete pod.billed_checked_at;
    fs.writeFileSync(podFile, JSON.stringify(pod, null, 2));

    const ran = await cli(['spend', '--json']);
    assert.equal(ran.code, 0, ran.stderr);
    assert.ok(
      !ran.stdout.includes(suite.emulator.apiKey) && !ran.stderr.includes(suite.emulator.apiKey),
    );
    const listed = JSON.parse(ran.stdout) as {
      runs: Record<string, unknown>[];
      totals: Record<string, unknown>;
    };
    assert.equal(listed.runs.length, 1);
    const row = listed.runs[0] ?? {};
    assert.deepEqual(Object.keys(row).sort(), [
      'billed_checked_at',
      'billed_usd',
      'created',
      'difference_usd',
      'estimated_usd',
      'flagged',
      'pod_id',
      'pod_state',
      'pods',
      'run_id',
      'state',
    ]);
    assert.equal(row.run_id, runId);
    assert.equal(row.pod_id, pod.pod_id);
    assert.equal(row.state, 'succeeded');
    assert.equal(row.pods, 1);
    assert.equal(row.estimated_usd, pod.estimated_spend);
    assert.ok(Math.abs((row.billed_usd as number) - ledger.costUsd) < 0.0001);
    assert.equal(
      row.difference_usd,
      Math.round(((row.estimated_usd as number) - (row.billed_usd as number)) * 10_000) / 10_000,
    );
    assert.equal(row.flagged, false);
    assert.equal(listed.totals.billed_usd, row.billed_usd);
    const saved = JSON.parse(fs.readFileSync(podFile, 'utf8')) as Record<string, unknown>;
    assert.equal(saved.billed_usd, row.billed_usd, 'the bill was saved in pod.json');
    assert.equal(typeof saved.billed_checked_at, 'string');

    const none = await cli(['spend', '--json', '--since', '2999-01-01']);
    assert.deepEqual((JSON.parse(none.stdout) as { runs: unknown[] }).runs, []);
    const table = await cli(['spend']);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /^RUN\s+POD\s+ESTIMATED\s+BILLED\s+DIFFERENCE/);
    assert.match(table.stdout, /total: estimated \$\d+\.\d{4}, billed \$\d+\.\d{4}/);
  });

  it('train --dry-run after a run quotes from it: ±20 % of its duration', async () => {
    const ran = await cli(['train', '--dry-run']);
    assert.equal(ran.code, 0, ran.stderr);
    assert.match(
      ran.stdout,
      /^Expected: \$\d+\.\d\d–\$\d+\.\d\d \(from 1 earlier run of this config\)$/m,
    );
    assert.equal(fs.readdirSync(runsDir()).length, 1, 'no other run directory');
  });
});
