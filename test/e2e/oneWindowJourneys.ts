import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { eventually, runPage, UI_TIMEOUT_MS } from './harness';
import { crashToml, extensionHostCrash } from './crashJourney';
import { RUN_ID } from './runRows';
import { confirmTrain, pickFromCommand, tinyToml, type E2eWindow } from './window';

/**
 * Four journeys that need the same window as ./journeys.e2e.test.ts's (timings at 1/8, the key in
 * VS Code's environment), after them in it: a window costs about 14 CPU-s to its extension's
 * activation, more than each of these journeys, and the e2e tier runs beside the integration
 * files on 2 cores. Each journey writes its own overbrainer.toml, starts with no editor or
 * notification left by the one before, and judges only what it made: the runs added to runs/,
 * the emulator's requests and pods since it began (`begin`).
 *
 * 1. Spend (#16): Train's confirmation quotes the run (the hourly rate, the expected range, the
 *    worst case), and a `[budget]` smaller than the run's worst case makes Train refuse with the
 *    figures, before any pod exists.
 * 2. Pod logs: a pod whose sshd never answers boots; while it does, the run view (opened by
 *    Train) shows its boot log's last lines in place of the chart; Cancel Run in the view ends it
 *    (the boot log leaves the view); then Show Logs from the palette picks the run and opens its
 *    captured pod log as a read-only document.
 * 3. Recovery (#19): the pod is deleted mid-run (as Runpod may); the run goes on by itself on a
 *    new pod from its last checkpoint. The notification says so, the run page shows the
 *    attempts, the Runs tree has a row per attempt, and the run ends succeeded with its results
 *    home.
 * 4. The extension host killed mid-run (#7, ./crashJourney.ts), last: its restarted host must
 *    follow the run again by itself to its verified end.
 *
 * Timings: the production constants divided by OVERBRAINER_TIMING_SCALE.
 */
const DAILY_BUDGET_USD = 0.01;
const RECOVERY_STEPS = 60;

/**
 * The four journeys for `window` (timings at 1/8, the emulator's key in VS Code's environment):
 * `spend` registers the first, which must be the window's first run of the day's budget (its
 * refusal names what is left of it: all of it); `rest` the three others, the extension host's
 * crash last.
 */
export function spendLogsRecoveryCrash(window: E2eWindow): { spend: () => void; rest: () => void } {
  interface Start {
    /** The run folders before the journey. */
    runs: Set<string>;
    /** How many requests the emulator had answered. */
    requests: number;
    /** The emulator's pods (any state). */
    pods: Set<string>;
  }

  const runsDir = (): string => path.join(window.workspace.dir, 'runs');
  const runFolders = (): string[] => (fs.existsSync(runsDir()) ? fs.readdirSync(runsDir()) : []);

  /**
   * A journey's start: the editors and notifications of the one before closed (as a user tidies
   * up), its own overbrainer.toml, and what it will judge against.
   */
  async function begin(toml: string): Promise<Start> {
    const { workbench, workspace, emulator } = window;
    await workbench.runCommand('View: Close All Editors');
    await workbench.runCommand('Notifications: Clear All Notifications');
    await workbench.page.locator('.notification-toast').first().waitFor({ state: 'detached' });
    fs.writeFileSync(path.join(workspace.dir, 'overbrainer.toml'), toml);
    return {
      runs: new Set(runFolders()),
      requests: emulator.requests().length,
      pods: new Set(emulator.ledger().pods.map((p) => p.id)),
    };
  }

  /** The emulator's requests since `start`. */
  const requestsSince = (start: Start) => window.emulator.requests().slice(start.requests);

  /** The run the journey's Train made (the first run folder that was not there at its start). */
  const newRun = (start: Start): Promise<string> =>
    eventually('the new run on disk', async () =>
      runFolders().find((name) => RUN_ID.test(name) && !start.runs.has(name)),
    );

  const spend = (): void => {
    it('Spend: the confirmation shows the quote; a budget below the worst case refuses with its figures and creates no pod', async function () {
      const { emulator, workbench } = window;
      await workbench.untilOverbrainerShown();
      const start = await begin(`${tinyToml('python3 train.py --steps 5 --step-seconds 0.05')}
[budget]
max_usd_per_day = ${DAILY_BUDGET_USD}
`);
      await workbench.openViewContainer('Overbrainer');
      await confirmTrain(workbench, 'Train', async (words) => {
        assert.match(words, /Hourly rate: \$\d+\.\d\d\/h on NVIDIA GeForce RTX 4090/);
        assert.match(words, /Expected: .*\$\d+\.\d\d/);
        assert.match(words, /Worst case: .*\$\d+\.\d\d/);
        await workbench.screenshot('the quote in the confirmation');
      });

      const toast = await workbench.waitForNotification('would pass what is left of the budget');
      const refusal = await toast.innerText();
      assert.match(
        refusal,
        /worst case \$\d+\.\d\d would pass what is left of the budget, \$0\.01/,
      );
      await workbench.screenshot('the budget refusal');
      assert.deepEqual(
        requestsSince(start).filter((r) => r.route === 'createPod'),
        [],
        'no pod was asked for',
      );
      assert.deepEqual(
        emulator.ledger().pods.filter((p) => !start.pods.has(p.id)),
        [],
        'the emulator holds no new pod',
      );
    });
  };

  const rest = (): void => {
    it('Pod logs: the boot log in the run view while the pod boots, then the kept pod log by Show Logs', async function () {
      const { emulator, workbench } = window;
      const start = await begin(tinyToml('python3 train.py --steps 5 --step-seconds 0.05'));
      // The next pod's sshd refuses connections: it boots, logs, and never answers SSH.
      await emulator.faults.sshdNeverStarts('closed');
      await confirmTrain(workbench);

      // Train opens the run view; while the pod boots its log's last lines replace the chart.
      const page = runPage(workbench);
      const boot = page.locator('#boot-log');
      await boot
        .filter({ hasText: /container start #1/ })
        .waitFor({ state: 'visible', timeout: UI_TIMEOUT_MS });
      assert.equal(
        await page.locator('#chart').isVisible(),
        false,
        'the chart is hidden meanwhile',
      );
      assert.ok(!(await boot.innerText()).includes(emulator.apiKey), 'the API key was shown');
      await workbench.screenshot('boot log in the run view');

      // Cancel Run from the view: the pod is deleted before its job, its log drained first.
      await page.locator('button[data-action="cancel"]').click();
      const confirm = workbench.page.locator('.monaco-dialog-box');
      await confirm.waitFor({ state: 'visible' });
      await confirm.getByRole('button', { name: 'Cancel Run', exact: true }).click();
      const runId = await newRun(start);
      await eventually('the cancelled run', async () => {
        const run = JSON.parse(
          fs.readFileSync(path.join(runsDir(), runId, 'run.json'), 'utf8'),
        ) as {
          state: string;
        };
        return run.state === 'preparing' || run.state === 'running' ? undefined : true;
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

    it('Recovery: the notification, the run page and the Runs tree show the second attempt; the run succeeds', async function () {
      const { emulator, workbench } = window;
      const start = await begin(
        tinyToml(`python3 train.py --steps ${RECOVERY_STEPS} --step-seconds 0.1 --save-every 5`),
      );
      await workbench.openViewContainer('Overbrainer');
      await confirmTrain(workbench);

      const id = await newRun(start);
      const runDir = path.join(runsDir(), id);
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
      assert.equal(model.step, RECOVERY_STEPS, 'the model of the last step came home');
      const pods = requestsSince(start).filter((r) => r.route === 'createPod' && r.status === 201);
      assert.equal(pods.length, 2, 'a second pod was created');
    });

    it('Crash: the restarted extension host follows the run again by itself; the run succeeds, verified, its pod deleted by the client', async function () {
      this.timeout(400_000);
      const start = await begin(crashToml());
      await extensionHostCrash(window, (name) => !start.runs.has(name));
    });
  };

  return { spend, rest };
}
