import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { hostKeySecretName } from '../../src/core/pod/context';
import { eventually, runPage, UI_TIMEOUT_MS } from './harness';
import { RUN_ID } from './runRows';
import { SWEEP_MACHINE_SETTINGS, sweepJourneys } from './sweepJourneys';
import { confirmTrain, pickFromCommand, setApiKey, tinyToml, useWindow } from './window';

/**
 * What a new user meets, in one real VS Code window against the Runpod emulator: the Runs
 * welcome that follows the workspace (Create overbrainer.toml, then Train and the key step, then
 * Train), Train opening the run's live view by itself, and a pod whose bootstrap fails: its
 * reason (the pod's own words) in the notification and in the run view; the Pods view and the
 * Runs tree then agree that the pod is gone.
 *
 * Then, in the same window (the key set through the palette, not in VS Code's environment; a
 * window costs about 14 CPU-s to its extension's activation), Train from the palette: the key
 * set again, the modal confirmation, the run in the Runs tree moving to succeeded, its output on
 * disk and no pod left billing; Train and Keep Pod, then Remove Pod; a broken overbrainer.toml in
 * the Problems panel. These judge only the runs they add to runs/. Then the sweeps, Start Sweep
 * and one sweep from either client (./sweepJourneys.ts: they were a window of their own), with
 * the key the new user set.
 * Timings: the production constants divided by OVERBRAINER_TIMING_SCALE (the CLI's test hook).
 */
const TOML = tinyToml(`python3 train.py --steps 5 --step-seconds 0.05`);
/** The Train journeys' overbrainer.toml (its line 13 is max_hours). */
const TRAIN_TOML = tinyToml(`python3 train.py --steps 20 --step-seconds 0.05`);

/** The bootstrap's own words when the host key secret is no key. */
const BOOT_REASON = 'bootstrap failed: OVERBRAINER_HOST_KEY is not an OpenSSH private key';

describe('A new user in the real VS Code: the welcome, the run view on Train, a failed boot', function () {
  this.timeout(420_000);
  // Pods provision for 3 s: time for the test to spoil the run's host key secret before the
  // container starts and reads it (the Train and sweep journeys' pods too: 3 s more each).
  const window = useWindow({
    name: 'new-user',
    emulator: { bootDelaysMs: { provisioning: 3_000, starting: 100 } },
    timingScale: '8',
    machineSettings: SWEEP_MACHINE_SETTINGS,
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

  const runsDir = (): string => path.join(window.workspace.dir, 'runs');
  const runFolders = (): string[] => (fs.existsSync(runsDir()) ? fs.readdirSync(runsDir()) : []);
  /** The run a Train made: the first run folder not among `before`. */
  const newRun = (before: Set<string>): Promise<string> =>
    eventually('the new run on disk', async () =>
      runFolders().find((name) => RUN_ID.test(name) && !before.has(name)),
    );

  it('sets the key, trains, shows the run in the tree until it succeeded, with its output', async function () {
    const { emulator, workspace, workbench } = window;
    // The new user's editors and notifications closed, the Train journeys' overbrainer.toml.
    await workbench.runCommand('View: Close All Editors');
    await workbench.runCommand('Notifications: Clear All Notifications');
    fs.writeFileSync(path.join(workspace.dir, 'overbrainer.toml'), TRAIN_TOML);
    const before = new Set(runFolders());
    await setApiKey(workbench, emulator.apiKey);

    await workbench.openViewContainer('Overbrainer');
    await confirmTrain(workbench, 'Train', async (words) => {
      assert.match(words, /Train on "pod"\?/);
      assert.match(words, /GPU types: NVIDIA GeForce RTX 4090/);
      assert.match(words, /max_hours: 1/);
      await workbench.screenshot('train confirmation');
    });

    const runs = workbench.viewPane('Runs');
    const id = await newRun(before);
    const row = runs.locator('.monaco-list-row', { hasText: id }).first();
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

    const ids = runFolders().filter((name) => name.startsWith('tiny_') && !before.has(name));
    assert.deepEqual(ids, [id]);
    const output = path.join(runsDir(), id, 'output');
    assert.ok(fs.readdirSync(output).length > 0, 'the run retrieved its output');
    const run = JSON.parse(fs.readFileSync(path.join(runsDir(), id, 'run.json'), 'utf8')) as {
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
    const before = new Set(runFolders());
    await confirmTrain(workbench, 'Train and Keep Pod');
    const runs = workbench.viewPane('Runs');
    const rows = runs.locator('.monaco-list-row');
    const id = await newRun(before);
    await eventually('the new run on top of the tree', async () =>
      (await rows.first().innerText()).includes(id) ? true : undefined,
    );
    const row = rows.first();
    await eventually(
      'the run to end with its pod kept',
      async () => ((await row.innerText()).includes('pod kept') ? true : undefined),
      240_000,
    );
    await workbench.screenshot('pod kept');
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
    fs.writeFileSync(file, TRAIN_TOML.replace('max_hours = 1', 'max_hours = "one"'));
    await workbench.runCommand('View: Focus Problems (Errors, Warnings, Infos)');
    const problems = workbench.page.locator('.markers-panel');
    await problems.waitFor({ state: 'visible' });
    const entry = problems.locator('.monaco-list-row', { hasText: /max_hours/ }).first();
    await entry.waitFor({ state: 'visible' });
    const text = await problems.innerText();
    assert.match(text, /overbrainer\.toml/);
    assert.match(text, /\[Ln 13, Col \d+\]/);
    await workbench.screenshot('problems');

    fs.writeFileSync(file, TRAIN_TOML);
    await entry.waitFor({ state: 'detached' });
    await workbench.screenshot('problems fixed');
  });

  sweepJourneys(window);
});
