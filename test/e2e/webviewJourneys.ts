import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { FrameLocator } from 'playwright-core';
import { eventually, runPage, UI_TIMEOUT_MS } from './harness';
import { writeFinishedRun } from './runFixtures';
import { writeTinyWorkspace } from '../helpers/tinyWorkspace';
import { confirmTrain, openPickFromCommand, tinyToml, type E2eWindow } from './window';

/**
 * The run webview in the real VS Code against the Runpod emulator: Train, Show Run, the chart
 * gains points while the job trains, the header reaches succeeded; then the window reloads and
 * the serializer brings the panel back with its points (from the run's retrieved metrics.jsonl).
 * Timings: the production constants divided by OVERBRAINER_TIMING_SCALE (the window's, 8).
 *
 * In a window of their own before (./views.e2e.test.ts): they begin by making the workspace
 * theirs, the runs of the journeys before them gone from runs/ and from the Runs tree.
 */
const STEPS = 60;
/** Short steps: the job waits at its start until the panel is open (see GATE), so none is missed. */
const STEP_SECONDS = 0.25;
/** The file in the pod's /workspace that lets the job start training. */
const GATE = 'ob-e2e-go';
/** A reload reloads the whole workbench and restarts the extension host. */
const RELOAD_TIMEOUT_MS = 180_000;
/** A finished run already in the workspace: charted from its metrics.jsonl, compared with the new one. */
const OLD_RUN = 'tiny_20261130-100000';
const OLD_STEPS = 40;

function writeOldRun(ws: string): void {
  writeFinishedRun(ws, {
    id: OLD_RUN,
    created: '2026-12-01T10:00:00Z',
    remoteDir: `/workspace/overbrainer/runs/${OLD_RUN}`,
    steps: OLD_STEPS,
    startS: 1,
    stepSeconds: 1,
    loss: (step) => 3 / (1 + step / 4),
    learningRate: (step) => 0.3 * (1 - step / 50),
    trailer: ['not json: a line the reader skips'],
  });
}

function toml(): string {
  return tinyToml(
    `while [ ! -e /workspace/${GATE} ]; do sleep 0.2; done && python3 train.py --steps ${STEPS} --step-seconds ${STEP_SECONDS}`,
  );
}

/** The points the run page's chart holds (its `data-points`). */
async function chartPoints(page: FrameLocator): Promise<number> {
  const value = await page.locator('#chart').getAttribute('data-points', { timeout: 5_000 });
  return Number(value ?? '0');
}

/** Registers the run webview's journeys in `window` (the emulator's key in its environment). */
export function webviewJourneys(window: E2eWindow): void {
  it('charts the loss live while the job trains, and shows the run succeeded', async function () {
    const { emulator, workspace, workbench } = window;
    await workbench.untilOverbrainerShown();
    await workbench.openViewContainer('Overbrainer');
    // The workspace made theirs: no run of the journeys before, the tiny files, the old run.
    const runsDir = path.join(workspace.dir, 'runs');
    for (const name of fs.existsSync(runsDir) ? fs.readdirSync(runsDir) : []) {
      fs.rmSync(path.join(runsDir, name), { recursive: true, force: true });
    }
    writeTinyWorkspace(workspace.dir, toml());
    writeOldRun(workspace.dir);
    const listed = workbench.viewPane('Runs').locator('.monaco-list-row', { hasText: 'tiny_' });
    await eventually('the Runs tree to list the old run alone', async () => {
      const texts = await listed.allInnerTexts();
      return texts.length === 1 && texts[0]!.includes(OLD_RUN) ? true : undefined;
    });
    await confirmTrain(workbench);

    const row = workbench
      .viewPane('Runs')
      .locator('.monaco-list-row', { hasText: 'tiny_' })
      .filter({ hasNotText: OLD_RUN })
      .first();
    await row.waitFor({ state: 'visible', timeout: 120_000 });
    const runId = /tiny_\d{8}-\d{6}(?:_\d+)?/.exec(await row.innerText())?.[0];
    assert.ok(runId, 'the run id is in the tree');

    // Show Run with no argument opens the live run (as the status bar item does); should the
    // run not count as live yet, the command asks with a QuickPick.
    await workbench.runCommand('Overbrainer: Show Run');
    const quick = workbench.page.locator('.quick-input-widget input[placeholder="Run to show"]');
    await eventually('the run panel to open', async () => {
      if (await quick.isVisible().catch(() => false)) {
        await quick.fill(runId);
        await quick.press('Enter');
      }
      return (await workbench.page.locator('iframe.webview.ready').count()) > 0 ? true : undefined;
    });
    const page = runPage(workbench);
    await page.locator('#run-title', { hasText: runId }).waitFor({ timeout: UI_TIMEOUT_MS });
    // The panel is open: the job may train now (it waited at its start, so that a short job's
    // every step is seen arriving, however slow the machine was to open the panel).
    await eventually("the run's pod", async () => {
      const podFile = path.join(workspace.dir, 'runs', runId, 'pod.json');
      if (!fs.existsSync(podFile)) return undefined;
      const { pod_id: podId } = JSON.parse(fs.readFileSync(podFile, 'utf8')) as {
        pod_id: string | null;
      };
      const pod = podId === null ? undefined : emulator.pod(podId);
      if (pod === undefined) return undefined;
      fs.writeFileSync(path.join(pod.dirs.workspace, GATE), '');
      return true;
    });

    // The chart gains points while the job trains: watch it until the header says succeeded,
    // noting every point count seen while the job was still short of its last step.
    const started = Date.now();
    const seen: string[] = [];
    const growing = new Set<number>();
    let shot = false;
    await eventually(
      'the header to say succeeded',
      async () => {
        const n = await chartPoints(page);
        const state = await page.locator('#run-state').innerText();
        if (seen.at(-1)?.endsWith(`${n} ${state}`) !== true) {
          seen.push(`${((Date.now() - started) / 1000).toFixed(1)}s ${n} ${state}`);
        }
        if (n > 0 && n < STEPS && state === 'running') {
          growing.add(n);
          if (!shot && growing.size >= 2) {
            shot = true;
            // The page draws on a canvas: uPlot is bundled and runs under the strict CSP.
            await page.locator('#chart canvas').first().waitFor();
            assert.match(
              await page.locator('#step').innerText(),
              new RegExp(`^step \\d+ / ${STEPS}$`),
            );
            assert.ok(
              await page.locator('#actions button[data-action="cancel"]').isVisible(),
              'Cancel Run is offered while running',
            );
            await workbench.screenshot('run chart while training');
          }
        }
        return state === 'succeeded' ? true : undefined;
      },
      240_000,
    );
    console.log(`      chart points seen: ${seen.join(', ')}`);
    assert.ok(
      growing.size >= 2,
      `the chart gained points while the job trained (seen: ${seen.join(', ')})`,
    );
    await eventually('every step on the chart', async () =>
      (await chartPoints(page)) === STEPS ? true : undefined,
    );
    assert.equal(await page.locator('#actions button[data-action="cancel"]').isVisible(), false);
    await page.locator('#actions button[data-action="openOutput"]').waitFor({ state: 'visible' });
    await workbench.screenshot('run chart succeeded');
  });

  it('restores the panel with its points after a window reload', async function () {
    const { workbench } = window;
    await workbench.reloadWindow(RELOAD_TIMEOUT_MS);
    const page = runPage(workbench);
    // Then the extension host starts again and restores the panel: part of the same reload.
    await page
      .locator('#run-state', { hasText: 'succeeded' })
      .waitFor({ timeout: RELOAD_TIMEOUT_MS });
    await eventually('the restored chart to hold every step', async () =>
      (await chartPoints(page)) === STEPS ? true : undefined,
    );
    await workbench.screenshot('run chart restored after reload');
  });
  it('compares runs: both loss curves on one chart', async function () {
    const { workbench } = window;
    const widget = workbench.page.locator('.quick-input-widget');
    const input = await openPickFromCommand(
      workbench,
      'Overbrainer: Compare Runs',
      'Runs to compare (loss curves on one chart)',
    );
    // A multi-select QuickPick (canPickMany): one checkbox per run, and in its header a
    // "toggle all" box — VS Code's own Toggle widget (div.monaco-checkbox, role checkbox), not an
    // <input type=checkbox>.
    const rows = widget.locator('.monaco-list-row');
    await eventually('both runs offered', async () =>
      (await rows.count()) === 2 ? true : undefined,
    );
    const all = widget.locator('.quick-input-header .monaco-checkbox').first();
    await all.click();
    await eventually('both runs checked', async () => {
      const checked = await rows
        .locator('.monaco-checkbox[aria-checked="true"], input[type="checkbox"]:checked')
        .count();
      return checked === 2 ? true : undefined;
    });
    await workbench.screenshot('compare runs picked');
    await input.press('Enter');
    await widget.waitFor({ state: 'hidden' });
    const page = runPage(workbench);
    await page.locator('#run-title', { hasText: /^Compare / }).waitFor({ timeout: UI_TIMEOUT_MS });
    // The steps of both runs on one x axis: 1..60 of the new run covers the old run's 1..40.
    await eventually('both runs on the chart', async () =>
      (await chartPoints(page)) === Math.max(STEPS, OLD_STEPS) ? true : undefined,
    );
    const legend = await page.locator('#chart .u-legend').innerText();
    assert.ok(legend.includes(OLD_RUN), legend);
    // Two runs, each a smoothed line with its raw line faint behind it (named "<run> (raw)").
    assert.equal(new Set(legend.match(/tiny_\d{8}-\d{6}/g)).size, 2, legend);
    assert.equal((legend.match(/tiny_\d{8}-\d{6} \(raw\)/g) ?? []).length, 2, legend);
    await workbench.screenshot('compare runs');
  });
}
