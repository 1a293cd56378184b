import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Browser, Locator } from 'playwright-core';
import { startEmulator, type Emulator } from '../emulator/emulator';
import type { EmulatorOptions } from '../emulator/types';
import { tinyToml, writeTinyWorkspace } from '../helpers/tinyWorkspace';
import { installBuild } from './build';
import { borrowChromium, returnChromium } from './sharedChromium';
import { overbrainerLogFiles } from './extensionLogs';
import { CodeServer, eventually, tempDir, Workbench, type CodeServerOptions } from './harness';
import { describeStalls } from './stallWatch';

export { tinyToml };

/**
 * User settings of every journey's window: no animations (VS Code's reduced motion), cursors that
 * do not blink, and terminals drawn in the DOM instead of WebGL (here Chromium's SwiftShader,
 * software GL on the CPU: the machines have no GPU). What a journey does and checks is the same;
 * Chromium draws fewer frames. Side by side, two rounds each (2026-12-07, load 12-36): journeys
 * 150.1 -> 146.2 and 150.0 -> 143.7 CPU-s (Chromium's GPU process 37.8 -> 34.8, 32.0 -> 28.6);
 * views 82.7 -> 80.7 and 85.2 -> 85.4 (no terminal there).
 */
export const E2E_WINDOW_SETTINGS: Record<string, unknown> = {
  'workbench.reduceMotion': 'on',
  'editor.cursorBlinking': 'solid',
  'terminal.integrated.cursorBlinking': false,
  'terminal.integrated.gpuAcceleration': 'off',
};

/** What a journey's window is made of; filled by the `before` hook that `useWindow` registers. */
export interface E2eWindow {
  emulator: Emulator;
  workspace: ReturnType<typeof tempDir>;
  server: CodeServer;
  browser: Browser;
  workbench: Workbench;
}

export interface WindowOptions {
  /** Names the temp workspace (`<name>-ws`) and the screenshots' fallback title. */
  name: string;
  /** The emulator's options (default: pods that provision and start in 100 ms). */
  emulator?: EmulatorOptions;
  /** Written as the workspace's overbrainer.toml; none when absent. */
  toml?: string;
  /** Whether the workspace holds examples/tiny's train.py and data (default true). */
  tiny?: boolean;
  /** Extra files in the workspace, written before code-server starts. */
  prepare?: (workspaceDir: string, emulator: Emulator) => void | Promise<void>;
  /** OVERBRAINER_TIMING_SCALE: the production timing divided by it (default: production). */
  timingScale?: string;
  /** Give the extension the emulator's API key in its environment (default false). */
  apiKeyInEnv?: boolean;
  /** More environment for code-server and so the extension host. */
  env?: Record<string, string>;
  /** Workspace Trust on (default off): the folder opens with VS Code's trust prompt. */
  workspaceTrust?: boolean;
  /** Runs in `after` before the billing check: ends what the test started on the account. */
  cleanup?: (emulator: Emulator) => Promise<void>;
  /** More machine settings, beside the emulator's base URL (a setting the user would make). */
  machineSettings?: Record<string, unknown>;
}

/**
 * Registers the hooks every journey repeats: an emulator, a workspace holding examples/tiny's
 * train.py and data, the machine settings pointing the extension at the emulator, code-server and a
 * Chromium on the workbench; a screenshot when a test fails; and, at the end, everything closed
 * and no pod left billing. Call inside `describe`; read the fields from the test bodies.
 */
export function useWindow(options: WindowOptions): E2eWindow {
  const window = {} as E2eWindow;
  let extensions: ReturnType<typeof tempDir> | undefined;

  before(async function () {
    // Chromium starts meanwhile (or the worker's is borrowed: ./sharedChromium.ts): it needs
    // nothing of what follows. Both are awaited before a failure is thrown, so that `after`
    // closes whichever did start.
    const launching = borrowChromium().then((browser) => {
      window.browser = browser;
    });
    let failure: unknown;
    await startServer().catch((error: unknown) => {
      failure = error;
    });
    await launching.catch((error: unknown) => {
      failure ??= error;
    });
    if (failure !== undefined) throw failure;
    window.workbench = await Workbench.open(
      window.browser,
      window.server,
      this.test?.parent?.title ?? options.name,
    );
  });

  /** The emulator, the workspace, the build and code-server, one after another. */
  async function startServer(): Promise<void> {
    window.emulator = await startEmulator(
      options.emulator ?? { bootDelaysMs: { provisioning: 100, starting: 100 } },
    );
    window.workspace = tempDir(`${options.name}-ws`);
    const ws = window.workspace.dir;
    if (options.tiny ?? true) writeTinyWorkspace(ws, options.toml);
    else if (options.toml !== undefined)
      fs.writeFileSync(path.join(ws, 'overbrainer.toml'), options.toml);
    await options.prepare?.(ws, window.emulator);
    // A private copy of the run's build (./build.ts): never dist/, which other files rebuild.
    extensions = tempDir(`${options.name}-ext`);
    const extensionsDir = path.join(extensions.dir, 'extensions');
    await installBuild(extensionsDir);
    const serverOptions: CodeServerOptions = {
      workspace: ws,
      extensionsDir,
      settings: E2E_WINDOW_SETTINGS,
      // Where a user sets it: a workspace's .vscode/settings.json cannot (scope `machine`).
      machineSettings: {
        'overbrainer.runpod.baseUrl': window.emulator.baseUrl,
        ...options.machineSettings,
      },
      workspaceTrust: options.workspaceTrust,
      env: {
        ...(options.timingScale === undefined
          ? {}
          : { OVERBRAINER_TIMING_SCALE: options.timingScale }),
        ...(options.apiKeyInEnv ? { OVERBRAINER_RUNPOD__API_KEY: window.emulator.apiKey } : {}),
        ...options.env,
      },
    };
    window.server = await CodeServer.start(serverOptions);
  }

  let diagnosed = false;
  let testStartedMs = Date.now();
  beforeEach(function () {
    testStartedMs = Date.now();
  });
  afterEach(async function () {
    if (this.currentTest?.state !== 'failed') return;
    // In the failure itself (the end of a CI's output shows it): what ran while the test waited.
    if (this.currentTest.err) explainFailure(this.currentTest.err, window, testStartedMs);
    await window.workbench?.screenshot('failed').catch(() => undefined);
    // Once per window: whether its extension host started and the extension activated.
    if (!diagnosed && window.server) {
      diagnosed = true;
      console.log(window.server.diagnostics().replace(/^/gm, '      '));
    }
  });

  after(async function () {
    // The browser and code-server close side by side: neither needs the other to end.
    await Promise.all([
      (async () => {
        await window.workbench?.close().catch(() => undefined);
        if (window.browser) await returnChromium(window.browser);
      })(),
      window.server?.close(),
    ]);
    if (window.emulator) await options.cleanup?.(window.emulator);
    const billing = window.emulator?.ledger().pods.filter((p) => p.billing) ?? [];
    await window.emulator?.close();
    window.workspace?.remove();
    extensions?.remove();
    assert.deepEqual(
      billing.map((p) => p.id),
      [],
      'a pod was left billing',
    );
  });

  return window;
}

/**
 * Adds to a failed test's error what its window did meanwhile: whether the machine paused, the
 * extension's last log lines and the emulator's last requests.
 */
function explainFailure(error: Error, window: E2eWindow, sinceMs: number): void {
  const indent = (text: string): string => text.replace(/^/gm, '    ');
  const parts = [describeStalls(sinceMs)];
  const logs = window.server ? overbrainerLogFiles(window.server.logsDir) : [];
  const logFile = logs[logs.length - 1];
  if (logFile !== undefined) {
    const lines = fs.readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-20);
    parts.push(`the extension's log, its last ${lines.length} lines:\n${indent(lines.join('\n'))}`);
  }
  if (window.emulator) {
    const requests = window.emulator
      .requests()
      .filter((r) => r.atMs >= sinceMs)
      .slice(-10);
    const each = requests.map(
      (r) =>
        `${new Date(r.atMs).toISOString().slice(11, 23)} ${r.method} ${r.path} → ${r.status} (${r.durationMs} ms, ${r.key})`,
    );
    parts.push(`the emulator's last requests:\n${indent(each.join('\n') || '(none)')}`);
  }
  const before = error.message;
  error.message = `${before}\n  --- while it ran:\n${indent(parts.join('\n'))}`;
  if (typeof error.stack === 'string') error.stack = error.stack.replace(before, error.message);
}

/**
 * Runs Overbrainer: Train from the palette and answers its confirmation with `button`, after
 * `inspect` (asserts, a screenshot) had the dialog's words; returns them.
 */
export async function confirmTrain(
  workbench: Workbench,
  button: 'Train' | 'Train and Keep Pod' = 'Train',
  inspect?: (words: string) => void | Promise<void>,
): Promise<string> {
  await workbench.runCommand('Overbrainer: Train');
  const dialog = workbench.page.locator('.monaco-dialog-box');
  await dialog.waitFor({ state: 'visible' });
  const words = await dialog.innerText();
  await inspect?.(words);
  await dialog.getByRole('button', { name: button, exact: true }).click();
  return words;
}

/** Runs Set Runpod API Key from the palette; the password box, once it asks for the key. */
export async function openKeyBox(workbench: Workbench): Promise<Locator> {
  await workbench.runCommand('Overbrainer: Set Runpod API Key');
  const input = workbench.page.locator('.quick-input-widget .quick-input-box input');
  // The password box replaces the palette once the handler ran: type only into it.
  await workbench.page
    .locator('.quick-input-widget')
    .getByText('secret storage', { exact: false })
    .first()
    .waitFor();
  return input;
}

/** Types `apiKey` into Set Runpod API Key's box and waits until the extension saved it. */
export async function setApiKey(workbench: Workbench, apiKey: string): Promise<void> {
  const input = await openKeyBox(workbench);
  await input.pressSequentially(apiKey);
  await input.press('Enter');
  await workbench.waitForNotification('Runpod API key saved');
}

/**
 * Runs `command` from the palette until the QuickPick it shows (placeholder `placeholder`) stays
 * open once the palette's close animation is over; returns its input. See {@link pickFromCommand}.
 */
export async function openPickFromCommand(
  workbench: Workbench,
  command: string,
  placeholder: string,
): Promise<Locator> {
  const input = workbench.page
    .locator('.quick-input-widget')
    .locator(`input[placeholder="${placeholder}"]`);
  const closing = workbench.page.locator('.quick-input-widget[inert]');
  for (let attempt = 1; ; attempt++) {
    await workbench.runCommand(command);
    // The widget's input takes the pick's placeholder only once the pick is shown: holding it but
    // hidden, with no close animation running, means the pick was shown and closed again (CI saw
    // it hidden for good before a wait for "visible" ever saw it).
    const state = await eventually(`the pick "${placeholder}" to stay open`, async () => {
      if ((await closing.count()) > 0 || (await input.count()) === 0) return undefined;
      return (await input.isVisible()) ? 'open' : 'closed';
    });
    if (state === 'open') return input;
    if (attempt >= 3) {
      throw new Error(`the pick "${placeholder}" closed with the palette ${attempt} times`);
    }
    console.log(`      (the pick "${placeholder}" closed with the palette: "${command}" again)`);
  }
}

/**
 * Runs `command` from the palette, then picks the row holding `text` in the QuickPick it shows
 * (placeholder `placeholder`). The extension's pick can open while the palette's close animation
 * still runs (the widget is `inert` then), and on a loaded machine that animation's end was seen
 * to hide the pick with it (CI: the input resolved, then inert, then hidden for good): once the
 * animation is over and the pick is gone, the command is run again (at most twice more, said).
 */
export async function pickFromCommand(
  workbench: Workbench,
  command: string,
  placeholder: string,
  text: string,
): Promise<void> {
  const widget = workbench.page.locator('.quick-input-widget');
  const input = await openPickFromCommand(workbench, command, placeholder);
  // Filter to the row and accept it with Enter (a click can land on the row's hover instead).
  await input.fill(text);
  await widget.locator('.monaco-list-row', { hasText: text }).first().waitFor();
  await input.press('Enter');
  await widget.waitFor({ state: 'hidden' });
}
