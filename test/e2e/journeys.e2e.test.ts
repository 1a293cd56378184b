import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { eventually } from './harness';
import { billingPods, countdown, lockState, RUN_ID, runRow, untilState } from './runRows';
import { untilActivated } from './extensionLogs';
import { spendLogsRecoveryCrash } from './oneWindowJourneys';
import { confirmTrain, pickFromCommand, useWindow, type E2eWindow } from './window';

/**
 * The user's journeys beyond a plain Train, in the real VS Code against the Runpod emulator, one
 * code-server for all of them: Pick GPU Types rewrites overbrainer.toml keeping its comments; the
 * status bar counts down second to second; Keep Pod on a running run keeps the pod past the job,
 * an SSH terminal reaches it, Remove Pod deletes it; an overrun warns once and the countdown turns
 * to the warning background; Cancel Run cancels mid-job and deletes the pod; Stop and Snapshot
 * stops a run with its checkpoint home and Resume Run continues it; Reload Window mid-run
 * resumes following by itself. Before them the Spend journey, after them pod logs, a recovered
 * run and the extension host's crash (./oneWindowJourneys.ts: they were a window of their own; a
 * window costs about 14 CPU-s to its extension's activation). Timings: production divided by
 * OVERBRAINER_TIMING_SCALE.
 */
const TIMING_SCALE = '8';

interface Job {
  steps: number;
  stepSeconds: number;
  maxHours: number;
  /** After training, the job waits until the test lets it end (see `letJobEnd`). */
  gated?: boolean;
  /**
   * After this step, training waits until the test lets it go on (the same gate file), still
   * honouring a snapshot request: a run that must be acted on mid-job cannot end first.
   */
  holdAt?: number;
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
command = "python3 train.py --steps ${job.steps} --step-seconds ${job.stepSeconds}${job.holdAt ? ` --hold-at ${job.holdAt} --hold-file /workspace/${GATE}` : ''}${job.gated ? ` && while [ ! -e /workspace/${GATE} ]; do sleep 0.2; done` : ''}"
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

describe('User journeys in the real VS Code against the Runpod emulator', function () {
  this.timeout(420_000);
  const window = useWindow({
    name: 'journeys',
    toml: toml({ steps: 20, stepSeconds: 0.1, maxHours: 1 }),
    // The key from VS Code's environment (the palette's key box is the train journey's part).
    timingScale: TIMING_SCALE,
    apiKeyInEnv: true,
    env: {
      // A browser reload drops the connection without ending the extension host: code-server
      // keeps it for a reconnection (3 h by default), still following its runs and holding
      // their locks. Desktop VS Code ends it on reload; 10 s here comes close, so the reloaded
      // window takes the run over (it looks again at a held lock for a minute). In seconds;
      // code-server's own setting: it overwrites VSCODE_RECONNECTION_GRACE_TIME (set here
      // before, never seen by the extension host, so the reload journey waited on a lock the
      // old window kept).
      CODE_SERVER_RECONNECTION_GRACE_TIME: '10',
      // code-server resolves no login shell (VSCODE_CLI), but a terminal's shell is this one.
      SHELL: '/bin/sh',
    },
  });
  // Not destructured: useWindow's `before` fills these in.
  let emulator: E2eWindow['emulator'];
  let workspace: E2eWindow['workspace'];
  let workbench: E2eWindow['workbench'];

  const configFile = (): string => path.join(workspace.dir, 'overbrainer.toml');
  const billing = (): string[] => billingPods(emulator);
  const runDir = (id: string): string => path.join(workspace.dir, 'runs', id);

  const podOf = (id: string): string =>
    (
      JSON.parse(fs.readFileSync(path.join(workspace.dir, 'runs', id, 'pod.json'), 'utf8')) as {
        pod_id: string;
      }
    ).pod_id;

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
    const text = await confirmTrain(workbench, button);
    await workbench.page.locator('.monaco-dialog-box').waitFor({ state: 'hidden' });
    const id = await eventually('the new run on disk', async () =>
      fs
        .readdirSync(path.join(workspace.dir, 'runs'))
        .find((name) => RUN_ID.test(name) && !before.has(name)),
    );
    (train as { lastDialog?: string }).lastDialog = text;
    return id;
  }

  before(async function () {
    ({ emulator, workspace, workbench } = window);
    await workbench.untilOverbrainerShown();
    await untilActivated(window.server.logsDir, 300_000);
  });

  // Spend first: its refusal names what is left of the day's budget, all of it before any run.
  const later = spendLogsRecoveryCrash(window);
  later.spend();

  it('Pick GPU Types: a QuickPick over the live catalog rewrites overbrainer.toml keeping its comments', async function () {
    // The journeys' toml again (the Spend journey wrote its own).
    fs.writeFileSync(configFile(), toml({ steps: 20, stepSeconds: 0.1, maxHours: 1 }));
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
    await untilState(workbench, id, 'running', 180_000);

    // The countdown: seconds in the last hour, a new text every second, no API call needed.
    await countdown(workbench).waitFor({ state: 'visible' });
    const first = await countdown(workbench).innerText();
    const texts = new Set([first]);
    const requestsBefore = emulator.requests().length;
    await eventually('the countdown to change', async () => {
      texts.add(await countdown(workbench).innerText());
      return texts.size >= 3 ? true : undefined;
    });
    for (const text of texts) assert.match(text, /\d+m \d{2}s left/);
    console.log(`      countdown: ${[...texts].join(' | ')}`);
    assert.ok(
      emulator.requests().length - requestsBefore <= 2,
      'the countdown makes no API calls (a lookup of the pod at most)',
    );
    await workbench.screenshot('countdown');

    await pickFromCommand(workbench, 'Overbrainer: Keep Pod', 'Run to keep the pod of', id);
    await workbench.waitForNotification(new RegExp(`Pod \\S+ of ${id} kept`));
    letJobEnd(id);
    const text = await eventually(
      'the run to end with its pod kept',
      async () => {
        // A kept run's row says `pod kept`; that its job succeeded is in run.json.
        const row = await runRow(workbench, id).innerText();
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

    await pickFromCommand(
      workbench,
      'Overbrainer: Open SSH Terminal',
      'Run to open a terminal on',
      id,
    );
    const panel = workbench.page.locator('.part.panel');
    await panel.getByText(`Overbrainer ${id}`).first().waitFor({ state: 'visible' });
    const terminal = panel.locator('.terminal-wrapper .xterm').first();
    await terminal.waitFor({ state: 'visible' });
    const proof = path.join(emulator.pod(podId)!.dirs.workspace, 'ob-e2e-proof');
    // Typed into the pod's shell over `ssh -F none …` (every option on its command line): the file
    // appears in the emulator pod's /workspace.
    await eventually(
      'a command typed into the SSH terminal to run on the pod',
      async () => {
        await terminal.click();
        await workbench.page.keyboard.type('echo "$(hostname)" > /workspace/ob-e2e-proof\n');
        // Typed again only if the file has not come in 5 s (keys lost while the shell started).
        return eventually(
          'the proof file',
          async () => (fs.existsSync(proof) ? true : undefined),
          5_000,
        ).catch(() => undefined);
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

    await pickFromCommand(workbench, 'Overbrainer: Remove Pod', 'Run to remove the pods of', id);
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
    await untilState(workbench, id, 'running', 180_000);
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
    // Every metric the client takes in checks the pace against the deadline again: a second
    // warning would come with the job's next metrics. The 16 after the warning (4 s of steps),
    // counted in the pod's metrics.jsonl: progress, not time (a stalled job proves nothing).
    // The notification center keeps every notification shown (toasts hide after a while).
    const metrics = path.join(
      emulator.pod(podOf(id))!.dirs.workspace,
      'overbrainer',
      id,
      'metrics.jsonl',
    );
    const written = (): number =>
      fs.existsSync(metrics) ? fs.readFileSync(metrics, 'utf8').split('\n').length - 1 : 0;
    const atWarning = written();
    assert.ok(atWarning > 0, `the job's metrics at ${metrics}`);
    await eventually('16 more metrics after the warning', async () =>
      written() >= atWarning + 16 ? true : undefined,
    );
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
    await pickFromCommand(workbench, 'Overbrainer: Cancel Run', 'Run to cancel', id);
    const confirm = workbench.page.locator('.monaco-dialog-box');
    await confirm.waitFor({ state: 'visible' });
    await confirm.getByRole('button', { name: 'Cancel Run', exact: true }).click();
    await workbench.waitForNotification(new RegExp(`Run ${id} cancelled`));
    await untilState(workbench, id, 'cancelled', 60_000);
    await workbench.screenshot('cancelled');
    assert.ok(!billing().includes(podId), 'the cancelled run’s pod is deleted');
    const pod = JSON.parse(
      fs.readFileSync(path.join(workspace.dir, 'runs', id, 'pod.json'), 'utf8'),
    ) as { state: string };
    assert.equal(pod.state, 'deleted');
    await countdown(workbench).waitFor({ state: 'detached' });
  });

  it('Stop and Snapshot stops a run with its checkpoint home; Resume Run continues it to its last step', async function () {
    // Held after step 20 until the snapshot request: on a loaded machine the job once ended
    // before the pick to stop it was shown (it then listed no running run).
    const steps = 40;
    fs.writeFileSync(configFile(), toml({ steps, stepSeconds: 0.05, maxHours: 1, holdAt: 20 }));
    const id = await train('Train');
    await untilState(workbench, id, 'running', 180_000);
    // While the notification center is open VS Code shows no toast: an earlier look may have
    // opened it (and the one just below does when it sees no toast in 5 s).
    const closeCenter = async (): Promise<void> => {
      if (await workbench.page.locator('.notifications-center').isVisible()) {
        await workbench.page.locator('[id="status.notifications"]').click();
      }
    };
    await closeCenter();
    // The end, with Resume Run, as a toast: one the user sees, not only in the notification
    // center (VS Code drops a toast that comes within 800 ms after three others). The ask's
    // progress and its answer ("saves a snapshot") last as long as the stop: a quick stop ends
    // them before a look sees them (CIs saw neither), and a look that finds no toast opens the
    // notification center, where the end's notification then goes instead. So the end alone is
    // looked for.
    const ended = workbench.notification(new RegExp(`Run ${id} stopped at step \\d+`)).first();
    const toasted = ended.waitFor({ state: 'visible', timeout: 180_000 });
    toasted.catch(() => undefined); // awaited below, after the state
    await pickFromCommand(
      workbench,
      'Overbrainer: Stop and Snapshot',
      'Run to stop with a snapshot',
      id,
    );
    await untilState(workbench, id, 'stopped', 120_000);
    await toasted;
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
    await untilState(workbench, next, 'succeeded', 180_000);
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
    await untilState(workbench, id, 'running', 180_000);
    await countdown(workbench).waitFor({ state: 'visible' });
    // The old workbench goes away; the new one follows the run again without being asked.
    await workbench.reloadWindow(120_000);
    await countdown(workbench)
      .waitFor({ state: 'visible', timeout: 120_000 })
      .catch((error: unknown) => {
        // Who holds the run: the reloaded window resumes only once the old one let go.
        throw new Error(`${String(error)}; the run's lock: ${lockState(runDir(id))}`);
      });
    await workbench.screenshot('following again after reload');
    letJobEnd(id);
    await workbench.openViewContainer('Overbrainer');
    await untilState(workbench, id, 'succeeded', 180_000);
    await workbench.waitForNotification(new RegExp(`Run ${id} succeeded`));
    await countdown(workbench).waitFor({ state: 'detached' });
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

  // Each judges only what it made; the extension host's crash is the last.
  later.rest();
});
