/**
 * Cancel Run and Attach on a run on a cluster with no Runpod API key set (issue 37): the same
 * "Set Runpod API Key" offer as for a run on one pod (a cluster run has no pod.json, but every
 * command on it calls Runpod's cluster API), never a bare no_api_key error with Show Logs.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { FlowError, keyProblem, Workspace } from '../../src/core/flow';
import { systemClock } from '../../src/core/clock';
import { EventBus } from '../../src/core/events';
import { PRODUCTION_TIMING } from '../../src/core/timing';
import { encodeRunRecord, type RunRecord } from '../../src/core/runs/runRecord';
import { cancel } from '../../src/ui/commands/stopCommands';
import { attach } from '../../src/ui/runs/following';
import { fakeContext, folder, runSummary, twoNodeCluster } from './uiFakeHost';

const CLUSTER = twoNodeCluster();

describe('Cancel and Attach on a cluster run (VS Code, the CLI)', function () {
  let dir: string;
  let runDir: string;
  beforeEach(function () {
    dir = fs.mkdtempSync(path.join(tmpdir(), 'ob-uicluster-'));
    runDir = path.join(dir, 'runs', 'r1');
    fs.mkdirSync(runDir, { recursive: true });
    const record: RunRecord = {
      id: 'r1',
      target: 'cluster',
      created: '2026-12-02T10:00:00Z',
      remoteDir: '/workspace/overbrainer/r1',
      job: { dir: '/workspace/overbrainer/r1', pid: 4242, container: null },
      state: 'running',
      message: null,
      cluster: CLUSTER,
    };
    fs.writeFileSync(path.join(runDir, 'run.json'), encodeRunRecord(record));
  });
  afterEach(function () {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  function clusterRun() {
    return runSummary(runDir, { pod: null, cluster: CLUSTER });
  }

  /** The one error shown offers the key and runs Set Runpod API Key when chosen. */
  function assertKeyOffered(fake: ReturnType<typeof fakeContext>['fake'], prefix: RegExp) {
    const errors = fake.shown.filter((s) => s.kind === 'error');
    assert.equal(errors.length, 1, JSON.stringify(fake.shown));
    const [error] = errors;
    assert.ok(error?.kind === 'error');
    assert.match(error.message, prefix);
    assert.deepEqual(error.items, ['Set Runpod API Key']);
    assert.ok(
      fake.shown.some((s) => s.kind === 'command' && s.command === 'overbrainer.setApiKey'),
    );
  }

  it('Cancel Run offers Set Runpod API Key', async function () {
    const r = clusterRun();
    const { ctx, fake } = fakeContext([r]);
    fake.folders = [folder(dir)];
    fake.answer = (s) =>
      s.kind === 'warning' ? 'Cancel Run' : s.kind === 'error' ? 'Set Runpod API Key' : undefined;
    await cancel(ctx, r);
    assertKeyOffered(fake, /^Cannot cancel r1: /);
  });

  it('Attach offers Set Runpod API Key', async function () {
    const r = clusterRun();
    const { ctx, fake } = fakeContext([r]);
    fake.folders = [folder(dir)];
    fake.answer = (s) => (s.kind === 'error' ? 'Set Runpod API Key' : undefined);
    await attach(ctx, r);
    assertKeyOffered(fake, /^Cannot attach to r1: /);
  });

  it('Cancel Run on a cluster run this window follows whose members cannot delete it: stopping the follow cancelled it (the cluster deleted); said as cancelled, not as an error', async function () {
    const r = clusterRun();
    const { ctx, fake, apiKeys } = fakeContext([r]);
    await apiKeys.set('rpa_TESTKEY0123456789');
    fake.folders = [folder(dir)];
    fake.answer = (s) => (s.kind === 'warning' ? 'Cancel Run' : undefined);
    // The follow of this window, its members' deletes refused: its abort ends the run as the flow
    // does then (cancelled, cluster gone).
    const abort = new AbortController();
    ctx.track('r1', {} as never, abort);
    abort.signal.addEventListener('abort', () => {
      const file = path.join(runDir, 'run.json');
      const record = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
      record.state = 'cancelled';
      record.message = 'cancelled: the whole cluster was deleted';
      fs.writeFileSync(file, JSON.stringify(record));
      ctx.untrack('r1');
    });
    await cancel(ctx, r);
    assert.ok(abort.signal.aborted);
    assert.ok(!fake.shown.some((s) => s.kind === 'error'), JSON.stringify(fake.shown));
    assert.ok(
      fake.shown.some((s) => s.kind === 'info' && /cancelled/.test(s.message)),
      JSON.stringify(fake.shown),
    );
  });

  it("the CLI's cancel and attach ask for the key first for a cluster run too (it has no pod.json)", function () {
    const ws = new Workspace({
      dir,
      env: {},
      bus: new EventBus(),
      clock: systemClock,
      timing: PRODUCTION_TIMING,
      owner: 'test',
    });
    assert.equal(ws.hasPodRecord('r1'), true);
    assert.equal(ws.hasPodRecord('no-such-run'), false);
  });

  it("the flow's own no_api_key error is a key problem too (any path that meets it offers the key)", function () {
    assert.equal(keyProblem(new FlowError('no_api_key', 'no Runpod API key is set')), true);
    assert.equal(keyProblem(new FlowError('no_pod', 'no pod')), false);
  });
});
