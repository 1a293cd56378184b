/**
 * `pod ls` and `pod rm` decision rules (src/core/pod/podAdmin.ts), with a
 * real RunStore in a temp dir and the real RunpodClient pointed at a small
 * scripted Runpod account on a loopback port (no network). Time is the real
 * clock shifted by a settable offset (pods "created 72 minutes ago"), with the
 * production timing scaled down so confirmations and gone-looks take
 * milliseconds.
 *
 * The scripted account and the shifted clock: test/helpers/podAccount.ts.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { EventBus, type CoreEvent } from '../../src/core/events';
import { RunpodClient } from '../../src/core/runpod/client';
import type { PodCtx } from '../../src/core/pod/context';
import {
  cell,
  FAILED_BY_POD_RM,
  listPods,
  orphanWarnings,
  PodAdminError,
  podTable,
  removePods,
  strayWarning,
  type PodRow,
} from '../../src/core/pod/podAdmin';
import { PodError } from '../../src/core/pod/podError';
import { newPodRecord, type PodState } from '../../src/core/runs/podRecord';
import type { RunRecord } from '../../src/core/runs/runRecord';
import { RunStore } from '../../src/core/runs/store';
import type { RunState } from '../../src/core/events';
import { scaleTiming } from '../../src/core/timing';
import { HOST_KEY, API_KEY, ShiftedClock, FakeAccount } from '../helpers/podAccount';

describe('podAdmin: pod ls and pod rm', () => {
  let tmp: string;
  let account: FakeAccount;
  let client: RunpodClient;
  let store: RunStore;
  let clock: ShiftedClock;
  let events: CoreEvent[];
  let ctx: PodCtx;

  beforeEach(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'podadmin-'));
    account = new FakeAccount();
    await account.start();
    clock = new ShiftedClock();
    const timing = scaleTiming(1000, {
      requestTimeoutMs: 5_000,
      connectTimeoutMs: 5_000,
      deleteConfirmMs: 150,
      retries: 1,
    });
    client = new RunpodClient({ baseUrl: account.baseUrl, apiKey: API_KEY, clock, timing });
    store = new RunStore(path.join(tmp, 'runs'), clock);
    const bus = new EventBus();
    events = [];
    bus.on((event) => events.push(event));
    ctx = { store, client, bus, clock, timing, version: '0.1.0' };
  });

  afterEach(async () => {
    await client.close();
    await account.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  function run(id: string, state: RunState): RunRecord {
    const record: RunRecord = {
      id,
      target: 'pod',
      created: '2026-09-29T11:00:00Z',
      remoteDir: `/workspace/overbrainer/${id}`,
      job:
        state === 'preparing'
          ? null
          : { dir: `/workspace/overbrainer/${id}`, pid: 4242, container: null },
      state,
      message: null,
    };
    store.saveRun(record);
    return record;
  }

  /** pod.json of `runId` holding `podId` in `state`, created `agoS` seconds ago at $0.53/h. */
  function recorded(
    runId: string,
    podId: string | null,
    state: PodState,
    options: { keep?: boolean; strays?: string[]; agoS?: number; lastAttemptHasPod?: boolean } = {},
  ): void {
    const record = newPodRecord(runId, options.keep ?? false, 1, HOST_KEY);
    const createdMs = clock.nowMs() - (options.agoS ?? 600) * 1000;
    record.beginAttempt('NVIDIA A40', createdMs, 6);
    if (podId !== null) {
      record.created(
        { id: podId, gpuTypeId: 'NVIDIA A40', costPerHourUsd: 0.53 },
        'created',
        createdMs,
      );
    }
    if (options.lastAttemptHasPod === false) record.beginAttempt('NVIDIA L40S', clock.nowMs(), 6);
    record.state = state;
    record.setStrayPods(options.strays ?? []);
    store.savePod(record);
    const ssh = store.sshDir(runId);
    fs.writeFileSync(path.join(ssh, 'id_ed25519'), 'PRIVATE KEY (test)\n', { mode: 0o600 });
  }

  const keyExists = (runId: string): boolean =>
    fs.existsSync(path.join(store.runDir(runId), 'ssh', 'id_ed25519'));
  const find = (rows: PodRow[], podId: string): PodRow => {
    const row = rows.find((r) => r.podId === podId);
    assert.ok(row, `no row for ${podId} in ${JSON.stringify(rows.map((r) => r.podId))}`);
    return row;
  };

  describe('listPods', () => {
    it('notes every pod overbrainer made from what runs/ says, and leaves foreign pods out', async () => {
      run('r_running', 'running');
      recorded('r_running', 'p1', 'running');
      run('r_done', 'succeeded');
      recorded('r_done', 'p2', 'running');
      run('r_kept', 'succeeded');
      recorded('r_kept', 'p3', 'kept', { keep: true, strays: ['s3'] });
      run('r_await', 'failed');
      recorded('r_await', 'p4', 'awaiting_retrieval');
      run('r_stray', 'succeeded');
      recorded('r_stray', 'p5', 'deleted', { strays: ['s5'] });
      fs.mkdirSync(store.runDir('r_broken'), { recursive: true });
      fs.writeFileSync(path.join(store.runDir('r_broken'), 'run.json'), '{"id": "r_broken", oops');
      account.add({ id: 'p1', marker: 'r_running' });
      account.add({ id: 'x1', marker: 'r_running' }); // a second pod of the run: a stray
      account.add({ id: 'p2', marker: 'r_done' });
      account.add({ id: 'p3', marker: 'r_kept' });
      account.add({ id: 's3', marker: 'r_kept' });
      account.add({ id: 'p4', marker: 'r_await' });
      account.add({ id: 's5', marker: 'r_stray' });
      account.add({ id: 'o1', marker: 'elsewhere_20260101-000000' });
      account.add({ id: 'u1', marker: 'r_broken' });
      account.add({ id: 'n1', name: 'overbrainer-lost-1', marker: null });
      account.add({ id: 'f1', name: 'my-notebook', marker: null });
      const rows = await listPods(ctx);
      const notes = Object.fromEntries(rows.map((r) => [r.podId, [r.kind, r.note, r.orphan]]));
      assert.deepEqual(notes, {
        p1: ['in_progress', 'run running', false],
        x1: ['stray', 'stray, not deleted', true],
        p2: ['ended', 'run succeeded, not deleted', true],
        p3: ['kept', 'kept', false],
        s3: ['stray_beside_kept', 'stray, not deleted', true],
        p4: ['awaiting_retrieval', 'awaiting retrieval', false],
        s5: ['stray', 'stray, not deleted', true],
        o1: [
          'not_in_runs',
          "not in this project's runs/; if no other checkout owns it, `overbrainer pod rm elsewhere_20260101-000000 --force`",
          true,
        ],
        u1: ['unreadable', 'run record unreadable', false],
        n1: ['no_marker', 'no run marker', true],
      });
      // Sorted by run then pod; a pod without a marker has no run.
      assert.deepEqual(
        rows.map((r) => `${r.runId ?? '-'} ${r.podId}`),
        [
          '- n1',
          'elsewhere_20260101-000000 o1',
          'r_await p4',
          'r_broken u1',
          'r_done p2',
          'r_kept p3',
          'r_kept s3',
          'r_running p1',
          'r_running x1',
          'r_stray s5',
        ],
      );
      const row = find(rows, 'p1');
      assert.equal(row.status, 'RUNNING');
      assert.equal(row.gpu, 'NVIDIA A40');
      assert.equal(row.costPerHourUsd, 0.53);
      assert.equal(row.created, '2026-09-29T11:00:00Z');
      assert.deepEqual(account.deletes(), [], 'listing never deletes');
    });

    it('reduces text from the account to one short line of printable ASCII', async () => {
      account.add({
        id: 'h1',
        marker: null,
        name: 'overbrainer-\u001b[31mevil',
        status: 'RUNNING\u001b[2J\nrm -rf',
        gpu: `GPU\u0007${'y'.repeat(200)}`,
        createdAt: 'z\u00e9\r\n',
      });
      const [row] = await listPods(ctx);
      assert.ok(row);
      assert.equal(row.status, 'RUNNING[2Jrm -rf');
      assert.equal(row.gpu?.length, 64);
      assert.ok(row.gpu?.startsWith('GPUyyy'));
      assert.equal(row.created, 'z');
      assert.equal(cell('run\u001b[31m\nx\u00e9'), 'run[31mx');
    });

    it('records a recorded pod gone only after repeated 404s and a list without it; forgets its key', async () => {
      // The estimate is uptime × rate: read the clock once, so a loaded machine's slower looks
      // cannot add a second to the 600 s.
      clock.freeze();
      run('r_gone', 'running');
      recorded('r_gone', 'g1', 'running');
      run('r_strayg', 'succeeded');
      recorded('r_strayg', 'p9', 'deleted', { strays: ['sg'] });
      const rows = await listPods(ctx);
      const row = find(rows, 'g1');
      assert.deepEqual(
        [row.status, row.kind, row.note, row.runId],
        ['GONE', 'gone', 'gone', 'r_gone'],
      );
      assert.equal(row.gpu, 'NVIDIA A40');
      assert.equal(
        rows.find((r) => r.podId === 'sg'),
        undefined,
        'a stray found gone has no row',
      );
      const pod = store.loadPod('r_gone');
      assert.equal(pod?.state, 'deleted');
      assert.equal(pod?.deletedBy, 'unknown');
      assert.equal(pod?.estimatedSpendUsd, 0.0883); // 600 s at $0.53/h
      assert.equal(keyExists('r_gone'), false);
      assert.deepEqual(store.loadPod('r_strayg')?.strayPods, []);
      // Three looks each, then one list.
      assert.equal(account.requests.filter((r) => r === 'GET /v2/pods/g1').length, 3);
      assert.equal(account.requests.filter((r) => r === 'GET /v2/pods').length, 2);
      assert.equal(store.loadRun('r_gone').state, 'running', 'pod ls never changes a run');
    });

    it('a recorded pod the list leaves out but a look finds is listed from that look', async () => {
      run('r_lag', 'running');
      recorded('r_lag', 'b1', 'running');
      account.add({ id: 'b1', marker: 'r_lag', unlisted: true, phantom404: 1 });
      const rows = await listPods(ctx);
      const row = find(rows, 'b1');
      assert.deepEqual([row.status, row.kind], ['RUNNING', 'in_progress']);
      assert.equal(account.requests.filter((r) => r === 'GET /v2/pods/b1').length, 2);
      assert.equal(store.loadPod('r_lag')?.state, 'running');
      assert.equal(keyExists('r_lag'), true);
    });

    it('a pod whose look fails is UNCHECKED, and nothing is recorded', async () => {
      run('r_err', 'running');
      recorded('r_err', 'e1', 'running');
      account.add({ id: 'e1', marker: 'r_err', broken: true, unlisted: true });
      const rows = await listPods(ctx);
      const row = find(rows, 'e1');
      assert.deepEqual(
        [row.status, row.kind, row.note],
        ['UNCHECKED', 'in_progress', 'run running'],
      );
      assert.equal(store.loadPod('r_err')?.state, 'running');
      assert.ok(
        events.some(
          (e) =>
            e.type === 'log' && e.level === 'warn' && e.message.includes('cannot look up pod e1'),
        ),
      );
    });

    it('without lookUpUnlisted: one list, no look, nothing recorded (the warning before train)', async () => {
      run('r_gone', 'running');
      recorded('r_gone', 'g1', 'running');
      run('r_done', 'succeeded');
      recorded('r_done', 'p2', 'running');
      account.add({ id: 'p2', marker: 'r_done' });
      const rows = await listPods(ctx, { lookUpUnlisted: false });
      assert.deepEqual(
        rows.map((r) => r.podId),
        ['p2'],
      );
      assert.deepEqual(account.requests, ['GET /v2/pods']);
      assert.equal(store.loadPod('r_gone')?.state, 'running');
    });
  });

  describe('the table and the warnings', () => {
    const row = (
      runId: string | null,
      kind: PodRow['kind'],
      note: string,
      orphan: boolean,
    ): PodRow => ({
      runId,
      podId: 'k3x9abc',
      status: 'RUNNING',
      gpu: 'NVIDIA A40',
      costPerHourUsd: 0.49,
      created: '2026-09-21T09:00:03Z',
      note,
      kind,
      orphan,
    });

    it('warns only about pods nothing will delete, each with a safe way out', () => {
      const rows = [
        row('r1', 'in_progress', 'run running', false),
        row('r2', 'ended', 'run succeeded, not deleted', true),
        row(
          'r3',
          'not_in_runs',
          "not in this project's runs/; if no other checkout owns it, `overbrainer pod rm r3 --force`",
          true,
        ),
        row('r4', 'kept', 'kept', false),
        row('r5', 'awaiting_retrieval', 'awaiting retrieval', false),
        row('r6', 'stray', 'stray, not deleted', true),
        row('r7', 'stray_beside_kept', 'stray, not deleted', true),
        row(null, 'no_marker', 'no run marker', true),
        row('r8', 'unreadable', 'run record unreadable', false),
        row('r9', 'gone', 'gone', false),
      ];
      assert.deepEqual(orphanWarnings(rows), [
        'pod k3x9abc (run succeeded, not deleted) is still on Runpod at $0.49/h: remove it with `overbrainer pod rm r2`',
        "pod k3x9abc is still on Runpod at $0.49/h: not in this project's runs/; if no other checkout owns it, `overbrainer pod rm r3 --force`",
        'pod k3x9abc (stray, not deleted) is still on Runpod at $0.49/h: remove it with `overbrainer pod rm r6`',
        "pod k3x9abc (stray, not deleted) is still on Runpod at $0.49/h: remove it with `overbrainer pod rm r7` (this also deletes the run's kept pod)",
        'pod k3x9abc is named like an overbrainer pod but has no run marker; if it is yours, delete it from the Runpod console',
      ]);
      assert.equal(strayWarning(rows.filter((r) => !r.orphan)), null);
      assert.equal(strayWarning(rows)?.split('\n').length, 5);
    });

    it('aligns its columns, and prints nothing without a row', () => {
      assert.deepEqual(podTable([]), []);
      assert.deepEqual(
        podTable([row('tiny_20260921-090000', 'ended', 'run succeeded, not deleted', true)]),
        [
          'RUN                           POD             STATUS        GPU                         $/H  CREATED               NOTE',
          'tiny_20260921-090000          k3x9abc         RUNNING       NVIDIA A40                 0.49  2026-09-21T09:00:03Z  run succeeded, not deleted',
        ],
      );
    });
  });

  describe('removePods', () => {
    it('refuses a run not in runs/ (nothing deleted); --force deletes the pods carrying its marker', async () => {
      account.add({ id: 'o1', marker: 'other_20260101-000000' });
      account.add({ id: 'o2', marker: 'other_20260101-000000' });
      account.add({ id: 'f1', marker: 'foreign_20260101-000000' });
      const refused = await removePods(ctx, 'other_20260101-000000');
      assert.ok(refused.error instanceof PodAdminError);
      assert.equal(refused.error.kind, 'not_in_runs');
      assert.match(
        refused.error.message,
        /is not in this project's runs\/: its pods may belong to another checkout; if none owns it, pass --force/,
      );
      assert.deepEqual(account.deletes(), []);
      const forced = await removePods(ctx, 'other_20260101-000000', { force: true });
      assert.equal(forced.error, null);
      assert.deepEqual(forced.removed.map((p) => p.podId).sort(), ['o1', 'o2']);
      assert.deepEqual([...account.pods.keys()], ['f1']);
      assert.equal(
        fs.existsSync(store.runDir('other_20260101-000000')),
        false,
        'no folder is made for it',
      );
    });

    it('refuses a run still starting its pod: preparing, or running with an unanswered last create', async () => {
      run('r_prep', 'preparing');
      recorded('r_prep', 'p1', 'provisioning');
      account.add({ id: 'p1', marker: 'r_prep' });
      run('r_walk', 'running');
      recorded('r_walk', null, 'creating', { lastAttemptHasPod: false });
      account.add({ id: 'w1', marker: 'r_walk' });
      for (const id of ['r_prep', 'r_walk']) {
        const removal = await removePods(ctx, id);
        assert.ok(removal.error instanceof PodAdminError, String(removal.error));
        assert.equal(removal.error.kind, 'still_starting');
        assert.equal(
          removal.error.message,
          `run ${id} is still starting its pod; wait for it, or use \`overbrainer train cancel ${id}\` once it runs, or \`pod rm ${id} --force\``,
        );
      }
      assert.deepEqual(account.deletes(), []);
    });

    it('refuses a running run whose pod is not recorded: any pod of it may be training', async () => {
      run('r_norec', 'running');
      recorded('r_norec', 'p1', 'deleted');
      account.add({ id: 'n1', marker: 'r_norec' });
      const removal = await removePods(ctx, 'r_norec');
      assert.ok(removal.error instanceof PodAdminError);
      assert.equal(removal.error.kind, 'pod_not_recorded');
      assert.equal(
        removal.error.message,
        'run r_norec is in progress but its pod is not recorded, so its pods are left alone; if the run is really dead, use `overbrainer pod rm r_norec --force`',
      );
      assert.deepEqual(account.deletes(), []);
    });

    it('of a running run keeps its training pod, deletes the others, and says so', async () => {
      run('r_run', 'running');
      recorded('r_run', 'p1', 'running', { strays: ['s1'] });
      account.add({ id: 'p1', marker: 'r_run' });
      account.add({ id: 's1', marker: 'r_run' });
      account.add({ id: 'x2', marker: 'r_run' });
      const removal = await removePods(ctx, 'r_run');
      assert.ok(removal.error instanceof PodAdminError);
      assert.equal(removal.error.kind, 'run_still_running');
      assert.equal(
        removal.error.message,
        'run r_run is still running: its training pod p1 was kept, and its other pods s1, x2 were deleted; stop it with `overbrainer train cancel r_run` first, or pass --force',
      );
      assert.deepEqual(
        removal.removed.map((p) => p.podId),
        ['s1', 'x2'],
      );
      assert.deepEqual(account.deletes(), ['s1', 'x2']);
      const pod = store.loadPod('r_run');
      assert.equal(pod?.state, 'running');
      assert.deepEqual(pod?.strayPods, []);
      assert.equal(store.loadRun('r_run').state, 'running');
      assert.equal(keyExists('r_run'), true, 'the training pod still needs its key');
    });

    it('by pod ID (`only`): a stray of a running run goes without a refusal; its training pod is refused as the run is', async () => {
      run('r_run', 'running');
      recorded('r_run', 'p1', 'running', { strays: ['s1'] });
      account.add({ id: 'p1', marker: 'r_run' });
      account.add({ id: 's1', marker: 'r_run' });
      account.add({ id: 'x2', marker: 'r_run' });
      const stray = await removePods(ctx, 'r_run', { only: 's1' });
      assert.equal(stray.error, null);
      assert.deepEqual(
        stray.removed.map((p) => p.podId),
        ['s1'],
      );
      const training = await removePods(ctx, 'r_run', { only: 'p1' });
      assert.ok(training.error instanceof PodAdminError);
      assert.equal(
        training.error.message,
        'run r_run is still running: its training pod p1 was kept; stop it with `overbrainer train cancel r_run` first, or pass --force',
      );
      assert.deepEqual(account.deletes(), ['s1'], 'x2 and p1 were not chosen');
      assert.equal(keyExists('r_run'), true);
    });

    it('a recorded pod the account does not have is reported already gone, with no time or spend, and recorded gone', async () => {
      run('r_gone', 'succeeded');
      recorded('r_gone', 'p9', 'kept', { keep: true, agoS: 3600 });
      const removal = await removePods(ctx, 'r_gone');
      assert.equal(removal.error, null);
      assert.deepEqual(removal.removed, [
        { podId: 'p9', alreadyGone: true, uptimeMs: null, estimatedSpendUsd: null },
      ]);
      assert.equal(store.loadPod('r_gone')?.state, 'deleted');
    });

    it('--force deletes the training pod of a running run too, fails the run, forgets its keys', async () => {
      run('r_run', 'running');
      recorded('r_run', 'p1', 'running', { agoS: 72 * 60 });
      account.add({ id: 'p1', marker: 'r_run' });
      account.secrets.set('sec1', 'overbrainer_host_key_r_run');
      const removal = await removePods(ctx, 'r_run', { force: true });
      assert.equal(removal.error, null);
      // Uptime in whole seconds on the real clock: a loaded machine may cross a second or two
      // between the record and the delete (72 min at $0.53/h is $0.636; a second more, $0.6361).
      assert.equal(removal.removed.length, 1);
      const [removed] = removal.removed;
      assert.equal(removed?.podId, 'p1');
      const extraMs = (removed?.uptimeMs ?? 0) - 72 * 60_000;
      assert.ok(extraMs >= 0 && extraMs <= 5_000, `uptime ${removed?.uptimeMs}`);
      assert.ok(Math.abs((removed?.estimatedSpendUsd ?? 0) - 0.636) <= 0.001);
      const pod = store.loadPod('r_run');
      assert.equal(pod?.state, 'deleted');
      assert.equal(pod?.deletedBy, 'pod_rm');
      const record = store.loadRun('r_run');
      assert.equal(record.state, 'failed');
      assert.equal(record.message, FAILED_BY_POD_RM);
      assert.equal(keyExists('r_run'), false);
      assert.equal(account.secrets.size, 0, 'the host-key secret is gone too');
      assert.ok(
        events.some(
          (e) =>
            e.type === 'pod' && e.status.kind === 'deleting' && e.status.reason === 'requested',
        ),
      );
    });

    it('deletes the kept pod of an ended run without --force, and leaves the run as it ended', async () => {
      run('r_kept', 'succeeded');
      recorded('r_kept', 'p3', 'kept', { keep: true });
      account.add({ id: 'p3', marker: 'r_kept' });
      const removal = await removePods(ctx, 'r_kept');
      assert.equal(removal.error, null);
      assert.deepEqual(
        removal.removed.map((p) => p.podId),
        ['p3'],
      );
      assert.equal(store.loadPod('r_kept')?.deletedBy, 'pod_rm');
      assert.equal(store.loadRun('r_kept').state, 'succeeded');
      assert.equal(store.loadRun('r_kept').message, null);
    });

    it('a run another client follows counts as running: refused, then --force deletes it', async () => {
      run('r_followed', 'succeeded'); // attach collecting an ended run
      recorded('r_followed', 'p1', 'running');
      account.add({ id: 'p1', marker: 'r_followed' });
      const follower = store.lock('r_followed', 'VS Code window');
      assert.ok(follower);
      try {
        const refused = await removePods(ctx, 'r_followed');
        assert.ok(refused.error instanceof PodAdminError);
        assert.equal(refused.error.kind, 'run_still_running');
        assert.match(
          refused.error.message,
          /^run r_followed is followed by another client \(VS Code window, pid \d+\): its training pod p1 was kept; stop it with/,
        );
        assert.deepEqual(account.deletes(), []);
        const forced = await removePods(ctx, 'r_followed', { force: true });
        assert.equal(forced.error, null);
        assert.deepEqual(account.deletes(), ['p1']);
        assert.equal(store.loadRun('r_followed').state, 'succeeded', 'an ended run is not failed');
      } finally {
        follower.dispose();
      }
    });

    it('takes the run lock while it deletes, and gives it back', async () => {
      run('r_done', 'succeeded');
      recorded('r_done', 'p2', 'running');
      account.add({ id: 'p2', marker: 'r_done' });
      const removal = await removePods(ctx, 'r_done');
      assert.equal(removal.error, null);
      assert.equal(store.lockHolder('r_done'), null);
    });

    it('reports a delete it cannot confirm, keeps going, and records the pod as a stray', async () => {
      run('r_sticky', 'failed');
      recorded('r_sticky', 'p1', 'running');
      account.add({ id: 'p1', marker: 'r_sticky' });
      account.add({ id: 'k1', marker: 'r_sticky', sticky: true });
      account.secrets.set('sec1', 'overbrainer_host_key_r_sticky');
      const removal = await removePods(ctx, 'r_sticky');
      assert.ok(removal.error instanceof PodError);
      assert.equal(removal.error.kind, 'not_deleted');
      assert.match(removal.error.message, /^pod k1 may still exist and bill/);
      assert.deepEqual(
        removal.removed.map((p) => p.podId),
        ['p1'],
      );
      assert.deepEqual(store.loadPod('r_sticky')?.strayPods, ['k1']);
      assert.equal(account.secrets.size, 1, 'a pod may be left: its host-key secret stays');
    });

    it('with nothing to delete: no pod, no error', async () => {
      run('r_clean', 'succeeded');
      recorded('r_clean', 'p1', 'deleted');
      const removal = await removePods(ctx, 'r_clean');
      assert.deepEqual(removal, { runId: 'r_clean', removed: [], error: null });
    });

    it('refuses an ID that would leave runs/', async () => {
      const removal = await removePods(ctx, '../etc');
      assert.match(String((removal.error as Error).message), /is not a valid run ID/);
      assert.deepEqual(account.requests, []);
    });
  });
});
