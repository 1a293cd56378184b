import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { CONFIG_FILE, configTemplate } from '../../src/core/config';
import { createConfig } from '../../src/ui/commands/configCommands';
import { act } from '../../src/ui/commands/coreEvents';
import { attach } from '../../src/ui/runs/following';
import { keep, removePod } from '../../src/ui/pods/podCommands';
import type { RunSummary } from '../../src/ui/runs/runsModel';
import { cancel, resume } from '../../src/ui/commands/stopCommands';
import { train } from '../../src/ui/commands/trainCommand';
import { SetupError } from '../../src/core/flow';
import { fakeContext, folder, runSummary as run, twoNodeCluster } from './uiFakeHost';

describe('ui command handlers (against a fake of the vscode window)', function () {
  let dir: string;
  beforeEach(function () {
    dir = fs.mkdtempSync(path.join(tmpdir(), 'ob-uicmd-'));
  });
  afterEach(function () {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('Train without a workspace folder says to open one', async function () {
    const { ctx, fake } = fakeContext();
    await train(ctx);
    assert.deepEqual(fake.messages(), [
      'error: Overbrainer: open a folder with an overbrainer.toml first.',
    ]);
  });

  it('Train with no overbrainer.toml shows the config error with Show Logs, which opens the log', async function () {
    const { ctx, fake, log } = fakeContext();
    fake.folders = [folder(dir)];
    fake.answer = (s) => (s.kind === 'error' ? 'Show Logs' : undefined);
    await train(ctx);
    const [shown] = fake.shown;
    assert.ok(shown?.kind === 'error' && shown.message.startsWith('Cannot train: '), String(shown));
    assert.deepEqual(shown.items, ['Show Logs']);
    assert.equal(log.shown, 1);
  });

  it('Train on a Runpod target without an API key offers Set Runpod API Key before creating anything', async function () {
    const { ctx, fake } = fakeContext();
    fake.folders = [folder(dir)];
    fs.writeFileSync(path.join(dir, CONFIG_FILE), configTemplate());
    fs.writeFileSync(path.join(dir, 'axolotl.yaml'), 'base_model: m\n');
    fake.answer = (s) => (s.kind === 'error' ? 'Set Runpod API Key' : undefined);
    await train(ctx);
    const errors = fake.shown.filter((s) => s.kind === 'error');
    assert.equal(errors.length, 1);
    assert.deepEqual(errors[0]?.kind === 'error' && errors[0].items, ['Set Runpod API Key']);
    // The key step runs; no confirmation (nothing was created) was asked.
    assert.ok(
      fake.shown.some((s) => s.kind === 'command' && s.command === 'overbrainer.setApiKey'),
    );
    assert.ok(!fake.shown.some((s) => s.kind === 'info' && s.modal));
    assert.ok(!fs.existsSync(path.join(dir, 'runs')));
  });

  it('a command with no run it applies to says so instead of an empty pick', async function () {
    const ended = run(path.join(dir, 'runs', 'r1'), { state: 'succeeded', pod: null });
    const { ctx, fake } = fakeContext([ended]);
    await keep(ctx, undefined, true);
    await attach(ctx, undefined);
    assert.deepEqual(fake.messages(), [
      'info: Overbrainer: no run to keep the pod of.',
      'info: Overbrainer: no run to attach to.',
    ]);
  });

  it('picks among the runs a command applies to, by a QuickPick', async function () {
    const a = run(path.join(dir, 'runs', 'ra'));
    const b = run(path.join(dir, 'runs', 'rb'), { state: 'succeeded', pod: null });
    const { ctx, fake } = fakeContext([a, b]);
    const picked = await ctx.pickRun(undefined, (r) => r.state === 'running', 'cancel');
    assert.equal(picked, undefined);
    const pick = fake.shown[0];
    assert.ok(pick?.kind === 'quickPick');
    assert.deepEqual(
      (pick.items as { label: string }[]).map((i) => i.label),
      ['ra'],
    );
    assert.equal(pick.placeHolder, 'Run to cancel');
  });

  it('Cancel Run asks first; declining touches nothing', async function () {
    const r = run(path.join(dir, 'runs', 'r1'));
    const { ctx, fake } = fakeContext([r]);
    fake.folders = [folder(dir)];
    await cancel(ctx, r);
    assert.equal(fake.shown.length, 1);
    assert.ok(fake.shown[0]?.kind === 'warning');
    assert.ok(!fake.shown.some((s) => s.kind === 'progress'));
  });

  it('Resume Run on a run without a snapshot says why', async function () {
    const r = run(path.join(dir, 'runs', 'r1'), { state: 'succeeded', pod: null });
    const { ctx, fake } = fakeContext([r]);
    await resume(ctx, r);
    assert.deepEqual(fake.messages(), [
      'error: Overbrainer: run r1 has no snapshot to resume from (only a run stopped with a snapshot has one).',
    ]);
  });

  it('Remove Pod on a pod no run records asks with what it deletes; declining deletes nothing', async function () {
    const { ctx, fake } = fakeContext([]);
    fake.folders = [folder(dir)];
    await removePod(ctx, { podId: 'orphan1' });
    assert.equal(fake.shown.length, 1);
    const [ask] = fake.shown;
    assert.ok(ask?.kind === 'warning' && ask.modal);
    assert.match(ask.detail ?? '', /carries no run marker/);
    assert.ok(!fake.shown.some((s) => s.kind === 'progress'));
  });

  it("Remove on a cluster member's row (Pods view) asks to delete the whole cluster, naming it and its nodes; declining deletes nothing", async function () {
    const runDir = path.join(dir, 'runs', 'r1');
    const r = run(runDir, { pod: null, cluster: twoNodeCluster() });
    const { ctx, fake } = fakeContext([r]);
    fake.folders = [folder(dir)];
    await removePod(ctx, { podId: 'member-1', runId: 'r1', runDir });
    assert.equal(fake.shown.length, 1);
    const [ask] = fake.shown;
    assert.ok(ask?.kind === 'warning' && ask.modal, JSON.stringify(fake.shown));
    assert.match(ask.detail ?? '', /Deletes its cluster clu-1 with all 2 nodes/);
    assert.ok(!fake.shown.some((s) => s.kind === 'progress'));
  });

  it('Create overbrainer.toml writes the template once and opens it; an existing file is kept', async function () {
    const { ctx, fake } = fakeContext();
    fake.folders = [folder(dir)];
    const file = path.join(dir, CONFIG_FILE);
    await createConfig(ctx);
    assert.equal(fs.readFileSync(file, 'utf8'), configTemplate());
    fs.writeFileSync(file, '# mine\n');
    await createConfig(ctx);
    assert.equal(fs.readFileSync(file, 'utf8'), '# mine\n');
    assert.deepEqual(
      fake.shown.map((s) => (s.kind === 'document' ? s.fsPath : s.kind)),
      [file, file],
    );
  });

  it('an error needing the key offers Set Runpod API Key and runs it when chosen', async function () {
    const { ctx, fake, log } = fakeContext();
    fake.answer = () => 'Set Runpod API Key';
    await ctx.showError('Cannot list pods', new SetupError('no key', 'Set the key.', true));
    assert.deepEqual(fake.messages(), ['error: Cannot list pods: no key — Set the key.']);
    assert.ok(
      fake.shown.some((s) => s.kind === 'command' && s.command === 'overbrainer.setApiKey'),
    );
    assert.deepEqual(log.lines, ['error Cannot list pods: no key — Set the key.']);
  });

  it('a notification shows once per key, and its button runs the action', async function () {
    const r = run(path.join(dir, 'runs', 'r1'));
    let acted: [string, string | null] | null = null;
    const { ctx, fake } = fakeContext([r], async (_ctx, action, runId) => {
      acted = [action, runId];
    });
    fake.answer = () => 'Open Run';
    const n = {
      key: 'k',
      severity: 'warning' as const,
      message: 'slow',
      actions: ['Open Run' as const],
      runId: 'r1',
    };
    ctx.show(n);
    ctx.show(n);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(fake.messages(), ['warning: slow']);
    assert.deepEqual(acted, ['Open Run', 'r1']);
    await act(ctx, 'Open Run', 'r1');
    const open = fake.shown.find((s) => s.kind === 'command');
    assert.ok(open?.kind === 'command' && open.command === 'overbrainer.showRun');
    assert.equal((open.args[0] as RunSummary).id, 'r1');
  });

  it('Train opens the new run view beside the editor, unless overbrainer.openRunViewOnTrain is off', async function () {
    const r = run(path.join(dir, 'runs', 'r1'));
    const { ctx, fake } = fakeContext([r]);
    await ctx.openRunView(r.dir);
    assert.deepEqual(
      fake.shown.map((s) => (s.kind === 'command' ? [s.command, s.args] : s.kind)),
      [['overbrainer.showRun', [{ dir: r.dir, openOnTrain: true }]]],
    );
    fake.settings.set('openRunViewOnTrain', false);
    await ctx.openRunView(r.dir);
    assert.equal(fake.shown.length, 1);
  });
});
