/**
 * `npm start -- --check`: the demo driven unattended in Chromium, the way a newcomer uses it —
 * Overbrainer in the activity bar, Train from the palette, the run in the Runs tree, the countdown
 * in the status bar, the run page's chart (once the run webview exists), the success
 * notification — then the results checked on disk and the emulator checked for pods left.
 * Prints one line per step with the time since the start; returns false at the first failure.
 *
 * Screenshots go to test-results/e2e/demo-check/; the cropped ones the README shows (runs tree,
 * chart, status bar, notification) are copied into docs/images/ when
 * OVERBRAINER_UPDATE_SCREENSHOTS=1.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import type { Browser, Locator } from 'playwright-core';
import type { Emulator } from '../test/emulator/emulator';
import { untilActivated } from '../test/e2e/extensionLogs';
import {
  eventually,
  launchChromium,
  REPO_ROOT,
  Workbench,
  type CodeServer,
} from '../test/e2e/harness';

export interface CheckContext {
  server: CodeServer;
  emulator: Emulator;
  workspace: string;
  signal: AbortSignal;
}

/** How long the whole run may take once Train was clicked (boot, upload, 20 s of training, retrieval). */
const RUN_TIMEOUT_MS = 240_000;

/** The workbench shows before its extension host has loaded the extensions. */
const EXTENSION_HOST_TIMEOUT_MS = 300_000;

const README_IMAGES = path.join(REPO_ROOT, 'docs', 'images');

class StepFailed extends Error {}

export async function runCheck(context: CheckContext): Promise<boolean> {
  const started = Date.now();
  const say = (mark: string, text: string): void => {
    const seconds = ((Date.now() - started) / 1000).toFixed(1).padStart(6);
    console.log(`[check ${seconds} s] ${mark} ${text}`);
  };
  const step = async <T>(what: string, action: () => Promise<T>): Promise<T> => {
    if (context.signal.aborted) throw new StepFailed('interrupted');
    try {
      const result = await action();
      say('✓', typeof result === 'string' && result !== '' ? `${what}: ${result}` : what);
      return result;
    } catch (error) {
      say('✗', `${what}: ${error instanceof Error ? error.message : String(error)}`);
      throw new StepFailed(what);
    }
  };

  let browser: Browser | undefined;
  let workbench: Workbench | undefined;
  const readmeShots: string[] = [];
  try {
    browser = await step('Chromium started', () => launchChromium());
    const opened = await step('VS Code loaded the demo workspace', () =>
      Workbench.open(browser!, context.server, 'demo check'),
    );
    workbench = opened;
    const page = opened.page;
    const crop = async (name: string, target: Locator, maxHeight?: number): Promise<string> => {
      const file = path.join(opened.screenshotsDir, `${name}.png`);
      const box = await target.boundingBox();
      if (box === null) throw new Error(`${name}: not on screen`);
      const clip = { ...box, height: Math.min(box.height, maxHeight ?? box.height) };
      await page.screenshot({ path: file, clip });
      readmeShots.push(file);
      return path.relative(REPO_ROOT, file);
    };

    await step('the extension activated', async () => {
      // The extension host scans extensions after the workbench shows: slow on a loaded machine.
      await opened
        .activityBarItem('Overbrainer')
        .first()
        .waitFor({ state: 'visible', timeout: EXTENSION_HOST_TIMEOUT_MS });
      // The activity bar shows from the manifest before the extension host runs the extension;
      // its commands exist once it logged its activation (the log channel's file on disk).
      const activated = await untilActivated(context.server.logsDir, EXTENSION_HOST_TIMEOUT_MS);
      await opened.openViewContainer('Overbrainer');
      await opened.viewPane('Runs').waitFor({ state: 'visible' });
      // Wider than the default, so the Runs tree's rows show whole (and in the screenshots):
      // drag the sash on the side bar's right edge.
      const sidebar = await page.locator('.part.sidebar').boundingBox();
      const sashes = page.locator('.monaco-sash.vertical');
      for (let i = 0; sidebar !== null && i < (await sashes.count()); i += 1) {
        const sash = await sashes.nth(i).boundingBox();
        if (sash === null || Math.abs(sash.x + sash.width / 2 - (sidebar.x + sidebar.width)) > 6) {
          continue;
        }
        const x = sash.x + sash.width / 2;
        const y = sash.y + sash.height / 2;
        await page.mouse.move(x, y);
        await page.mouse.down();
        await page.mouse.move(x + 220, y, { steps: 8 });
        await page.mouse.up();
        break;
      }
      return activated;
    });

    await step('Train asks to confirm GPU types and max_hours', async () => {
      await opened.runCommand('Overbrainer: Train');
      const dialog = page.locator('.monaco-dialog-box');
      await dialog.waitFor({ state: 'visible' });
      const text = await dialog.innerText();
      for (const expected of [
        /Train on "pod"\?/,
        /GPU types: NVIDIA GeForce RTX 4090/,
        /max_hours: 1/,
      ]) {
        if (!expected.test(text)) throw new Error(`the dialog says ${JSON.stringify(text)}`);
      }
      await opened.screenshot('train confirmation');
      await dialog.getByRole('button', { name: 'Train', exact: true }).click();
      return 'clicked Train';
    });

    const row = opened.viewPane('Runs').locator('.monaco-list-row', { hasText: 'tiny_' }).first();
    const runId = await step('the run appears in the Runs tree', async () => {
      await row.waitFor({ state: 'visible' });
      const id = /tiny_\d{8}-\d{6}(?:_\d+)?/.exec(await row.innerText())?.[0];
      if (id === undefined)
        throw new Error(`no run id in ${JSON.stringify(await row.innerText())}`);
      return id;
    });

    const states: string[] = [];
    const rowState = async (): Promise<string | undefined> => {
      const text = await row.innerText();
      const state = /(preparing|running|succeeded|failed|cancelled|stopped)/.exec(text)?.[1];
      if (state !== undefined && states[states.length - 1] !== state) states.push(state);
      if (state === 'failed' || state === 'cancelled' || state === 'stopped') {
        throw new Error(`the run ended ${state}: ${text.replace(/\s+/g, ' ')}`);
      }
      return state;
    };

    const statusItem = page.locator('.statusbar-item', { hasText: /left|following/ }).first();
    await step('the status bar counts down to the deadline', async () => {
      await statusItem.waitFor({ state: 'visible' });
      return (await statusItem.innerText()).replace(/\s+/g, ' ').trim();
    });

    await step('the pod is created on the emulator and the job runs', async () => {
      await eventually(
        'the run to be running',
        async () => ((await rowState()) === 'running' ? true : undefined),
        RUN_TIMEOUT_MS,
      );
      const created = context.emulator.ledger().pods;
      if (created.length !== 1) throw new Error(`${created.length} pods were created, not 1`);
      const pod = created[0]!;
      return `pod ${pod.id} (${pod.gpuTypeId}, ${pod.billing ? pod.status : 'already deleted'}); tree: ${(await row.innerText()).replace(/\s+/g, ' ')}`;
    });

    await step('the Runs tree shows the run with its ETA', async () => {
      // The ETA needs two timed loss lines: give the job a few steps.
      const text = await eventually(
        'an ETA in the tree',
        async () => {
          const now = (await row.innerText()).replace(/\s+/g, ' ');
          const bar = await statusItem.innerText().catch(() => '');
          return /ETA/.test(now) || /ETA/.test(bar) ? now : undefined;
        },
        30_000,
      ).catch(async () => (await row.innerText()).replace(/\s+/g, ' '));
      // Unfold the run: its children show the pod, the deadline and the spend.
      await row
        .locator('.monaco-tl-twistie.collapsible.collapsed')
        .click({ timeout: 5_000 })
        .catch(() => undefined);
      await crop('runs-tree', page.locator('.part.sidebar'), 240);
      return text;
    });
    await step('the status bar shows the time left and the ETA', async () => {
      const text = (await statusItem.innerText().catch(() => '')).replace(/\s+/g, ' ').trim();
      if (text !== '') {
        const bar = await page.locator('.part.statusbar').boundingBox();
        const item = await statusItem.boundingBox();
        if (bar !== null && item !== null) {
          const file = path.join(opened.screenshotsDir, 'status-bar.png');
          const x = Math.max(0, item.x - 240);
          await page.screenshot({
            path: file,
            clip: { x, y: bar.y, width: Math.min(720, bar.width - x), height: bar.height },
          });
          readmeShots.push(file);
        }
      }
      return text === '' ? 'the run already ended' : text;
    });

    await step('Show Run: the run page charts the loss as it arrives', async () => {
      await opened.runCommand('Overbrainer: Show Run');
      // The run page is a webview: its document sits two iframes down (VS Code's host frame).
      const chart = page
        .frameLocator('iframe.webview.ready')
        .frameLocator('iframe#active-frame')
        .locator('#chart[data-points]');
      await chart.waitFor({ state: 'attached' });
      const points = async (): Promise<number> => Number(await chart.getAttribute('data-points'));
      const first = await eventually('chart points', async () =>
        (await points()) > 0 ? points() : undefined,
      );
      const later = await eventually(
        'more chart points',
        async () => {
          const now = await points();
          if (now > first) return now;
          // A run that already ended has all its points: that counts too.
          return (await rowState()) === 'succeeded' ? now : undefined;
        },
        60_000,
      );
      await opened.screenshot('run page');
      await crop('chart', page.locator('.part.editor'));
      return `${first} → ${later} points`;
    });

    await step('the run succeeds', async () => {
      const from = Date.now();
      await eventually(
        'the run to succeed',
        async () => ((await rowState()) === 'succeeded' ? true : undefined),
        RUN_TIMEOUT_MS,
      );
      return `states ${states.join(' → ')} in ${((Date.now() - from) / 1000).toFixed(0)} s`;
    });

    await step('a notification says it succeeded', async () => {
      const message = new RegExp(`Run ${runId} succeeded`);
      const toast = await opened.waitForNotification(message).catch(async () => {
        // A toast hides after a while: the notification centre keeps it.
        await opened.runCommand('Notifications: Show Notifications');
        const item = page
          .locator('.notifications-center .notification-list-item')
          .filter({ hasText: message })
          .first();
        await item.waitFor({ state: 'visible' });
        return item;
      });
      const text = (await toast.innerText()).replace(/\s+/g, ' ').trim();
      await crop('notification', toast);
      return text;
    });

    await step('nothing is followed any more', async () => {
      await statusItem.waitFor({ state: 'detached' });
      await opened
        .viewPane('Pods')
        .locator('.monaco-list-row')
        .first()
        .waitFor({ state: 'detached' });
      await opened.screenshot('run succeeded');
      return 'countdown gone, Pods view empty';
    });

    await step('the results are on disk', () =>
      Promise.resolve(verifyResults(context.workspace, runId)),
    );

    await step('no pod is left on the emulator', async () => {
      await eventually(
        'no pod',
        async () => (context.emulator.pods().length === 0 ? true : undefined),
        30_000,
      );
      const pods = context.emulator.ledger().pods;
      const billing = pods.filter((pod) => pod.billing);
      if (billing.length > 0) throw new Error(`billing: ${billing.map((p) => p.id).join(', ')}`);
      const cost = pods.reduce((sum, pod) => sum + pod.costUsd, 0);
      return `${pods.length} pod created and deleted (by ${pods.map((p) => p.deletedBy).join(', ')}), emulated cost $${cost.toFixed(4)}`;
    });
    publishScreenshots(readmeShots, say);
    return true;
  } catch (error) {
    if (!(error instanceof StepFailed)) {
      say('✗', error instanceof Error ? (error.stack ?? error.message) : String(error));
    }
    await workbench?.screenshot('failed').catch(() => undefined);
    const hostLog = extensionHostErrors(context.server);
    if (hostLog.length > 0) {
      console.log('extension host log (errors and Overbrainer lines, last 20):');
      for (const line of hostLog) console.log(`  ${line}`);
    }
    if (workbench)
      console.log(`screenshots: ${path.relative(REPO_ROOT, workbench.screenshotsDir)}/`);
    return false;
  } finally {
    await workbench?.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
  }
}

/** run.json succeeded, the model and metrics retrieved, the pod recorded deleted, keys forgotten. */
export function verifyResults(workspace: string, runId: string): string {
  const runDir = path.join(workspace, 'runs', runId);
  const read = (name: string): unknown => JSON.parse(readFileSync(path.join(runDir, name), 'utf8'));
  const run = read('run.json') as { state?: string };
  if (run.state !== 'succeeded') throw new Error(`run.json state is ${String(run.state)}`);
  const model = read('output/model.json') as { weights?: unknown; eval_loss?: unknown };
  if (!Array.isArray(model.weights) || typeof model.eval_loss !== 'number') {
    throw new Error('output/model.json has no weights or eval_loss');
  }
  const losses = readFileSync(path.join(runDir, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => (JSON.parse(line) as { loss?: unknown }).loss)
    .filter((loss): loss is number => typeof loss === 'number');
  if (losses.length < 2 || !(losses[losses.length - 1]! < losses[0]!)) {
    throw new Error(`metrics.jsonl: the loss did not fall (${losses.length} values)`);
  }
  const pod = read('pod.json') as { state?: string; deleted_by?: string; pod_id?: string };
  if (pod.state !== 'deleted') throw new Error(`pod.json state is ${String(pod.state)}`);
  if (existsSync(path.join(runDir, 'ssh', 'id_ed25519'))) {
    throw new Error('the run’s private key is still on disk after its pod was deleted');
  }
  const files = readdirSync(path.join(runDir, 'output'));
  return `run.json succeeded; output/ ${files.join(', ')}; loss ${losses[0]!.toFixed(3)} → ${losses[losses.length - 1]!.toFixed(3)} over ${losses.length} steps; pod ${pod.pod_id ?? '?'} deleted by ${pod.deleted_by ?? '?'}; client key forgotten`;
}

function publishScreenshots(files: string[], say: (mark: string, text: string) => void): void {
  if (process.env.OVERBRAINER_UPDATE_SCREENSHOTS !== '1') return;
  mkdirSync(README_IMAGES, { recursive: true });
  for (const file of files) copyFileSync(file, path.join(README_IMAGES, path.basename(file)));
  say('✓', `copied ${files.map((f) => path.basename(f)).join(', ')} into docs/images/`);
}

/**
 * Error and Overbrainer lines of code-server's extension host logs (user-data/logs/<time>/
 * exthost<n>/remoteexthost.log), when its user data sits next to its extensions dir (the linked
 * build): why a command was "not found" (the extension failed to activate) is only there.
 */
function extensionHostErrors(server: CodeServer): string[] {
  const logs = path.join(path.dirname(server.extensionsDir), 'user-data', 'logs');
  const files: string[] = [];
  const walk = (dir: string, depth: number): void => {
    if (depth > 3 || !existsSync(dir)) return;
    for (const name of readdirSync(dir)) {
      const full = path.join(dir, name);
      if (statSync(full).isDirectory()) walk(full, depth + 1);
      else if (name === 'remoteexthost.log') files.push(full);
    }
  };
  walk(logs, 0);
  return files
    .flatMap((file) => readFileSync(file, 'utf8').split('\n'))
    .filter((line) => /\[error\]|overbrainer/i.test(line))
    .slice(-20);
}
