/**
 * The GPUs of a followed run, against the emulator's pods and their nvidia-smi stand-in (the
 * emulator's pods have no GPU: test/emulator/gpus.ts answers the product's query with the
 * figures set here). The pod's watcher samples them on the metrics stream it already speaks on;
 * the samples land in the run's records (`.pod/gpu.json`, `.pod/gpu.jsonl`), `runs show` prints
 * them, and an idle GPU or a card four times too large is said once per run with the rate it
 * wastes. Real sshd, bootstrap and watchdog; a gated job (it ends when the test lets it).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { GPU_SUMMARY_FILE, readGpuSamples, readGpuSummary } from '../../src/core/flow/records';
import type { GpuSetting } from '../emulator/gpus';
import { gatedCommand, openGate } from '../helpers/gatedJob';
import { runCli, type Lab } from '../helpers/lifecycle';
import { lifecycleSuite } from '../helpers/lifecycleSuite';
import { until } from '../helpers/reliability';

/** Samples every 200 ms; an idle GPU named after 2 s of them. */
const TIMING = { gpuSampleMs: 200, gpuIdleWindowMs: 2_000 };

function gpuWarnings(lab: Lab): { code: string; message: string }[] {
  return lab.events
    .map((e) => e.event)
    .filter((e) => e.type === 'warning' && e.code.startsWith('gpu_'))
    .map((e) => e as { code: string; message: string });
}

function samples(lab: Lab, runId: string | null): number {
  return runId === null ? 0 : (readGpuSummary(lab.runDir(runId))?.samples ?? 0);
}

describe('GPU samples while following (emulator pods with the nvidia-smi stand-in)', function () {
  this.timeout(180_000);
  const suite = lifecycleSuite();

  /**
   * Trains a gated job with the pod's GPUs set to `setting`; `during` runs once `ready` holds
   * (samples came), then the job is let end and the run ends. Returns the run's ID.
   */
  async function trainWith(
    lab: Lab,
    setting: GpuSetting,
    ready: (runId: string) => boolean,
  ): Promise<string> {
    lab.emulator.setGpus(setting);
    let runId: string | null = null;
    const outcome = lab.trainOutcome((id) => (runId = id));
    await until(`GPU samples of the run (${setting})`, () => runId !== null && ready(runId));
    const id = runId!;
    openGate(lab.emulator, String(lab.podJson(id).pod_id), id);
    const done = await outcome;
    assert.equal(done.error, null, String(done.error));
    assert.equal(lab.runJson(id).state, 'succeeded');
    return id;
  }

  it('an idle GPU is named once, with what it wastes; the samples are in the records and runs show', async function () {
    const lab = await suite.lab({ command: gatedCommand(), timing: TIMING });
    let firstWarningAt = 0;
    const id = await trainWith(lab, 'idle', (runId) => {
      if (gpuWarnings(lab).length === 0) return false;
      firstWarningAt ||= samples(lab, runId);
      // Samples go on after the warning: it must not come again.
      return samples(lab, runId) >= firstWarningAt + 5;
    });
    const warnings = gpuWarnings(lab);
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.equal(warnings[0]!.code, 'gpu_idle');
    const rate = Number(lab.podJson(id).cost_per_hour);
    assert.ok(rate > 0, `the pod's rate: ${rate}`);
    assert.match(
      warnings[0]!.message,
      /^the GPU is idle while the pod bills: is the job waiting on data\? \(under 5 % for 2 s: /,
    );
    assert.ok(
      warnings[0]!.message.includes(
        `$${rate.toFixed(2)}/h of the pod's $${rate.toFixed(2)}/h wasted`,
      ),
      warnings[0]!.message,
    );

    const summary = readGpuSummary(lab.runDir(id))!;
    assert.deepEqual(
      summary.findings.map((f) => [f.code, f.wastedUsdPerHour]),
      [['gpu_idle', rate]],
    );
    const last = summary.last!.gpus;
    assert.equal(last.length, 1);
    assert.equal(last[0]!.name, 'NVIDIA GeForce RTX 4090');
    assert.equal(last[0]!.utilizationPct, 0);
    assert.equal(last[0]!.memoryTotalMiB, 24 * 1024);
    const history = readGpuSamples(lab.runDir(id));
    assert.equal(history.length, summary.samples);
    // The history is local only: never uploaded, never in the results.
    assert.ok(fs.existsSync(path.join(lab.runDir(id), GPU_SUMMARY_FILE)));

    const shown = await runCli(lab, ['runs', 'show', id]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /\n {2}gpu: {5}sampled \S+ \(\d+ samples while followed\)\n/);
    assert.match(
      shown.stdout,
      /\n {4}gpu 0 \(NVIDIA GeForce RTX 4090\): 0 % · 14\.9 of 24\.0 GiB · 34 °C · 63 W\n/,
    );
    assert.ok(
      shown.stdout.includes(`  warning: ${warnings[0]!.message}`),
      `runs show names it:\n${shown.stdout}`,
    );
    const json = JSON.parse((await runCli(lab, ['runs', 'show', id, '--json'])).stdout) as {
      gpu: {
        gpus: { utilization_pct: number }[];
        findings: { code: string; wasted_usd_per_hour: number }[];
      };
    };
    assert.equal(json.gpu.gpus[0]!.utilization_pct, 0);
    assert.deepEqual(
      json.gpu.findings.map((f) => [f.code, f.wasted_usd_per_hour]),
      [['gpu_idle', rate]],
    );
    suite.assertNothingBills(lab);
  });

  it('a busy GPU, sampled well past the window, is named by nothing', async function () {
    const lab = await suite.lab({ command: gatedCommand(), timing: TIMING });
    // 15 samples 200 ms apart: 2.8 s of a busy GPU, past the 2 s window.
    const id = await trainWith(lab, 'busy', (runId) => samples(lab, runId) >= 15);
    assert.deepEqual(gpuWarnings(lab), []);
    const summary = readGpuSummary(lab.runDir(id))!;
    assert.deepEqual(summary.findings, []);
    assert.equal(summary.last!.gpus[0]!.utilizationPct, 97);
    const shown = await runCli(lab, ['runs', 'show', id]);
    assert.match(shown.stdout, /gpu 0 \(NVIDIA GeForce RTX 4090\): 97 % · 18\.7 of 24\.0 GiB/);
    assert.doesNotMatch(shown.stdout, /warning:/);
  });

  it('a job using under a quarter of the card is named once, with the share of the rate its unused memory costs', async function () {
    const lab = await suite.lab({ command: gatedCommand(), timing: TIMING });
    let firstWarningAt = 0;
    const id = await trainWith(lab, 'lowMemory', (runId) => {
      if (gpuWarnings(lab).length === 0) return false;
      firstWarningAt ||= samples(lab, runId);
      return samples(lab, runId) >= firstWarningAt + 5;
    });
    const warnings = gpuWarnings(lab);
    assert.deepEqual(
      warnings.map((w) => w.code),
      ['gpu_memory'],
    );
    const rate = Number(lab.podJson(id).cost_per_hour);
    const wasted = rate * (1 - Math.round(0.09 * 24 * 1024) / (24 * 1024));
    assert.match(
      warnings[0]!.message,
      /^the job uses at most 2\.2 GiB of the GPU's 24\.0 GiB \(under a quarter\) while the pod bills: a GPU type with less memory would do/,
    );
    assert.ok(
      warnings[0]!.message.includes(`$${wasted.toFixed(2)}/h of the pod's`),
      warnings[0]!.message,
    );
    const shown = await runCli(lab, ['runs', 'show', id]);
    assert.ok(shown.stdout.includes(`  warning: ${warnings[0]!.message}`), shown.stdout);
  });
});
