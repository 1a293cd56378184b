import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { eventually, runPage, UI_TIMEOUT_MS } from './harness';
import { RUN_ID } from './runRows';
import { confirmTrain, tinyToml, useWindow } from './window';

/**
 * Issue #19 in the real VS Code against the Runpod emulator: the pod is deleted mid-run (as
 * Runpod may); the run goes on by itself on a new pod from its last checkpoint. The notification
 * says so, the run page shows the attempts, the Runs tree has a row per attempt, and the run ends
 * succeeded with its results home.
 */
const STEPS = 60;

describe('A pod deleted mid-run in the real VS Code: the run recovers on a new pod', function () {
  this.timeout(300_000);
  const window = useWindow({
    name: 'recovery',
    toml: tinyToml(`python3 train.py --steps ${STEPS} --step-seconds 0.1 --save-every 5`),
    timingScale: '8',
    apiKeyInEnv: true,
  });

  it('the notification, the run page and the Runs tree show the second attempt; the run succeeds', async function () {
    const { emulator, workspace, workbench } = window;
    await workbench.untilOverbrainerShown();
    await workbench.openViewContainer('Overbrainer');
    await confirmTrain(workbench);

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
