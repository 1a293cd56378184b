import * as assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { systemClock } from '../../src/core/clock';
import { sweepHolder } from '../../src/core/sweep/records';
import { ROOT, runCliProcess, startCli } from '../helpers/cli';
import { descendantsOf } from '../helpers/processes';
import { emulatorEnv } from '../helpers/tinyWorkspace';
import { eventually } from './harness';
import { pickFromCommand, tinyToml, type E2eWindow } from './window';

/**
 * Issue #38 in the real VS Code against the Runpod emulator and the real Optuna (/usr/bin/python3
 * with Debian's python3-optuna, set as overbrainer.sweepPython): Start Sweep quotes the sweep in
 * its modal, runs its trials on emulated pods and says its end with the best trial; the Sweeps view
 * lists it and its trials, and a click on its row opens its page. No pod is left billing (the
 * window's own check).
 *
 * And one sweep from either client, in the same window (a window is most of an e2e file's CPU):
 * the CLI (`node dist/cli.js`, the built bundle) sees the sweep VS Code runs and is refused its
 * attach naming VS Code's extension host, then attaches the ended sweep with VS Code's best; a
 * sweep the CLI starts shows in the Sweeps view, VS Code's Attach Sweep takes it over once the CLI
 * was killed, and Stop Sweep stops its trials. (That an attach is refused while the CLI lives is
 * sweepAttach.integration's; here the window's wall time is its CPU.)
 *
 * In the new user's window, after their journeys (./newUser.e2e.test.ts: they were a window of
 * their own, and a window is most of an e2e file's CPU): the key is the one they set through the
 * palette, the first journey writes the sweep's overbrainer.toml and train.py, and the pods
 * counted are those made since it began.
 */
const SWEEP = 'e2e-sweep';
/** The sweep the CLI starts (the workspace's [sweep] renamed after the first one). */
const CLI_SWEEP = 'e2e-cli';
const PYTHON = '/usr/bin/python3';

/** The file in a pod's /workspace that lets its trial's job end (after its training). */
const GATE = 'ob-e2e-go';

/**
 * The workspace's overbrainer.toml: sweep `name`, each trial's job 10 steps of 0.05 s, then held
 * until the test writes {@link GATE} on its pod: the CLI looks at a sweep whose trials surely
 * run, and a stopped trial is stopped mid-job, with no length of training to wait out.
 */
function sweepToml(name: string): string {
  return tinyToml(
    `python3 train.py --steps 10 --step-seconds 0.05 --eval-every 5 --learning-rate {learning_rate} --lora-r {lora_r} && while [ ! -e /workspace/${GATE} ]; do sleep 0.2; done`,
    `max_cost_usd = 0.5

[sweep]
name = "${name}"
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
  );
}

interface TrialJson {
  number: number;
  run_id: string | null;
  state: string;
  params: Record<string, unknown>;
  message: string | null;
}
interface SweepJson {
  name: string;
  state: string;
  end: string | null;
  trials: TrialJson[];
}

/** The window's machine settings the sweeps need: the Python with Optuna, set as a user would. */
export const SWEEP_MACHINE_SETTINGS = { 'overbrainer.sweepPython': PYTHON };

/**
 * Registers the sweep journeys in `window` (timings at 1/8, its machine settings
 * {@link SWEEP_MACHINE_SETTINGS}, the emulator's key set in VS Code by the journeys before).
 */
export function sweepJourneys(window: E2eWindow): void {
  const children = new Set<ChildProcess>();
  afterEach(() => {
    for (const child of children) child.kill('SIGKILL');
  });

  /** The CLI's environment: the emulator's key, URL and timing scale (the window's), the Python. */
  const cliEnv = (): Record<string, string> => ({
    ...emulatorEnv(window.emulator, '8'),
    OVERBRAINER_SWEEP_PYTHON: PYTHON,
  });
  const cli = (args: string[]) =>
    runCliProcess(['-C', window.workspace.dir, ...args], { env: cliEnv(), children });
  const showJson = async (name: string): Promise<SweepJson> => {
    const ran = await cli(['sweep', 'show', name, '--json']);
    assert.equal(ran.code, 0, ran.stderr);
    return JSON.parse(ran.stdout) as SweepJson;
  };
  const runState = (id: string): string =>
    (
      JSON.parse(
        fs.readFileSync(path.join(window.workspace.dir, 'runs', id, 'run.json'), 'utf8'),
      ) as { state: string }
    ).state;
  /** Waits until both trials of sweep `name` run their jobs (its sweep.json and their run.json). */
  const untilTrialsRun = (name: string): Promise<TrialJson[]> =>
    eventually(
      `both trials of ${name} running their jobs`,
      async () => {
        const file = path.join(window.workspace.dir, 'runs', 'sweeps', name, 'sweep.json');
        const record = JSON.parse(await fs.promises.readFile(file, 'utf8')) as SweepJson;
        const ids = record.trials.map((t) => t.run_id);
        if (ids.length !== 2 || ids.some((id) => id === null || runState(id) !== 'running'))
          return undefined;
        return record.trials;
      },
      180_000,
    );

  it('Start Sweep quotes it, runs both trials on pods and says its end; the view lists it and its row opens its page', async function () {
    const { emulator, workbench, workspace } = window;
    // The journeys before left their editors, notifications and pods (deleted).
    await workbench.runCommand('View: Close All Editors');
    await workbench.runCommand('Notifications: Clear All Notifications');
    const podsBefore = new Set(emulator.ledger().pods.map((p) => p.id));
    const newPods = () => emulator.ledger().pods.filter((p) => !podsBefore.has(p.id));
    // The sweep's job: examples/sweep/train.py (its eval_loss a known function of its params).
    fs.copyFileSync(
      path.join(ROOT, 'examples', 'sweep', 'train.py'),
      path.join(workspace.dir, 'train.py'),
    );
    fs.writeFileSync(path.join(workspace.dir, 'overbrainer.toml'), sweepToml(SWEEP));
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

    // While VS Code runs it, the CLI sees its trials, and its attach is refused naming the client
    // that runs it: this window's extension host.
    const running = await untilTrialsRun(SWEEP);
    const seen = await showJson(SWEEP);
    assert.equal(seen.state, 'running');
    assert.deepEqual(
      seen.trials.map((t) => [t.number, t.run_id]),
      running.map((t) => [t.number, t.run_id]),
    );
    const refused = await cli(['sweep', 'attach', SWEEP]);
    assert.notEqual(refused.code, 0, refused.stdout);
    const holder = new RegExp(
      `sweep ${SWEEP} is run by another client \\(pid (\\d+), VS Code window\\)`,
    ).exec(refused.stderr);
    assert.ok(holder !== null, refused.stderr);
    const host = descendantsOf().find((p) => p.pid === Number(holder[1]));
    assert.match(
      host?.cmdline ?? '',
      /--type=extensionHost/,
      `pid ${holder[1]} is not this window's extension host`,
    );
    // Then the trials' jobs may end.
    for (const pod of newPods())
      fs.writeFileSync(path.join(emulator.pod(pod.id)!.dirs.workspace, GATE), '');

    const end = await workbench.waitForNotification(
      new RegExp(`sweep ${SWEEP} ended: all 2 trials ran; best eval_loss`),
      300_000,
    );
    const endWords = await end.innerText();
    assert.match(endWords, /trial \d, \{"learning_rate":.*"lora_r":\d+\}.*spent \$\d/);
    await workbench.screenshot('the sweep ended');
    assert.equal(newPods().length, 2, 'one pod per trial');

    // The CLI attaches the ended sweep: the same trials, the same best as VS Code said.
    const attached = await cli(['sweep', 'attach', SWEEP]);
    assert.equal(attached.code, 0, attached.stderr);
    assert.match(attached.stdout, new RegExp(`sweep ${SWEEP}: ended \\(trials\\)`));
    const best = /best: trial (\d), eval_loss [\d.e-]+, (\{.*?\}) \(run/.exec(attached.stdout);
    assert.ok(best !== null, attached.stdout);
    assert.ok(
      endWords.includes(`(trial ${best[1]}, ${best[2]})`),
      `${endWords}\n${attached.stdout}`,
    );
    assert.deepEqual(
      (await showJson(SWEEP)).trials.map((t) => [t.number, t.run_id, t.state]),
      running.map((t) => [t.number, t.run_id, 'complete']),
    );

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

  it('a sweep the CLI starts shows in the Sweeps view; Attach Sweep takes it over once the CLI died, and Stop Sweep stops it', async function () {
    const { emulator, workbench } = window;
    // Its trials' jobs held at their gate until stopped.
    fs.writeFileSync(path.join(window.workspace.dir, 'overbrainer.toml'), sweepToml(CLI_SWEEP));
    const started = startCli(['-C', window.workspace.dir, 'sweep', 'start'], {
      env: cliEnv(),
      children,
    });
    const running = await untilTrialsRun(CLI_SWEEP);

    await workbench.runCommand('Overbrainer: Refresh Sweeps');
    const pane = workbench.viewPane('Sweeps');
    const row = pane.locator('.monaco-list-row', { hasText: CLI_SWEEP }).first();
    await row.waitFor({ state: 'visible' });
    assert.match(await row.innerText(), /running · 2\/2 trials/);
    await pane
      .locator('.monaco-list-row', { hasText: /#\d RUNNING/ })
      .nth(1)
      .waitFor();

    // The CLI dies; VS Code takes the sweep over: its lock is the extension host's now.
    started.child.kill('SIGKILL');
    await started.done;
    await pickFromCommand(workbench, 'Overbrainer: Attach Sweep', 'Sweep', CLI_SWEEP);
    // (Its lock read, not tried: a CLI's attach would take the dead CLI's sweep itself.)
    const runsDir = path.join(window.workspace.dir, 'runs');
    const holder = await eventually('VS Code to hold the sweep', () =>
      Promise.resolve(sweepHolder(runsDir, CLI_SWEEP, systemClock) ?? undefined),
    );
    assert.equal(holder.owner, 'VS Code window');
    const host = descendantsOf().find((p) => p.pid === holder.pid);
    assert.match(
      host?.cmdline ?? '',
      /--type=extensionHost/,
      `pid ${holder.pid} is no extension host`,
    );

    // Stop Sweep: the attach that follows it stops its trials and ends it `stopped`.
    await pickFromCommand(workbench, 'Overbrainer: Stop Sweep', 'Sweep', CLI_SWEEP);
    await workbench.waitForNotification(
      new RegExp(`sweep ${CLI_SWEEP} ended: stopped on request`),
      180_000,
    );
    const stopped = await showJson(CLI_SWEEP);
    assert.equal(stopped.state, 'ended');
    assert.equal(stopped.end, 'stopped');
    assert.deepEqual(
      stopped.trials.map((t) => [t.number, t.run_id, t.state, t.message]),
      running.map((t) => [t.number, t.run_id, 'fail', 'stopped with the sweep (`sweep stop`)']),
    );
    for (const t of running) assert.equal(runState(t.run_id!), 'cancelled');
    const runIds = running.map((t) => t.run_id);
    const billing = emulator
      .ledger()
      .pods.filter((p) => runIds.includes(p.runId) && p.billing)
      .map((p) => p.id);
    assert.deepEqual(billing, [], 'the stopped trials left no pod billing');
    await workbench.screenshot('the CLI sweep stopped in VS Code');
  });
}
