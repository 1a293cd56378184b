import * as assert from 'node:assert/strict';
import type { FrameLocator } from 'playwright-core';
import { writeGpuSummary } from '../../src/core/runs/gpuRecord';
import { eventually, runPage, UI_TIMEOUT_MS } from './harness';
import { writeFinishedRun } from './runFixtures';
import { pickFromCommand, type E2eWindow } from './window';

/**
 * The run page's chart as people read it elsewhere, in the real VS Code: the loss smoothed (an
 * EMA with a slider, as TensorBoard's and W&B's) with the raw line faint behind it, a log scale
 * for the loss, x by step or by wall time; the choice remembered for the workspace (a reload of
 * the window brings the panel back with it). And the GPUs' figures of the run beside the loss,
 * from its records. A finished run written into the workspace: no pod is needed. In a window of
 * their own before (./views.e2e.test.ts): they begin with every editor of the journeys before
 * them closed, so that the run's panel is the one a reload restores in view.
 */
const RUN = 'tiny_20261130-090000';
const STEPS = 120;
const RELOAD_TIMEOUT_MS = 180_000;

function writeRun(ws: string): void {
  const dir = writeFinishedRun(ws, {
    id: RUN,
    created: '2026-12-02T09:00:00Z',
    remoteDir: `/workspace/overbrainer/${RUN}`,
    steps: STEPS,
    // A noisy, falling loss, a step every 30 s of the trainer's clock.
    startS: 1_764_666_000,
    stepSeconds: 30,
    loss: (step) => 2 / (1 + step / 20) + (step % 3 === 0 ? 0.4 : 0) + (step % 7 === 0 ? -0.3 : 0),
    learningRate: () => 2e-4,
  });
  writeGpuSummary(dir, {
    last: {
      timeMs: Date.parse('2026-12-02T10:00:00Z'),
      gpus: [
        {
          index: 0,
          name: 'NVIDIA GeForce RTX 4090',
          utilizationPct: 0,
          memoryUsedMiB: 15_237,
          memoryTotalMiB: 24_564,
          temperatureC: 34,
          powerW: 63,
          powerLimitW: 450,
        },
      ],
    },
    samples: 360,
    findings: [
      {
        code: 'gpu_idle',
        message:
          "the GPU is idle while the pod bills: is the job waiting on data? (under 5 % for 10 min: $0.69/h of the pod's $0.69/h wasted)",
        wastedUsdPerHour: 0.69,
        timeMs: Date.parse('2026-12-02T09:40:00Z'),
      },
    ],
  });
}

interface ChartState {
  points: string;
  smoothing: string;
  logLoss: string;
  x: string;
  legend: string;
  axes: string;
}

/** The chart's state as the page marks it on its container, and its legend's labels. */
async function chartState(page: FrameLocator): Promise<ChartState> {
  const chart = page.locator('#chart');
  const attr = async (name: string): Promise<string> =>
    (await chart.getAttribute(name, { timeout: 5_000 })) ?? '';
  return {
    points: await attr('data-points'),
    smoothing: await attr('data-smoothing'),
    logLoss: await attr('data-log-loss'),
    x: await attr('data-x'),
    legend: (await page.locator('#chart .u-legend').innerText()).replace(/\s+/g, ' '),
    axes: `${await attr('data-axes')} | ${await attr('data-x-ticks')}`,
  };
}

async function until(
  page: FrameLocator,
  what: string,
  ok: (s: ChartState) => boolean,
): Promise<ChartState> {
  let last: ChartState | null = null;
  try {
    return await eventually(what, async () => {
      last = await chartState(page);
      return ok(last) ? last : undefined;
    });
  } catch (error) {
    throw new Error(`${String(error)}; the chart: ${JSON.stringify(last)}`, { cause: error });
  }
}

/** Registers the chart's journeys in `window`. */
export function chartJourneys(window: E2eWindow): void {
  it('smooths with the raw line faint behind, draws the loss on a log scale, x by wall time', async function () {
    const { workbench, workspace } = window;
    await workbench.untilOverbrainerShown();
    await workbench.runCommand('View: Close All Editors');
    writeRun(workspace.dir);
    await workbench.openViewContainer('Overbrainer');
    // In the Runs tree (its file watcher), so in Show Run's pick.
    await workbench
      .viewPane('Runs')
      .locator('.monaco-list-row', { hasText: RUN })
      .first()
      .waitFor({ state: 'visible' });
    await pickFromCommand(workbench, 'Overbrainer: Show Run', 'Run to show', RUN);
    const page = runPage(workbench);
    await page.locator('#run-title', { hasText: RUN }).waitFor({ timeout: UI_TIMEOUT_MS });

    // The defaults: TensorBoard's 0.6, the raw line in the legend beside the smoothed one.
    const first = await until(
      page,
      'every step charted, smoothed',
      (s) => s.points === String(STEPS) && s.smoothing === '0.60',
    );
    assert.match(first.legend, /loss \(raw\)/);
    assert.equal(first.logLoss, 'false');
    assert.equal(first.x, 'step');
    assert.equal(await page.locator('#smoothing-value').innerText(), '0.60');

    // The GPUs beside the loss, and what was found of their use, from the run's records.
    assert.equal(
      await page.locator('#gpus').innerText(),
      'GPU 0 · 0 % · 14.9 of 24.0 GiB · 34 °C · 63 W',
    );
    assert.match(
      await page.locator('#gpu-warning').innerText(),
      /^the GPU is idle while the pod bills: is the job waiting on data\?/,
    );
    await workbench.screenshot('run chart smoothed');

    // No smoothing: one loss line, the raw one.
    // Playwright fills a range input by setting its value and firing `input` and `change`.
    await page.locator('#smoothing').fill('0');
    const plain = await until(page, 'no smoothing', (s) => s.smoothing === '0.00');
    assert.doesNotMatch(plain.legend, /\(raw\)/);

    // Heavier smoothing, the log scale, x by wall time.
    await page.locator('#smoothing').fill('0.9');
    await page.locator('#log-loss').check();
    await page.locator('#x-axis').selectOption('time');
    const chosen = await until(
      page,
      'smoothing 0.9, log scale, wall time',
      (s) => s.smoothing === '0.90' && s.logLoss === 'true' && s.x === 'time',
    );
    assert.equal(chosen.points, String(STEPS), 'every step, now placed by its time');
    assert.match(chosen.legend, /loss \(raw\)/);
    assert.match(chosen.axes, /wall time/);
    assert.match(chosen.axes, /loss \(log\)/);
    // 120 steps 30 s apart: an hour of wall time on the x axis, labelled as elapsed time.
    assert.match(chosen.axes, /\| 0s .*\b(10|15|20|30)m\b/);
    await workbench.screenshot('run chart log scale by wall time');
  });

  it('remembers the choice for the workspace: the restored panel after a reload has it', async function () {
    const { workbench } = window;
    await workbench.reloadWindow(RELOAD_TIMEOUT_MS);
    const page = runPage(workbench);
    await page.locator('#run-title', { hasText: RUN }).waitFor({ timeout: RELOAD_TIMEOUT_MS });
    const restored = await until(
      page,
      'the restored chart with the choice',
      (s) =>
        s.points === String(STEPS) &&
        s.smoothing === '0.90' &&
        s.logLoss === 'true' &&
        s.x === 'time',
    );
    assert.match(restored.axes, /wall time/);
    assert.equal(await page.locator('#smoothing-value').innerText(), '0.90');
    assert.equal(await page.locator('#log-loss').isChecked(), true);
    assert.equal(await page.locator('#x-axis').inputValue(), 'time');
  });
}
