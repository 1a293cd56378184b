import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ApiClient, postRunPod } from '../emulator/testing';
import type { Emulator } from '../emulator/emulator';
import { eventually } from './harness';
import { POD_TARGET_TOML, runStoreAt, seedRun } from './runFixtures';
import type { E2eWindow } from './window';

/**
 * The Runs and Pods trees in the real VS Code, on a runs/ folder prepared on disk (as the CLI or
 * another window leaves it) and a pod started on the emulator's account by no run of this
 * workspace: each run's row and description, a damaged record as an error item, a run written
 * after activation appearing by the file watcher, expanding a run, and the orphan pod flagged.
 * The first journeys of their window (./views.e2e.test.ts): its workspace is theirs when it opens.
 */

const OTHER_RUN = 'elsewhere_20260101-000000';

function prepareRuns(runsDir: string): Record<string, string> {
  const t0 = Date.parse('2026-12-01T10:00:00Z');
  const ids: Record<string, string> = {};
  // Succeeded, its pod deleted with a spend estimate.
  const done = seedRun(runsDir, {
    atMs: t0,
    target: 'pod',
    state: 'succeeded',
    pod: {
      id: 'donepod1',
      gpuType: 'NVIDIA A40',
      maxHours: 2,
      costPerHourUsd: 0.44,
      deletedAfterMs: 3_600_000,
    },
  });
  const doneDir = path.join(runsDir, done.id);
  fs.mkdirSync(path.join(doneDir, 'output'));
  fs.writeFileSync(path.join(doneDir, 'output', 'model.txt'), 'weights\n');
  fs.writeFileSync(
    path.join(doneDir, 'metrics.jsonl'),
    '{"event":"begin","time":1,"max_steps":20}\n{"event":"log","time":2,"step":20,"max_steps":20,"loss":0.125}\n{"event":"end","time":3}\n',
  );
  ids.done = done.id;
  // Failed, no pod (a local target).
  ids.failed = seedRun(runsDir, {
    atMs: t0 + 60_000,
    target: 'local',
    state: 'failed',
    message: 'the job exited with status 1',
  }).id;
  // A damaged run.json.
  const store = runStoreAt(runsDir, t0 + 120_000);
  const broken = store.create({ project: 'tiny', target: 'pod', remoteDir: (id) => id });
  fs.writeFileSync(
    path.join(store.runDir(broken.id), 'run.json'),
    '{\n  "id": "x",\n  "state": \n',
  );
  ids.broken = broken.id;
  return ids;
}

/**
 * The trees' part of a window: `prepare` (the window's, before code-server starts) writes the
 * runs and starts the orphan pod; `cleanup` (the window's) deletes that pod; `register` adds the
 * journeys, to run first in the window. The window needs the emulator's key in its environment.
 */
export function treesJourneys(): {
  prepare: (ws: string, emulator: Emulator) => Promise<void>;
  cleanup: (emulator: Emulator) => Promise<void>;
  register: (window: E2eWindow) => void;
} {
  let ids: Record<string, string>;
  let orphanId: string;
  return {
    prepare: async (ws, emulator) => {
      // No [training]: no run is made here.
      fs.writeFileSync(path.join(ws, 'overbrainer.toml'), POD_TARGET_TOML);
      const api = new ApiClient(emulator.baseUrl, emulator.apiKey);
      // A pod of a run another checkout started: an orphan for this workspace.
      orphanId = await postRunPod(api, OTHER_RUN, ['sleep', '600']);
      ids = prepareRuns(path.join(ws, 'runs'));
    },
    // The orphan is the test's own: no run of this workspace was to delete it.
    cleanup: async (emulator) => {
      if (orphanId !== undefined)
        await new ApiClient(emulator.baseUrl, emulator.apiKey).delete(`/pods/${orphanId}`);
    },
    register: (window) =>
      register(
        window,
        () => ids,
        () => orphanId,
      ),
  };
}

function register(
  window: E2eWindow,
  prepared: () => Record<string, string>,
  orphan: () => string,
): void {
  it('shows the prepared runs newest first with their descriptions, a damaged record as an error item', async function () {
    const { workbench } = window;
    const ids = prepared();
    await workbench.openViewContainer('Overbrainer');
    const runs = workbench.viewPane('Runs');
    const rows = runs.locator('.monaco-list-row');
    // On a loaded machine the views show from the manifest long before the extension activates.
    await eventually(
      'three runs in the tree',
      async () => ((await rows.count()) === 3 ? true : undefined),
      300_000,
    );
    const texts = await rows.allInnerTexts();
    const flat = texts.map((t) => t.replace(/\s+/g, ' ').trim());
    assert.match(
      flat[0] ?? '',
      new RegExp(`^${ids.broken}\\s*run\\.json is not a valid run record \\(line 4, column 1\\)`),
    );
    assert.match(flat[1] ?? '', new RegExp(`^${ids.failed}\\s*failed · local$`));
    assert.match(flat[2] ?? '', new RegExp(`^${ids.done}\\s*succeeded · pod · about \\$0\\.44$`));
    // Each state has its codicon: the damaged record an error one.
    assert.equal(await rows.nth(0).locator('.codicon-bracket-error').count(), 1);
    assert.equal(await rows.nth(1).locator('.codicon-error').count(), 1);
    assert.equal(await rows.nth(2).locator('.codicon-pass').count(), 1);
    await workbench.screenshot('runs tree');

    // Expanding the succeeded run reads its pod, metrics and files.
    await rows.nth(2).click();
    await eventually('the run expanded', async () => ((await rows.count()) > 3 ? true : undefined));
    const expanded = (await rows.allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim());
    assert.ok(
      expanded.some((t) => /^Pod donepod1\s*deleted · NVIDIA A40 · about \$0\.44$/.test(t)),
      expanded.join('\n'),
    );
    assert.ok(
      expanded.some((t) => /^Metrics\s*step 20\/20 · loss 0\.125 · ended$/.test(t)),
      expanded.join('\n'),
    );
    assert.ok(expanded.includes('output'), expanded.join('\n'));
    await workbench.screenshot('run expanded');
  });

  it('shows a run written after activation (the CLI, another window) by its file watcher', async function () {
    const { workbench, workspace } = window;
    const store = runStoreAt(path.join(workspace.dir, 'runs'), Date.parse('2026-12-02T09:00:00Z'));
    const run = store.create({ project: 'tiny', target: 'pod', remoteDir: (id) => id });
    run.state = 'running';
    store.saveRun(run);
    const runs = workbench.viewPane('Runs');
    const row = runs.locator('.monaco-list-row', { hasText: run.id }).first();
    await row.waitFor({ state: 'visible' });
    // The record is written twice (created preparing, then running): the watcher may show the
    // first before the second; the row must come to say running.
    await eventually('the running state', async () =>
      /running · pod/.test((await row.innerText()).replace(/\s+/g, ' ')) ? true : undefined,
    );
    // Its state changing on disk shows too.
    run.state = 'cancelled';
    store.saveRun(run);
    await eventually('the cancelled state', async () =>
      (await row.innerText()).includes('cancelled') ? true : undefined,
    );
    await workbench.screenshot('run from the CLI');
  });

  it('lists the account’s pod of another checkout in the Pods view, flagged orphan', async function () {
    const { workbench } = window;
    const orphanId = orphan();
    // The Pods view shares the Overbrainer container with the Runs view: it is already open.
    const pods = workbench.viewPane('Pods');
    const row = pods.locator('.monaco-list-row', { hasText: orphanId }).first();
    await row.waitFor({ state: 'visible' });
    const text = (await row.innerText()).replace(/\s+/g, ' ');
    assert.match(text, new RegExp(`^${orphanId}\\s*orphan · ${OTHER_RUN} · RUNNING`));
    assert.equal(await row.locator('.codicon-question').count(), 1);
    // The view says when the account was listed.
    await pods
      .getByText(/Runpod account listed at/)
      .first()
      .waitFor({ state: 'visible' });
    await workbench.screenshot('pods orphan');
  });
}
