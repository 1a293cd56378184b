import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type * as vscode from 'vscode';
import { EventBus } from '../../src/core/events';
import { RunPanels } from '../../src/ui/panel/runPanel';
import { RunsModel, type RunSummary } from '../../src/ui/runs/runsModel';
import { FakeClock, settle } from '../helpers/fakeClock';
import { FakeHost, FakeLog, runSummary } from './uiFakeHost';

/** Resolves once `done()` holds (the test's timeout bounds the wait). */
async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 5));
}

/**
 * The run panels reach VS Code through the UiHost port only, and tick on the injected clock: so
 * they run here against the fake, with time driven by the test.
 */
describe('the run panels against the fake host', function () {
  let root: string;
  let fake: FakeHost;
  let clock: FakeClock;
  let panels: RunPanels;
  let run: RunSummary;

  let bus: EventBus;
  /** How many times Show Run asked the user which run (a QuickPick, answered with nothing). */
  let picks: number;

  function open(runs: RunSummary[]): RunPanels {
    const log = new FakeLog();
    bus = new EventBus();
    picks = 0;
    panels = new RunPanels({
      host: fake.host(),
      extensionUri: { fsPath: '/extension', scheme: 'file' } as vscode.Uri,
      bus,
      clock,
      runs: new RunsModel(() => Promise.resolve(runs), { clock }),
      log,
      pickRun: () => {
        picks++;
        return Promise.resolve(undefined);
      },
    });
    return panels;
  }

  beforeEach(function () {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-panel-'));
    run = runSummary(path.join(root, 'runs', 'r1'));
    fs.mkdirSync(run.dir, { recursive: true });
    fake = new FakeHost();
    clock = new FakeClock();
  });
  afterEach(function () {
    panels.dispose();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("opens Train's run view beside the editor, answers the page's ready with a snapshot, then sends the status each second on the clock while visible, and nothing once closed", async function () {
    open([run]);
    await panels.showRun({ dir: run.dir, openOnTrain: true });
    assert.equal(fake.panels.length, 1);
    const panel = fake.panels[0]!;
    assert.equal(panel.title, 'Run r1');
    assert.deepEqual(panel.column, { viewColumn: -2, preserveFocus: true });
    assert.match(panel.webview.html, /\/extension\/dist\/webview\.js/);
    assert.deepEqual(fake.shown, [], 'no pick, no message');

    panel.fromPage({ type: 'ready' });
    // The snapshot reads the run's metrics.jsonl (real I/O) first.
    await until(() => panel.postedOf('snapshot').length > 0);
    assert.equal(panel.postedOf('snapshot').length, 1);
    // The appends' flush after the snapshot sends the status once.
    await clock.advanceMs(200);
    const afterSnapshot = panel.postedOf('status').length;
    await clock.advanceMs(1000);
    assert.equal(panel.postedOf('status').length, afterSnapshot + 1);
    panel.visible = false;
    await clock.advanceMs(3000);
    assert.equal(panel.postedOf('status').length, afterSnapshot + 1, 'hidden: no status');
    panel.visible = true;
    panel.dispose();
    const posted = panel.posted.length;
    await clock.advanceMs(3000);
    assert.equal(panel.posted.length, posted, 'closed: nothing posted');
    assert.equal(panel.listening, 0);
    assert.equal(clock.pending, 0, 'no ticker left on the clock');
  });

  it('Show Run with no argument opens the live run while it goes on, and asks which run once it has ended', async function () {
    open([run]);
    const state = (s: 'running' | 'succeeded'): void =>
      bus.publish({ type: 'runState', runId: 'r1', state: s, message: null, cause: null });
    state('running');
    await panels.showRun(undefined);
    assert.equal(picks, 0, 'the live run, without asking');
    assert.equal(fake.panels.length, 1);
    assert.equal(fake.panels[0]!.title, 'Run r1');
    fake.panels[0]!.dispose();
    state('succeeded');
    await panels.showRun(undefined);
    assert.equal(picks, 1, 'no run is live: the user picks');
    assert.equal(fake.panels.length, 1, 'nothing opened while the pick was dismissed');
  });

  it("runs a page's button as the command on the run's directory, and only a button that applies", async function () {
    open([run]);
    await panels.showRun({ dir: run.dir, openOnTrain: true });
    const panel = fake.panels[0]!;
    panel.fromPage({ type: 'ready' });
    panel.fromPage({ type: 'action', action: 'stop', runId: 'r1' });
    panel.fromPage({ type: 'action', action: 'resume', runId: 'r1' });
    await settle();
    assert.deepEqual(
      fake.shown.flatMap((s) => (s.kind === 'command' ? [[s.command, s.args]] : [])),
      [['overbrainer.stopRun', [{ dir: run.dir }]]],
    );
  });

  it('Compare Runs with no run says so in the window and opens no panel', async function () {
    open([]);
    await panels.compareRuns(undefined, undefined);
    assert.deepEqual(fake.messages(), ['info: Overbrainer: no run to compare.']);
    assert.equal(fake.panels.length, 0);
  });
});
