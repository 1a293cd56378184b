import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ROOT } from '../helpers/cli';
import { tinyToml, useWindow } from './window';

/**
 * Issue #38 in the real VS Code against the Runpod emulator and the real Optuna (/usr/bin/python3
 * with Debian's python3-optuna, set as overbrainer.sweepPython): Start Sweep quotes the sweep in its modal, runs its trials on emulated
 * pods and says its end with the best trial; the Sweeps view lists it and its trials, and a click
 * on its row opens its page. No pod is left billing (the window's own check).
 */
const SWEEP = 'e2e-sweep';

describe('Sweeps in the real VS Code: Start Sweep, its end, the Sweeps view and the sweep page', function () {
  this.timeout(420_000);
  const window = useWindow({
    name: 'sweep',
    toml: tinyToml(
      'python3 train.py --steps 10 --step-seconds 0.05 --eval-every 5 --learning-rate {learning_rate} --lora-r {lora_r}',
      `max_cost_usd = 0.5

[sweep]
name = "${SWEEP}"
metric = "eval_loss"
direction = "minimize"
trials = 2
parallel = 2
budget_usd = 5
sampler = "random"
sampler_seed = 3
pruner = "none"

[sweep.params]
learning_rate = { low = 1e-5, high = 1e-2, log = true }
lora_r = [4, 8, 16, 32]
`,
    ),
    // The sweep's job: examples/sweep/train.py (its eval_loss a known function of its params).
    prepare: (ws) =>
      fs.copyFileSync(path.join(ROOT, 'examples', 'sweep', 'train.py'), path.join(ws, 'train.py')),
    // The Python with Optuna, set as a user would (code-server's PATH may lead to another).
    machineSettings: { 'overbrainer.sweepPython': '/usr/bin/python3' },
    timingScale: '8',
    apiKeyInEnv: true,
  });

  it('Start Sweep quotes it, runs both trials on pods and says its end; the view lists it and its row opens its page', async function () {
    const { emulator, workbench } = window;
    await workbench.untilOverbrainerShown();
    await workbench.openViewContainer('Overbrainer');
    await workbench.runCommand('Overbrainer: Start Sweep');
    const dialog = workbench.page.locator('.monaco-dialog-box');
    await dialog.waitFor({ state: 'visible' });
    const words = await dialog.innerText();
    assert.match(words, new RegExp(`sweep ${SWEEP}: 2 trials, 2 at once, budget \\$5\\.00`));
    assert.match(words, /a trial's worst case: \$\d+\.\d\d/);
    await workbench.screenshot('the sweep quote');
    await dialog.getByRole('button', { name: 'Start Sweep', exact: true }).click();

    const end = await workbench.waitForNotification(
      new RegExp(`sweep ${SWEEP} ended: all 2 trials ran; best eval_loss`),
      300_000,
    );
    assert.match(await end.innerText(), /trial \d, \{"learning_rate":.*"lora_r":\d+\}.*spent \$\d/);
    await workbench.screenshot('the sweep ended');
    const pods = emulator.ledger().pods;
    assert.equal(pods.length, 2, 'one pod per trial');

    await workbench.openView('Sweeps');
    const row = workbench
      .viewPane('Sweeps')
      .locator('.monaco-list-row', { hasText: SWEEP })
      .first();
    await row.waitFor({ state: 'visible' });
    assert.match(await row.innerText(), /ended \(trials\) · 2\/2 trials · best eval_loss \d/);
    const trials = workbench
      .viewPane('Sweeps')
      .locator('.monaco-list-row', { hasText: /#\d COMPLETE/ });
    await trials.nth(1).waitFor({ state: 'visible' });
    await row.click();
    const tab = workbench.page.locator('.tabs-container .tab', { hasText: `Sweep ${SWEEP}` });
    await tab.first().waitFor({ state: 'visible' });
    await workbench.screenshot('the sweep page');
  });
});
