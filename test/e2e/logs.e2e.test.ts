import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { eventually, runPage, UI_TIMEOUT_MS } from './harness';
import { confirmTrain, pickFromCommand, tinyToml, useWindow } from './window';

/**
 * The pod's log in the real VS Code against the Runpod emulator: a pod whose sshd never answers
 * boots; while it does, the run view (opened by Train) shows its boot log's last lines in place
 * of the chart; Cancel Run in the view ends it (the boot log leaves the view); then Show Logs
 * from the palette picks the run and opens its captured pod log as a read-only document.
 * Timings: the production constants divided by OVERBRAINER_TIMING_SCALE.
 */
describe('Pod logs in the real VS Code (run view while booting, Show Logs)', function () {
  this.timeout(180_000);
  const window = useWindow({
    name: 'logs',
    toml: tinyToml('python3 train.py --steps 5 --step-seconds 0.05'),
    // The next pod's sshd refuses connections: it boots, logs, and never answers SSH.
    prepare: async (_ws, emulator) => {
      await emulator.faults.sshdNeverStarts('closed');
    },
    timingScale: '8',
    apiKeyInEnv: true,
    env: { SHELL: '/bin/sh' },
  });

  it('shows the boot log in the run view while the pod boots, then the kept pod log by Show Logs', async function () {
    const { emulator, workspace, workbench } = window;
    await workbench.untilOverbrainerShown();
    await confirmTrain(workbench);

    // Train opens the run view; while the pod boots its log's last lines replace the chart.
    const page = runPage(workbench);
    const boot = page.locator('#boot-log');
    await boot
      .filter({ hasText: /container start #1/ })
      .waitFor({ state: 'visible', timeout: UI_TIMEOUT_MS });
    assert.equal(await page.locator('#chart').isVisible(), false, 'the chart is hidden meanwhile');
    assert.ok(!(await boot.innerText()).includes(emulator.apiKey), 'the API key was shown');
    await workbench.screenshot('boot log in the run view');

    // Cancel Run from the view: the pod is deleted before its job, its log drained first.
    await page.locator('button[data-action="cancel"]').click();
    const confirm = workbench.page.locator('.monaco-dialog-box');
    await confirm.waitFor({ state: 'visible' });
    await confirm.getByRole('button', { name: 'Cancel Run', exact: true }).click();
    const runId = await eventually('the cancelled run', async () => {
      const dir = path.join(workspace.dir, 'runs');
      const ids = fs.existsSync(dir) ? fs.readdirSync(dir) : [];
      const id = ids[0];
      if (id === undefined) return undefined;
      const run = JSON.parse(fs.readFileSync(path.join(dir, id, 'run.json'), 'utf8')) as {
        state: string;
      };
      return run.state === 'preparing' || run.state === 'running' ? undefined : id;
    });
    await page.locator('#boot').waitFor({ state: 'hidden' });

    // Show Logs from the palette: the run (its only log is the pod's) opens as a document.
    // (The pick can close with the palette's animation on a loaded machine: run again if so.)
    await pickFromCommand(
      workbench,
      'Overbrainer: Show Logs',
      'Logs to show: a run, or the extension output',
      runId,
    );
    const tab = workbench.page.locator('.tabs-container .tab', { hasText: 'pod.log' });
    await tab.waitFor({ state: 'visible' });
    const editor = workbench.page.locator('.editor-instance .view-lines').first();
    await eventually('the pod log in the editor', async () => {
      const text = (await editor.innerText()).replace(/\u00a0/g, ' ');
      return /system: container start #1/.test(text) ? true : undefined;
    });
    assert.ok(!(await editor.innerText()).includes(emulator.apiKey), 'the API key was shown');
    await workbench.screenshot('pod log opened by Show Logs');
  });
});
