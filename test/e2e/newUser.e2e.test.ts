import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { hostKeySecretName } from '../../src/core/pod/context';
import { eventually, runPage, UI_TIMEOUT_MS } from './harness';
import { confirmTrain, setApiKey, tinyToml, useWindow } from './window';

/**
 * What a new user meets, in one real VS Code window against the Runpod emulator: the Runs
 * welcome that follows the workspace (Create overbrainer.toml, then Train and the key step, then
 * Train), Train opening the run's live view by itself, and a pod whose bootstrap fails: its
 * reason (the pod's own words) in the notification and in the run view; the Pods view and the
 * Runs tree then agree that the pod is gone.
 */
const TOML = tinyToml(`python3 train.py --steps 5 --step-seconds 0.05`);

/** The bootstrap's own words when the host key secret is no key. */
const BOOT_REASON = 'bootstrap failed: OVERBRAINER_HOST_KEY is not an OpenSSH private key';

describe('A new user in the real VS Code: the welcome, the run view on Train, a failed boot', function () {
  this.timeout(300_000);
  // Pods provision for 3 s: time for the test to spoil the run's host key secret before the
  // container starts and reads it.
  const window = useWindow({
    name: 'new-user',
    emulator: { bootDelaysMs: { provisioning: 3_000, starting: 100 } },
    timingScale: '8',
  });

  it('the Runs welcome offers Create overbrainer.toml, then Train and the key step, then Train', async function () {
    const { emulator, workspace, workbench } = window;
    await workbench.untilOverbrainerShown();
    await workbench.openViewContainer('Overbrainer');
    const welcome = workbench.viewPane('Runs').locator('.welcome-view-content');
    const button = (name: string) => welcome.getByRole('button', { name, exact: true });
    await welcome.getByText('No overbrainer.toml in this workspace yet').waitFor();
    await button('Create overbrainer.toml').waitFor();
    assert.equal(await button('Train').count(), 0);
    assert.equal(await button('Set Runpod API Key').count(), 0);
    await workbench.screenshot('welcome without config');

    fs.writeFileSync(path.join(workspace.dir, 'overbrainer.toml'), TOML);
    await button('Set Runpod API Key').waitFor();
    await button('Train').waitFor();
    assert.equal(await button('Create overbrainer.toml').count(), 0);
    await workbench.screenshot('welcome with config, no key');

    await setApiKey(workbench, emulator.apiKey);
    await button('Set Runpod API Key').waitFor({ state: 'detached' });
    await button('Train').waitFor();
    await workbench.screenshot('welcome with config and key');
  });

  it('Train opens the run view by itself; a failed boot says why there and in the notification; Pods and Runs agree', async function () {
    const { emulator, workspace, workbench } = window;
    await confirmTrain(workbench);

    // The pod is created: its host key secret becomes no key before its container starts.
    const runsDir = path.join(workspace.dir, 'runs');
    const runId = await eventually('the run and its pod create', async () => {
      const id = fs.existsSync(runsDir)
        ? fs.readdirSync(runsDir).find((name) => name.startsWith('tiny_'))
        : undefined;
      const created = emulator.requests().some((r) => r.route === 'createPod' && r.status === 201);
      return id !== undefined && created ? id : undefined;
    });
    emulator.setSecret(hostKeySecretName(runId), Buffer.from('not a key').toString('base64'));

    // The run's view opened beside the editor without Show Run.
    const page = runPage(workbench);
    await page.locator('#run-title', { hasText: runId }).waitFor({ timeout: UI_TIMEOUT_MS });
    await workbench.screenshot('run view opened by Train');

    const toast = await workbench.waitForNotification(BOOT_REASON);
    assert.match(await toast.innerText(), /bootstrap failed/);
    await page.locator('#run-message', { hasText: BOOT_REASON }).waitFor();
    await page.locator('#run-state', { hasText: 'failed' }).waitFor();
    await workbench.screenshot('boot failure in the run view');

    // One truth about the deleted pod: the Runs tree says failed, the Pods view lists nothing.
    const row = workbench.viewPane('Runs').locator('.monaco-list-row', { hasText: runId }).first();
    await eventually('the tree to say failed', async () =>
      /failed/.test(await row.innerText()) ? true : undefined,
    );
    await workbench.runCommand('Overbrainer: Show Pods');
    const pods = workbench.viewPane('Pods');
    await pods.waitFor({ state: 'visible' });
    await eventually('the Pods view to list no pod of the run', async () =>
      (await pods.locator('.monaco-list-row', { hasText: runId }).count()) === 0 ? true : undefined,
    );
    await workbench.screenshot('pods agree');
  });
});
