import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Browser, Locator } from 'playwright-core';
import { startEmulator, type Emulator } from '../emulator/emulator';
import {
  CodeServer,
  eventually,
  extensionFolderName,
  launchChromium,
  REPO_ROOT,
  tempDir,
  Workbench,
} from './harness';

/**
 * The user's journeys beyond a plain Train, in the real VS Code against the Runpod emulator, one
 * code-server for all of them: Pick GPU Types rewrites overbrainer.toml keeping its comments; the
 * status bar counts down second to second; Keep Pod on a running run keeps the pod past the job,
 * an SSH terminal reaches it, Remove Pod deletes it; an overrun warns once and the countdown turns
 * to the warning background; Cancel Run cancels mid-job and deletes the pod; Stop and Snapshot
 * stops a run with its checkpoint home and Resume Run continues it; Reload Window mid-run
 * resumes following by itself. Timings: production divided by OVERBRAINER_TIMING_SCALE.
 */
const TIMING_SCALE = '8';

interface Job {
  steps: number;
  stepSeconds: number;
  maxHours: number;
  /** After training, the job waits until the test lets it end (see `letJobEnd`). */
  gated?: boolean;
}

/** The file in the pod's /workspace that ends a gated job. */
const GATE = 'ob-e2e-go';

function toml(job: Job, gpuTypes = '["NVIDIA GeForce RTX 4090"]'): string {
  return `# The e2e journeys' project.
[project]
name = "tiny"

[training]
target = "pod"
trainer = "command"
command = "python3 train.py --steps ${job.steps} --step-seconds ${job.stepSeconds}${job.gated ? ` && while [ ! -e /workspace/${GATE} ]; do sleep 0.2; done` : ''}"
upload = ["train.py", "data"]

[targets.pod]
kind = "runpod"
# Tried in order; Pick GPU Types rewrites this line only.
gpu_types = ${gpuTypes} # keep this comment
max_hours = ${job.maxHours}
boot_grace_minutes = 5
retrieve_grace_minutes = 10
`;
}

/** Picks the row holding `text` in the QuickPick whose placeholder is `placeholder`. */
async function pickQuick(workbench: Workbench, placeholder: string, text: string): Promise<void> {
  const widget = workbench.page.locator('.quick-input-widget');
  const input = widget.locator(`input[placeholder="${placeholder}"]`);
  await input.waitFor({ state: 'visible' });
  await input.fill(text);
  await widget.locator('.monaco-list-row', { hasText: text }).first().waitFor();
  await input.press('Enter');
  await widget.waitFor({ state: 'hidden' });
}

/**
 * A copy of today's build (manifest, dist/, media/) as an installed extension: a `npm run build`
 * elsewhere in the tree empties dist/ while it runs, and the Reload journey loads the extension
 * twice, so the test must not depend on dist/ staying in place.
 */
async function stageBuiltExtension(extensionsDir: string): Promise<void> {
  const dist = path.join(REPO_ROOT, 'dist', 'extension.js');
  await eventually(
    'a complete dist/extension.js (npm run build)',
    async () => {
      if (!fs.existsSync(dist)) return undefined;
      const size = fs.statSync(dist).size;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      return fs.existsSync(dist) && fs.statSync(dist).size === size && size > 0 ? true : undefined;
    },
    60_000,
  );
  const stage = path.join(extensionsDir, extensionFolderName());
  fs.mkdirSync(stage, { recursive: true });
  fs.copyFileSync(path.join(REPO_ROOT, 'package.json'), path.join(stage, 'package.json'));
  for (const dir of ['dist', 'media']) {
    fs.cpSync(path.join(REPO_ROOT, dir), path.join(stage, dir), { recursive: true });
  }
}

const RUN_ID = /tiny_\d{8}-\d{6}(?:_\d+)?/;
// No leading \b: the row's text joins the label (ending in a digit) and the description.
const STATE = /(?<![a-z])(preparing|running|succeeded|failed|cancelled|stopped)\b/;

describe('User journeys in the real VS Code against the Runpod emulator', function () {
  this.timeout(420_000);
  let emulator: Emulator;
  let workspace: ReturnType<typeof tempDir>;
  let extensions: ReturnType<typeof tempDir>;
  let server: CodeServer;
  let browser: Browser;
  let workbench: Workbench;

  const configFile = (): string => path.join(workspace.dir, 'overbrainer.toml');
  const billing = (): string[] =>
    emulator
      .ledger()
      .pods.filter((p) => p.billing)
      .map((p) => p.id);
  const countdown = (): Locator =>
    workbench.page.locator('.statusbar-item', { hasText: /\bleft\b|following/ }).first();
  const runRow = (id: string): Locator =>
    workbench.viewPane('Runs').locator('.monaco-list-row', { hasText: id }).first();

  const podOf = (id: string): string =>
    (
      JSON.parse(fs.readFileSync(path.join(workspace.dir, 'runs', id, 'pod.json'), 'utf8')) as {
        pod_id: string;
      }
    ).pod_id;

  /** The run's lock file and whether its holder's process lives (for a failure's message). */
  function lockState(id: string): string {
    const file = path.join(workspace.dir, 'runs', id, '.lock');
    if (!fs.existsSync(file)) return 'none';
    const text = fs.readFileSync(file, 'utf8');
    const ageS = (Date.now() - fs.statSync(file).mtimeMs) / 1000;
    let alive = 'unknown';
    try {
      const { pid } = JSON.parse(text) as { pid: number };
      try {
        process.kill(pid, 0);
        alive = `pid ${pid} alive`;
      } catch {
        alive = `pid ${pid} dead`;
      }
    } catch {
      // Unreadable: its text says enough.
    }
    return `${text.trim()} (${alive}, heartbeat ${ageS.toFixed(0)} s ago)`;
  }

  /** Ends a gated job: the gate file appears in its pod's /workspace. */
  function letJobEnd(id: string): void {
    const pod = emulator.pod(podOf(id));
    assert.ok(pod, `the pod of ${id} exists`);
    fs.writeFileSync(path.join(pod.dirs.workspace, GATE), '');
  }

  /** Train from the palette with `button` of the confirmation; the new run's ID once in the tree. */
  async function train(button: 'Train' | 'Train and Keep Pod'): Promise<string> {
    const before = new Set(
      fs.existsSync(path.join(workspace.dir, 'runs'))
        ? fs.readdirSync(path.join(workspace.dir, 'runs'))
        : [],
    );
    await workbench.openViewContainer('Overbrainer');
    await workbench.runCommand('Overbrainer: Train');
    const dialog = workbench.page.locator('.monaco-dialog-box');
    await dialog.waitFor({ state: 'visible' });
    const text = await dialog.innerText();
    await dialog.getByRole('button', { name: button, exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
    const id = await eventually('the new run on disk', async () =>
      fs
        .readdirSync(path.join(workspace.dir, 'runs'))
        .find((name) => RUN_ID.test(name) && !before.has(name)),
    );
    (train as { lastDialog?: string }).lastDialog = text;
    return id;
  }

  /** Waits until the run's row in the Runs view says `state`; fails early on another end state. */
  async function untilState(id: string, state: string, timeoutMs = 180_000): Promise<string> {
    let last = '';
    return eventually(
      `run ${id} ${state} in the Runs view`,
      async () => {
        last = await runRow(id).innerText();
        const seen = STATE.exec(last)?.[1];
        if (seen === state) return last;
        if (seen !== undefined && !['preparing', 'running'].includes(seen)) {
          throw new Error(`run ${id} is ${seen}: ${last}`);
        }
        return undefined;
      },
      timeoutMs,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}; its row said: ${JSON.stringify(last)}`);
    });
  }

  before(async function () {
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 100, starting: 100 } });
    workspace = tempDir('journeys-ws');
    const ws = workspace.dir;
    const tiny = path.join(REPO_ROOT, 'examples', 'tiny');
    fs.copyFileSync(path.join(tiny, 'train.py'), path.join(ws, 'train.py'));
    fs.cpSync(path.join(tiny, 'data'), path.join(ws, 'data'), { recursive: true });
    fs.writeFileSync(configFile(), toml({ steps: 20, stepSeconds: 0.1, maxHours: 1 }));
    fs.mkdirSync(path.join(ws, '.vscode'));
    fs.writeFileSync(
      path.join(ws, '.vscode', 'settings.json'),
      JSON.stringify({ 'overbrainer.runpod.baseUrl': emulator.baseUrl }, null, 2),
    );
    extensions = tempDir('journeys-ext');
    const extensionsDir = path.join(extensions.dir, 'extensions');
    await stageBuiltExtension(extensionsDir);
    // The key from VS Code's environment (the palette's key box is the train journey's part).
    server = await CodeServer.start({
      workspace: ws,
      extensionsDir,
      env: {
        OVERBRAINER_TIMING_SCALE: TIMING_SCALE,
        OVERBRAINER_RUNPOD__API_KEY: emulator.apiKey,
        // A browser reload drops the connection without ending the extension host: code-server
        // keeps it for a reconnection (3 h by default), still following its runs and holding
        // their locks. Desktop VS Code ends it on reload; 10 s here comes close, so the reloaded
        // window takes the run over (it looks again at a held lock for a minute). In seconds;
        // code-server's own setting: it overwrites VSCODE_RECONNECTION_GRACE_TIME (set here
        // before, never seen by the extension host, so the reload journey waited on a lock the
        // old window kept).
        CODE_SERVER_RECONNECTION_GRACE_TIME: '10',
      },
    });
    browser = await launchChromium();
    workbench = await Workbench.open(browser, server, this.test?.parent?.title ?? 'journeys');
    await workbench.untilOverbrainerShown();
    // The container shows from the manifest; the commands exist once the extension activated,
    // which its log channel says (on a loaded machine the extension host starts minutes late).
    await eventually(
      'the extension to activate',
      async () => {
        // Before activation the command is not found: close that error dialog and try again.
        const dialog = workbench.page.locator('.monaco-dialog-box');
        if (await dialog.isVisible()) await dialog.getByRole('button').first().click();
        await workbench.showOverbrainerOutput();
        return /Overbrainer \S+ activated/.test(await workbench.outputText()) ? true : undefined;
      },
      300_000,
    );
    await workbench.page.keyboard.press('Escape');
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed')
      await workbench?.screenshot('failed').catch(() => undefined);
  });

  after(async function () {
    await workbench?.close().catch(() => undefined);
    await browser?.close();
    await server?.close();
    const left = emulator ? billing() : [];
    await emulator?.close();
    workspace?.remove();
    extensions?.remove();
    assert.deepEqual(left, [], 'a pod was left billing');
  });

  it('Pick GPU Types: a QuickPick over the live catalog rewrites overbrainer.toml keeping its comments', async function () {
    const before = fs.readFileSync(configFile(), 'utf8');
    await workbench.runCommand('Overbrainer: Pick GPU Types');
    const widget = workbench.page.locator('.quick-input-widget');
    const placeholder = 'GPU types for target pod, in order of preference';
    const input = widget.locator(`input[placeholder="${placeholder}"]`);
    await input.waitFor({ state: 'visible' });
    const rows = widget.locator('.monaco-list-row');
    const a5000 = rows.filter({ hasText: 'NVIDIA RTX A5000' }).first();
    await a5000.waitFor({ state: 'visible' });
    // Each type with its VRAM, price and stock, from the emulator's catalog.
    assert.match(await a5000.innerText(), /24 GB · \$\d+\.\d{2}\/h · stock \w+/);
    await workbench.screenshot('gpu types quickpick');
    await a5000.locator('.monaco-checkbox, input[type="checkbox"]').first().click();
    await input.press('Enter');
    await widget.waitFor({ state: 'hidden' });
    await workbench.waitForNotification(
      'GPU types of pod: NVIDIA GeForce RTX 4090, NVIDIA RTX A5000',
    );
    const after = fs.readFileSync(configFile(), 'utf8');
    assert.equal(
      after,
      before.replace(
        'gpu_types = ["NVIDIA GeForce RTX 4090"]',
        'gpu_types = ["NVIDIA GeForce RTX 4090", "NVIDIA RTX A5000"]',
      ),
      'only the gpu_types value changed: comments and layout kept',
    );
  });

  it('counts down second to second; Keep Pod keeps a running run’s pod past its job; an SSH terminal reaches it; Remove Pod deletes it', async function () {
    // Under an hour to the deadline (the client's guard adds its margin): the countdown shows seconds.
    // The job trains, then waits for the test: the UI may be slow, the job's end is not early.
    fs.writeFileSync(
      configFile(),
      toml({ steps: 20, stepSeconds: 0.25, maxHours: 0.9, gated: true }),
    );
    const id = await train('Train');
    const dialog = (train as { lastDialog?: string }).lastDialog ?? '';
    assert.match(dialog, /GPU types: NVIDIA GeForce RTX 4090/);
    assert.match(dialog, /Hourly rate: \$\d+\.\d{2}\/h on NVIDIA GeForce RTX 4090/);
    assert.match(dialog, /max_hours: 0\.9/);
    assert.match(dialog, /Deadline: /);
    await untilState(id, 'running');

    // The countdown: seconds in the last hour, a new text every second, no API call needed.
    await countdown().waitFor({ state: 'visible' });
    const first = await countdown().innerText();
    const texts = new Set([first]);
    const requestsBefore = emulator.requests().length;
    await eventually('the countdown to change', async () => {
      texts.add(await countdown().innerText());
      return texts.size >= 3 ? true : undefined;
    });
    for (const text of texts) assert.match(text, /\d+m \d{2}s left/);
    console.log(`      countdown: ${[...texts].join(' | ')}`);
    assert.ok(
      emulator.requests().length - requestsBefore <= 2,
      'the countdown makes no API calls (a lookup of the pod at most)',
    );
    await workbench.screenshot('countdown');

    await workbench.runCommand('Overbrainer: Keep Pod');
    await pickQuick(workbench, 'Run to keep the pod of', id);
    await workbench.waitForNotification(new RegExp(`Pod \\S+ of ${id} kept`));
    letJobEnd(id);
    const text = await eventually(
      'the run to end with its pod kept',
      async () => {
        // A kept run's row says `pod kept`; that its job succeeded is in run.json.
        const row = await runRow(id).innerText();
        const record = JSON.parse(
          fs.readFileSync(path.join(workspace.dir, 'runs', id, 'run.json'), 'utf8'),
        ) as { state?: string };
        return record.state === 'succeeded' && /kept/.test(row) ? row : undefined;
      },
      180_000,
    );
    assert.match(text, /kept/);
    await workbench.screenshot('kept after the job');
    const podId = JSON.parse(
      fs.readFileSync(path.join(workspace.dir, 'runs', id, 'pod.json'), 'utf8'),
    ).pod_id as string;
    assert.deepEqual(billing(), [podId], 'the kept pod survives the end of its job');

    await workbench.runCommand('Overbrainer: Open SSH Terminal');
    await pickQuick(workbench, 'Run to open a terminal on', id);
    const panel = workbench.page.locator('.part.panel');
    await panel.getByText(`Overbrainer ${id}`).first().waitFor({ state: 'visible' });
    const terminal = panel.locator('.terminal-wrapper .xterm').first();
    await terminal.waitFor({ state: 'visible' });
    const proof = path.join(emulator.pod(podId)!.dirs.workspace, 'ob-e2e-proof');
    // Typed into the pod's shell over `ssh -F runs/<id>/ssh/config overbrainer-<id>`: the file
    // appears in the emulator pod's /workspace.
    await eventually(
      'a command typed into the SSH terminal to run on the pod',
      async () => {
        await terminal.click();
        await workbench.page.keyboard.type('echo "$(hostname)" > /workspace/ob-e2e-proof\n');
        await new Promise((resolve) => setTimeout(resolve, 1500));
        return fs.existsSync(proof) ? true : undefined;
      },
      60_000,
    );
    await workbench.screenshot('ssh terminal');
    // Leave the pod's shell: the terminal ends and its panel closes now, not whenever the ssh
    // session notices the pod is gone (closing then, it took the focus from the next command's
    // palette: the palette shut before its command was picked).
    await terminal.click();
    await workbench.page.keyboard.type('exit\n');
    await terminal.waitFor({ state: 'detached' });

    await workbench.runCommand('Overbrainer: Remove Pod');
    await pickQuick(workbench, 'Run to remove the pods of', id);
    const confirm = workbench.page.locator('.monaco-dialog-box');
    await confirm.waitFor({ state: 'visible' });
    assert.match(await confirm.innerText(), /even a kept one/);
    await confirm.getByRole('button', { name: 'Remove Pod', exact: true }).click();
    await workbench.waitForNotification(new RegExp(`Deleted ${podId} of ${id}`));
    await eventually('no pod billing', async () => (billing().length === 0 ? true : undefined));
    await workbench.screenshot('pod removed');
  });

  it('a job too slow for its max_hours warns once (Keep Pod / Open Run), the countdown turns to warning; Cancel Run cancels it and deletes its pod', async function () {
    // 6000 steps of 0.25 s need 25 min; max_hours 0.3 gives the pod 18 min.
    fs.writeFileSync(configFile(), toml({ steps: 6000, stepSeconds: 0.25, maxHours: 0.3 }));
    const id = await train('Train');
    await untilState(id, 'running');
    const overrun = await workbench.waitForNotification(/past max_hours/);
    const actions = await overrun.locator('.monaco-button').allInnerTexts();
    assert.deepEqual(
      actions.map((a) => a.trim()),
      ['Keep Pod', 'Open Run'],
    );
    // The ETA passes the deadline: the countdown shows it with the warning background.
    await workbench.page
      .locator('.statusbar-item.warning-kind', { hasText: /left/ })
      .first()
      .waitFor({ state: 'visible' });
    await workbench.screenshot('overrun');
    // Toasts hide after a while: the notification center keeps every notification shown.
    await new Promise((resolve) => setTimeout(resolve, 4000));
    await workbench.runCommand('Notifications: Show Notifications');
    const center = workbench.page.locator('.notifications-center');
    await center.waitFor({ state: 'visible' });
    assert.equal(
      await center.locator('.notification-list-item', { hasText: /past max_hours/ }).count(),
      1,
      'the overrun is said once per run',
    );
    await workbench.page.keyboard.press('Escape');

    const podId = JSON.parse(
      fs.readFileSync(path.join(workspace.dir, 'runs', id, 'pod.json'), 'utf8'),
    ).pod_id as string;
    await workbench.runCommand('Overbrainer: Cancel Run');
    await pickQuick(workbench, 'Run to cancel', id);
    const confirm = workbench.page.locator('.monaco-dialog-box');
    await confirm.waitFor({ state: 'visible' });
    await confirm.getByRole('button', { name: 'Cancel Run', exact: true }).click();
    await workbench.waitForNotification(new RegExp(`Run ${id} cancelled`));
    await untilState(id, 'cancelled', 60_000);
    await workbench.screenshot('cancelled');
    assert.ok(!billing().includes(podId), 'the cancelled run’s pod is deleted');
    const pod = JSON.parse(
      fs.readFileSync(path.join(workspace.dir, 'runs', id, 'pod.json'), 'utf8'),
    ) as { state: string };
    assert.equal(pod.state, 'deleted');
    await countdown().waitFor({ state: 'detached' });
  });

  it('Stop and Snapshot stops a run with its checkpoint home; Resume Run continues it to its last step', async function () {
    const steps = 400;
    fs.writeFileSync(configFile(), toml({ steps, stepSeconds: 0.05, maxHours: 1 }));
    const id = await train('Train');
    await untilState(id, 'running');
    await workbench.runCommand('Overbrainer: Stop and Snapshot');
    await pickQuick(workbench, 'Run to stop with a snapshot', id);
    await workbench.waitForNotification(new RegExp(`Run ${id} saves a snapshot`));
    await untilState(id, 'stopped', 120_000);
    const ended = await workbench.waitForNotification(new RegExp(`Run ${id} stopped at step \\d+`));
    const actions = await ended.locator('.monaco-button').allInnerTexts();
    assert.deepEqual(
      actions.map((a) => a.trim()),
      ['Resume Run', 'Open Run'],
    );
    await workbench.screenshot('stopped with a snapshot');
    const runDir = path.join(workspace.dir, 'runs', id);
    const stopped = JSON.parse(fs.readFileSync(path.join(runDir, 'run.json'), 'utf8')) as {
      snapshot: { checkpoint: string; step: number; reason: string };
    };
    assert.equal(stopped.snapshot.reason, 'requested');
    assert.ok(stopped.snapshot.step < steps, `stopped at ${stopped.snapshot.step}`);
    assert.ok(fs.existsSync(path.join(runDir, stopped.snapshot.checkpoint, 'model.json')));
    await eventually('the stopped run’s pod deleted', async () =>
      billing().includes(podOf(id)) ? undefined : true,
    );

    const before = new Set(fs.readdirSync(path.join(workspace.dir, 'runs')));
    await ended.getByRole('button', { name: 'Resume Run', exact: true }).click();
    const dialog = workbench.page.locator('.monaco-dialog-box');
    await dialog.waitFor({ state: 'visible' });
    assert.match(
      await dialog.innerText(),
      new RegExp(`Resume ${id} from step ${stopped.snapshot.step}`),
    );
    await dialog.getByRole('button', { name: 'Train', exact: true }).click();
    const next = await eventually('the resumed run on disk', async () =>
      fs
        .readdirSync(path.join(workspace.dir, 'runs'))
        .find((name) => RUN_ID.test(name) && !before.has(name)),
    );
    await untilState(next, 'succeeded');
    const nextDir = path.join(workspace.dir, 'runs', next);
    const resumed = JSON.parse(fs.readFileSync(path.join(nextDir, 'run.json'), 'utf8')) as {
      resumed_from: string;
    };
    assert.equal(resumed.resumed_from, id);
    const model = JSON.parse(
      fs.readFileSync(path.join(nextDir, 'output', 'model.json'), 'utf8'),
    ) as { step: number };
    assert.equal(model.step, steps, 'the resumed run reached the last step');
    await workbench.screenshot('resumed and succeeded');
    await eventually('the resumed run’s pod deleted', async () =>
      billing().includes(podOf(next)) ? undefined : true,
    );
  });

  it('Reload Window mid-run: following resumes by itself and the run succeeds', async function () {
    // Gated: the job ends only once the reloaded window follows it again.
    fs.writeFileSync(
      configFile(),
      toml({ steps: 40, stepSeconds: 0.25, maxHours: 1, gated: true }),
    );
    const id = await train('Train');
    await untilState(id, 'running');
    await countdown().waitFor({ state: 'visible' });
    const reloaded = workbench.page.waitForEvent('load', { timeout: 120_000 });
    await workbench.runCommand('Developer: Reload Window');
    // The old workbench goes away; the new one follows the run again without being asked.
    await reloaded;
    await workbench.page.locator('.monaco-workbench').waitFor({ state: 'visible' });
    await countdown()
      .waitFor({ state: 'visible', timeout: 120_000 })
      .catch((error: unknown) => {
        // Who holds the run: the reloaded window resumes only once the old one let go.
        throw new Error(`${String(error)}; the run's lock: ${lockState(id)}`);
      });
    await workbench.screenshot('following again after reload');
    letJobEnd(id);
    await workbench.openViewContainer('Overbrainer');
    await untilState(id, 'succeeded');
    await workbench.waitForNotification(new RegExp(`Run ${id} succeeded`));
    await countdown().waitFor({ state: 'detached' });
    await workbench.screenshot('succeeded after reload');
    assert.ok(fs.readdirSync(path.join(workspace.dir, 'runs', id, 'output')).length > 0);
    // This run's pod: an earlier journey's failure must not be reported here as well.
    const podId = JSON.parse(
      fs.readFileSync(path.join(workspace.dir, 'runs', id, 'pod.json'), 'utf8'),
    ).pod_id as string;
    await eventually("the run's pod no longer billing", async () =>
      billing().includes(podId) ? undefined : true,
    );
  });
});
