import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Browser } from 'playwright-core';
import { startEmulator, type Emulator } from '../emulator/emulator';
import {
  CodeServer,
  eventually,
  launchChromium,
  REPO_ROOT,
  runPage,
  tempDir,
  UI_TIMEOUT_MS,
  Workbench,
} from './harness';

/**
 * The pod's log in the real VS Code against the Runpod emulator: a pod whose sshd never answers
 * boots; while it does, the run view (opened by Train) shows its boot log's last lines in place
 * of the chart; Cancel Run in the view ends it (the boot log leaves the view); then Show Logs
 * from the palette picks the run and opens its captured pod log as a read-only document.
 * Timings: the production constants divided by OVERBRAINER_TIMING_SCALE.
 */
const TIMING_SCALE = '8';
const TOML = `[project]
name = "tiny"

[training]
target = "pod"
trainer = "command"
command = "python3 train.py --steps 5 --step-seconds 0.05"
upload = ["train.py", "data"]

[targets.pod]
kind = "runpod"
gpu_types = ["NVIDIA GeForce RTX 4090"]
max_hours = 1
boot_grace_minutes = 5
retrieve_grace_minutes = 10
`;

describe('Pod logs in the real VS Code (run view while booting, Show Logs)', function () {
  this.timeout(180_000);
  let emulator: Emulator;
  let workspace: ReturnType<typeof tempDir>;
  let server: CodeServer;
  let browser: Browser;
  let workbench: Workbench;

  before(async function () {
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 100, starting: 100 } });
    // The next pod's sshd refuses connections: it boots, logs, and never answers SSH.
    await emulator.faults.sshdNeverStarts('closed');
    workspace = tempDir('logs-ws');
    const ws = workspace.dir;
    const tiny = path.join(REPO_ROOT, 'examples', 'tiny');
    fs.copyFileSync(path.join(tiny, 'train.py'), path.join(ws, 'train.py'));
    fs.cpSync(path.join(tiny, 'data'), path.join(ws, 'data'), { recursive: true });
    fs.writeFileSync(path.join(ws, 'overbrainer.toml'), TOML);
    fs.mkdirSync(path.join(ws, '.vscode'));
    fs.writeFileSync(
      path.join(ws, '.vscode', 'settings.json'),
      JSON.stringify({ 'overbrainer.runpod.baseUrl': emulator.baseUrl }, null, 2),
    );
    server = await CodeServer.start({
      workspace: ws,
      env: {
        OVERBRAINER_TIMING_SCALE: TIMING_SCALE,
        OVERBRAINER_RUNPOD__API_KEY: emulator.apiKey,
        SHELL: '/bin/sh',
      },
    });
    browser = await launchChromium();
    workbench = await Workbench.open(browser, server, this.test?.parent?.title ?? 'logs');
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed')
      await workbench?.screenshot('failed').catch(() => undefined);
  });

  after(async function () {
    await workbench?.close().catch(() => undefined);
    await browser?.close();
    await server?.close();
    const billing = emulator?.ledger().pods.filter((p) => p.billing) ?? [];
    await emulator?.close();
    workspace?.remove();
    assert.deepEqual(
      billing.map((p) => p.id),
      [],
      'a pod was left billing',
    );
  });

  it('shows the boot log in the run view while the pod boots, then the kept pod log by Show Logs', async function () {
    await workbench.untilOverbrainerShown();
    await workbench.runCommand('Overbrainer: Train');
    const dialog = workbench.page.locator('.monaco-dialog-box');
    await dialog.waitFor({ state: 'visible' });
    await dialog.getByRole('button', { name: 'Train', exact: true }).click();

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
    await workbench.runCommand('Overbrainer: Show Logs');
    const input = workbench.page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible' });
    const row = workbench.page
      .locator('.quick-input-widget .monaco-list-row')
      .filter({ hasText: runId });
    await row.first().click();
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
