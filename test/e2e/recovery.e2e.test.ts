import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { FrameLocator } from 'playwright-core';
import { eventually, UI_TIMEOUT_MS, type Workbench } from './harness';
import { tinyToml, useWindow } from './window';

/**
 * Issue #19 in the real VS Code against the Runpod emulator: the pod is deleted mid-run (as
 * Runpod may); the run goes on by itself on a new pod from its last checkpoint. The notification
 * says so, the run page shows the attempts, the Runs tree has a row per attempt, and the run ends
 * succeeded with its results home.
 */
const STEPS = 60;
const RUN_ID = /tiny_\d{8}-\d{6}(?:_\d+)?/;

/** The run page: a webview is an iframe (the host frame) holding the page's iframe. */
function runPage(workbench: Workbench): FrameLocator {
  return workbench.page
    .frameLocator('iframe.webview.ready:visible')
    .frameLocator('iframe#active-frame');
}

describe('A pod deleted mid-run in the real VS Code: the run recovers on a new pod', function () {
  this.timeout(300_000);
  const window = useWindow({
    name: 'recovery',
    toml: tinyToml(`python3 train.py --steps ${STEPS} --step-seconds 0.1 --save-every 5`),
    env: (emulator) => ({
      OVERBRAINER_TIMING_SCALE: '8',
      OVERBRAINER_RUNPOD__API_KEY: emulator.apiKey,
    }),
  });

  it('the notification, the run page and the Runs tree show the second attempt; the run succeeds', async function () {
    const { emulator, workspace, workbench } = window;
    await workbench.untilOverbrainerShown();
    await workbench.openViewContainer('Overbrainer');
    await workbench.runCommand('Overbrainer: Train');
    const dialog = workbench.page.locator('.monaco-dialog-box');
    await dialog.waitFor({ state: 'visible' });
    await dialog.getByRole('button', { name: 'Train', exact: true }).click();

    const runsDir = path.join(workspace.dir, 'runs');
    const id = await eventually('the new run on disk', async () =>
      fs.existsSync(runsDir)
        ? fs.readdirSync(runsDir).find((name) => RUN_ID.test(name))
        : undefined,
    );
    const runDir = path.join(runsDir, id);
    // A checkpoint home first, so the second attempt resumes from it.
    await eventually('a checkpoint home', async () =>
      fs.existsSync(path.join(runDir, 'checkpoints', 'latest.json')) ? true : undefined,
    );
    const first = (
      JSON.parse(fs.readFileSync(path.join(runDir, 'pod.json'), 'utf8')) as {
        pod_id: string;
      }
    ).pod_id;
    await emulator.faults.podVanishes(first);

    await workbench.waitForNotification(/attempt 2 of 3 on a new pod/);
    await workbench.screenshot('recovering notification');
    const page = runPage(workbench);
    await page
      .getByText(/Attempt 2/)
      .first()
      .waitFor({ timeout: UI_TIMEOUT_MS });
    await page
      .getByText('succeeded', { exact: true })
      .first()
      .waitFor({ timeout: UI_TIMEOUT_MS * 2 });
    await workbench.screenshot('run page after recovery');

    const row = workbench.viewPane('Runs').locator('.monaco-list-row', { hasText: id }).first();
    await row.waitFor();
    if ((await row.getAttribute('aria-expanded')) === 'false') await row.click();
    await workbench
      .viewPane('Runs')
      .locator('.monaco-list-row', { hasText: /Attempt 2/ })
      .first()
      .waitFor();
    await workbench.screenshot('attempt rows');

    // The Spend view (#16): the ended run with our estimate beside Runpod's bill.
    const spendRow = workbench
      .viewPane('Spend')
      .locator('.monaco-list-row', { hasText: id })
      .first();
    let last = '';
    const spent = await eventually('the ended run in the Spend view, billed', async () => {
      last = await spendRow.innerText().catch(() => '');
      return /estimate \$\d+\.\d+ · billed \$\d+\.\d+ · difference -?\$\d+\.\d+/.test(last) &&
        !last.includes('(live)')
        ? last
        : undefined;
    }).catch((error: unknown) => {
      throw new Error(`${String(error)}; its row said: ${JSON.stringify(last)}`);
    });
    assert.doesNotMatch(spent, /over 1 % apart/);
    await workbench.screenshot('spend view');

    const model = JSON.parse(
      fs.readFileSync(path.join(runDir, 'output', 'model.json'), 'utf8'),
    ) as { step: number };
    assert.equal(model.step, STEPS, 'the model of the last step came home');
    const pods = emulator.requests().filter((r) => r.route === 'createPod' && r.status === 201);
    assert.equal(pods.length, 2, 'a second pod was created');
  });
});
