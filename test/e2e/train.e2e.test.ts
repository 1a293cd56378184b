import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { eventually } from './harness';
import { confirmTrain, pickFromCommand, setApiKey, tinyToml, useWindow } from './window';

/**
 * Train from the palette against the Runpod emulator, in the real VS Code: the key set through
 * the palette, the modal confirmation, the run in the Runs tree moving to succeeded, its output
 * on disk and no pod left billing; then a broken overbrainer.toml in the Problems panel.
 * Timings: the production constants divided by OVERBRAINER_TIMING_SCALE (the CLI's test hook).
 */
const TIMING_SCALE = '8';

function toml(): string {
  return tinyToml(`python3 train.py --steps 20 --step-seconds 0.05`);
}

describe('Train in the real VS Code against the Runpod emulator', function () {
  this.timeout(300_000);
  const window = useWindow({
    name: 'train',
    toml: toml(),
    timingScale: TIMING_SCALE,
  });

  it('sets the key, trains, shows the run in the tree until it succeeded, with its output', async function () {
    const { emulator, workspace, workbench } = window;
    // The extension is registered once its container shows; commands are not in the palette before.
    await workbench.untilOverbrainerShown();
    await setApiKey(workbench, emulator.apiKey);

    await workbench.openViewContainer('Overbrainer');
    await confirmTrain(workbench, 'Train', async (words) => {
      assert.match(words, /Train on "pod"\?/);
      assert.match(words, /GPU types: NVIDIA GeForce RTX 4090/);
      assert.match(words, /max_hours: 1/);
      await workbench.screenshot('train confirmation');
    });

    const runs = workbench.viewPane('Runs');
    const row = runs.locator('.monaco-list-row', { hasText: 'tiny_' }).first();
    await row.waitFor({ state: 'visible' });
    // The followed run's countdown is in the status bar while it runs.
    await workbench.page
      .locator('.statusbar-item', { hasText: /left|following/ })
      .first()
      .waitFor({ state: 'visible' });
    await workbench.screenshot('run in the tree');
    const started = Date.now();
    const states = new Set<string>();
    await eventually(
      'the run to succeed in the tree',
      async () => {
        const text = await row.innerText();
        const state = /(preparing|running|succeeded|failed|cancelled|stopped)/.exec(text)?.[1];
        if (state) states.add(state);
        return state === 'succeeded'
          ? true
          : state === 'failed'
            ? Promise.reject(new Error(text))
            : undefined;
      },
      240_000,
    );
    const tookS = (Date.now() - started) / 1000;
    console.log(
      `      run reached succeeded in ${tookS.toFixed(1)} s; states seen: ${[...states].join(' → ')}`,
    );
    await workbench.waitForNotification(/Run tiny_\S+ succeeded/);
    await workbench.screenshot('run succeeded');
    // Once the flow ended (output retrieved, pod deleted) nothing is followed: the countdown hides
    // and the Pods view no longer lists the run's pod.
    await workbench.page
      .locator('.statusbar-item', { hasText: /left|following/ })
      .first()
      .waitFor({ state: 'detached' });
    await workbench
      .viewPane('Pods')
      .locator('.monaco-list-row')
      .first()
      .waitFor({ state: 'detached' });
    await workbench.screenshot('nothing followed');

    const runsDir = path.join(workspace.dir, 'runs');
    const ids = fs.readdirSync(runsDir).filter((name) => name.startsWith('tiny_'));
    assert.equal(ids.length, 1);
    const output = path.join(runsDir, ids[0]!, 'output');
    assert.ok(fs.readdirSync(output).length > 0, 'the run retrieved its output');
    const run = JSON.parse(fs.readFileSync(path.join(runsDir, ids[0]!, 'run.json'), 'utf8')) as {
      state: string;
    };
    assert.equal(run.state, 'succeeded');
    assert.deepEqual(
      emulator
        .ledger()
        .pods.filter((p) => p.billing)
        .map((p) => p.id),
      [],
      'the pod was deleted after retrieval',
    );
  });

  it('trains with Keep Pod: the pod survives the job, then Remove Pod deletes it', async function () {
    const { emulator, workbench } = window;
    await confirmTrain(workbench, 'Train and Keep Pod');
    const runs = workbench.viewPane('Runs');
    const rows = runs.locator('.monaco-list-row');
    await eventually('a second run', async () => ((await rows.count()) === 2 ? true : undefined));
    const row = rows.first();
    await eventually(
      'the run to end with its pod kept',
      async () => ((await row.innerText()).includes('pod kept') ? true : undefined),
      240_000,
    );
    await workbench.screenshot('pod kept');
    const id = /tiny_\d{8}-\d{6}(?:_\d+)?/.exec(await row.innerText())?.[0];
    assert.ok(id);
    const billing = (): string[] =>
      emulator
        .ledger()
        .pods.filter((p) => p.billing)
        .map((p) => p.id);
    assert.equal(billing().length, 1, 'the kept pod still exists after the job');

    await pickFromCommand(workbench, 'Overbrainer: Remove Pod', 'Run to remove the pods of', id);
    const confirm = workbench.page.locator('.monaco-dialog-box');
    await confirm.waitFor({ state: 'visible' });
    assert.match(await confirm.innerText(), /even a kept one/);
    await workbench.screenshot('remove confirmation');
    await confirm.getByRole('button', { name: 'Remove Pod', exact: true }).click();
    await workbench.waitForNotification(new RegExp(`Deleted \\S+ of ${id}`));
    await eventually('no pod billing', async () => (billing().length === 0 ? true : undefined));
    await workbench.screenshot('pod removed');
  });

  it('shows a broken overbrainer.toml in the Problems panel at its line', async function () {
    const { workspace, workbench } = window;
    const file = path.join(workspace.dir, 'overbrainer.toml');
    fs.writeFileSync(file, toml().replace('max_hours = 1', 'max_hours = "one"'));
    await workbench.runCommand('View: Focus Problems (Errors, Warnings, Infos)');
    const problems = workbench.page.locator('.markers-panel');
    await problems.waitFor({ state: 'visible' });
    const entry = problems.locator('.monaco-list-row', { hasText: /max_hours/ }).first();
    await entry.waitFor({ state: 'visible' });
    const text = await problems.innerText();
    assert.match(text, /overbrainer\.toml/);
    assert.match(text, /\[Ln 13, Col \d+\]/);
    await workbench.screenshot('problems');

    fs.writeFileSync(file, toml());
    await entry.waitFor({ state: 'detached' });
    await workbench.screenshot('problems fixed');
  });
});
