import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Browser } from 'playwright-core';
import { startEmulator, type Emulator } from '../emulator/emulator';
import type { EmulatorOptions } from '../emulator/types';
import {
  CodeServer,
  launchChromium,
  REPO_ROOT,
  tempDir,
  Workbench,
  type CodeServerOptions,
} from './harness';

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
  /** Extra files in the workspace, written before code-server starts. */
  prepare?: (workspaceDir: string, emulator: Emulator) => void | Promise<void>;
  /** code-server's extensions folder (default: the built extension, linked by CodeServer). */
  extensionsDir?: (emulator: Emulator) => string | Promise<string>;
  /** Environment for code-server and so the extension host. */
  env?: (emulator: Emulator) => Record<string, string>;
}

/**
 * Registers the hooks every journey repeats: an emulator, a workspace holding examples/tiny's
 * train.py and data, the settings pointing the extension at the emulator, code-server and a
 * Chromium on the workbench; a screenshot when a test fails; and, at the end, everything closed
 * and no pod left billing. Call inside `describe`; read the fields from the test bodies.
 */
export function useWindow(options: WindowOptions): E2eWindow {
  const window = {} as E2eWindow;

  before(async function () {
    window.emulator = await startEmulator(
      options.emulator ?? { bootDelaysMs: { provisioning: 100, starting: 100 } },
    );
    window.workspace = tempDir(`${options.name}-ws`);
    const ws = window.workspace.dir;
    const tiny = path.join(REPO_ROOT, 'examples', 'tiny');
    fs.copyFileSync(path.join(tiny, 'train.py'), path.join(ws, 'train.py'));
    fs.cpSync(path.join(tiny, 'data'), path.join(ws, 'data'), { recursive: true });
    if (options.toml !== undefined)
      fs.writeFileSync(path.join(ws, 'overbrainer.toml'), options.toml);
    fs.mkdirSync(path.join(ws, '.vscode'));
    fs.writeFileSync(
      path.join(ws, '.vscode', 'settings.json'),
      JSON.stringify({ 'overbrainer.runpod.baseUrl': window.emulator.baseUrl }, null, 2),
    );
    await options.prepare?.(ws, window.emulator);
    const serverOptions: CodeServerOptions = { workspace: ws };
    if (options.env) serverOptions.env = options.env(window.emulator);
    if (options.extensionsDir)
      serverOptions.extensionsDir = await options.extensionsDir(window.emulator);
    window.server = await CodeServer.start(serverOptions);
    window.browser = await launchChromium();
    window.workbench = await Workbench.open(
      window.browser,
      window.server,
      this.test?.parent?.title ?? options.name,
    );
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed')
      await window.workbench?.screenshot('failed').catch(() => undefined);
  });

  after(async function () {
    await window.workbench?.close().catch(() => undefined);
    await window.browser?.close();
    await window.server?.close();
    const billing = window.emulator?.ledger().pods.filter((p) => p.billing) ?? [];
    await window.emulator?.close();
    window.workspace?.remove();
    assert.deepEqual(
      billing.map((p) => p.id),
      [],
      'a pod was left billing',
    );
  });

  return window;
}

/** The overbrainer.toml of examples/tiny on one RTX 4090 pod, running `command` (no double quotes). */
export function tinyToml(command: string): string {
  return `[project]
name = "tiny"

[training]
target = "pod"
trainer = "command"
command = "${command}"
upload = ["train.py", "data"]

[targets.pod]
kind = "runpod"
gpu_types = ["NVIDIA GeForce RTX 4090"]
max_hours = 1
boot_grace_minutes = 5
retrieve_grace_minutes = 10
`;
}
