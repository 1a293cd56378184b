import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { overbrainerLogs, untilActivated } from './extensionLogs';
import type { Emulator } from '../emulator/emulator';
import { eventually, type CodeServer, type Workbench } from './harness';
import { POD_TARGET_TOML, seedRun } from './runFixtures';

/**
 * docs/SECURITY.md, "Workspace trust", in the real VS Code: the one window with Workspace Trust
 * on. The folder holds a run recorded `running` on a pod (a cloned repository's runs/ could);
 * code-server opens it in Restricted Mode (the folder was never trusted). Until the folder is
 * trusted the Runs view shows the run from its record, Train says the folder is not trusted, and
 * the emulator sees no request at all; once trusted, the extension follows the run again (its
 * first API call). Its window is the installed .vsix's (./package.e2e.test.ts): a window costs
 * about 14 CPU-s, more than this journey, and the .vsix's extension then makes its first API
 * call as well.
 */

/**
 * What the journey needs of its window: code-server with Workspace Trust on, the key in its
 * environment, on a workspace {@link prepareTrust} wrote (`runId`: its run).
 */
export interface TrustWindow {
  workbench: Workbench;
  server: CodeServer;
  emulator: Emulator;
  runId: string;
}

/**
 * Writes the workspace as a cloned repository may hold it (before code-server opens it): the
 * toml and a run recorded `running` on a pod; returns the run's ID.
 */
export function prepareTrust(ws: string): string {
  // No [training]: nothing trains here.
  fs.writeFileSync(path.join(ws, 'overbrainer.toml'), POD_TARGET_TOML);
  return seedRun(path.join(ws, 'runs'), {
    atMs: Date.now() - 60_000,
    target: 'pod',
    state: 'running',
    pod: {
      id: 'clonedpod1',
      gpuType: 'NVIDIA GeForce RTX 4090',
      maxHours: 1,
      costPerHourUsd: 0.69,
    },
  }).id;
}

/** Registers the journey; `window` gives its window once its `before` made it. */
export function trustJourney(window: () => TrustWindow): void {
  it('untrusted: shows the run from its record, refuses Train and makes no API call; trusted: follows the run again', async function () {
    const { workbench, server, emulator, runId } = window();
    const page = workbench.page;
    // code-server opens a folder it was never told to trust in Restricted Mode, without a prompt.
    await page
      .locator('.statusbar-item', { hasText: 'Restricted Mode' })
      .first()
      .waitFor({ state: 'visible', timeout: 120_000 });
    await untilActivated(server.logsDir, 300_000);
    await eventually(
      'the not-trusted line in the Overbrainer log',
      async () =>
        /This folder is not trusted: Overbrainer shows its runs/.test(
          overbrainerLogs(server.logsDir),
        )
          ? true
          : undefined,
      60_000,
    );
    await workbench.openViewContainer('Overbrainer');
    const row = workbench.viewPane('Runs').locator('.monaco-list-row', { hasText: runId });
    await row.first().waitFor({ state: 'visible', timeout: 120_000 });
    assert.match(await row.first().innerText(), /running/);
    await workbench.screenshot('untrusted-runs');

    await workbench.runCommand('Overbrainer: Train');
    const refused = await workbench.waitForNotification(
      /This folder is not trusted, so Overbrainer does not train from it/,
    );
    await workbench.screenshot('untrusted-train');
    assert.deepEqual(
      emulator.requests().map((r) => `${r.method} ${r.path}`),
      [],
      'an API call from a folder not trusted',
    );

    await refused.getByRole('button', { name: 'Manage Workspace Trust' }).click();
    await page
      .getByRole('button', { name: /^Trust$/ })
      .first()
      .click({ timeout: 60_000 });
    await eventually(
      'the run followed again once the folder is trusted',
      async () =>
        new RegExp(`Following run ${runId} again`).test(overbrainerLogs(server.logsDir))
          ? true
          : undefined,
      120_000,
    );
    assert.match(overbrainerLogs(server.logsDir), /The folder is trusted now/);
    await eventually(
      'an API call once the folder is trusted',
      async () => (emulator.requests().some((r) => r.key === 'account') ? true : undefined),
      60_000,
    );
    console.log(
      `      trusted, the API saw: ${emulator
        .requests()
        .map((r) => `${r.method} ${r.path} ${r.status}`)
        .join(', ')}`,
    );
    await workbench.screenshot('trusted');
  });
}
