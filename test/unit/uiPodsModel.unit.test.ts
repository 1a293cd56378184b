import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import type { Pod } from '../../src/core/runpod/api';
import { ApiError } from '../../src/core/runpod/apiErrors';
import { newPodRecord } from '../../src/core/runs/podRecord';
import { RunStore } from '../../src/core/runs/store';
import {
  ACCOUNT_LIST_INTERVAL_MS,
  classifyAccountPods,
  isPodsMessage,
  listingProblem,
  podsFromRuns,
  PodsModel,
  type PodEntry,
  type PodsItem,
  type PodsSource,
} from '../../src/ui/pods/podsModel';
import { podsViewMessage, presentPod, presentPodsItem } from '../../src/ui/pods/podsView';
import type { PodSummary, RunSummary } from '../../src/ui/runs/runsModel';
import { readRuns } from '../../src/ui/runs/runsSource';
import { SetupError } from '../../src/core/flow';
import { accountPod, podSummary, runSummary, useTempStore } from './uiFakeHost';

const NOW_S = 1_800_000_000;

function run(id: string, pod: Partial<PodSummary> | null): RunSummary {
  return runSummary(`/w/runs/${id}`, {
    target: 'runpod',
    pod: pod === null ? null : podSummary('p', pod),
  });
}

describe('ui pods model', function () {
  it('lists the pods the run records say may still exist, and their strays', function () {
    const pods = podsFromRuns([
      run('local', null),
      run('gone', { podId: 'p-gone', state: 'deleted' }),
      run('creating', { podId: null, state: 'creating' }),
      run('live', { podId: 'p-live', state: 'running', costPerHourUsd: 0.5 }),
      run('kept', { podId: 'p-kept', state: 'kept', keep: true }),
      run('await', { podId: 'p-await', state: 'awaiting_retrieval' }),
      run('del', { podId: 'p-del', state: 'deleting', strayPodIds: ['p-stray'] }),
    ]);
    assert.deepEqual(
      pods.map((p) => [p.podId, p.role, p.runId]),
      [
        ['p-live', 'running', 'live'],
        ['p-kept', 'kept', 'kept'],
        ['p-await', 'awaiting', 'await'],
        ['p-del', 'deleting', 'del'],
        ['p-stray', 'stray', 'del'],
      ],
    );
  });

  it("without the account's list, a cluster run's live members are its pods (run.json's cluster, not pod.json)", function () {
    const node = (rank: number, podId: string) => ({
      rank,
      podId,
      ip: null,
      state: 'running' as const,
      deadlineUnixS: NOW_S + 3600,
      costCapAtUnixS: null,
      message: null,
    });
    const cluster = {
      id: 'clu-1',
      name: 'overbrainer-ddp-c1',
      gpuTypeId: 'NVIDIA A40',
      gpuCountPerPod: 1,
      costPerHourUsd: 0.44,
      createdAt: '2026-12-02T10:00:00Z',
      deletedAt: null,
      nodes: [node(0, 'm0'), node(1, 'm1')],
      billedUsd: null,
      billedCheckedAt: null,
    };
    const live = runSummary('/w/runs/ddp', { target: 'cluster', pod: null, cluster });
    const gone = runSummary('/w/runs/old', {
      target: 'cluster',
      pod: null,
      cluster: { ...cluster, id: 'clu-0', deletedAt: '2026-12-02T11:00:00Z' },
    });
    const pods = podsFromRuns([live, gone]);
    assert.deepEqual(
      pods.map((p) => [p.podId, p.role, p.runId, p.gpuType, p.costPerHourUsd, p.note]),
      [
        ['m0', 'running', 'ddp', 'NVIDIA A40', 0.44, 'node 0 of cluster clu-1'],
        ['m1', 'running', 'ddp', 'NVIDIA A40', 0.44, 'node 1 of cluster clu-1'],
      ],
    );
  });

  it('presents a pod with its role as the menus expect', function () {
    const [live] = podsFromRuns([
      run('live', {
        podId: 'p-live',
        gpuType: 'NVIDIA A40',
        costPerHourUsd: 0.44,
        deadlineUnixS: NOW_S + 90 * 60,
      }),
    ]);
    assert.ok(live);
    const view = presentPod(live, NOW_S);
    assert.equal(view.label, 'p-live');
    assert.equal(view.description, 'in use · live · NVIDIA A40 · $0.44/h · 1h 30m left');
    assert.equal(view.contextValue, 'pod.running');
    const [stray] = podsFromRuns([run('r', { state: 'deleted', strayPodIds: ['s1'] })]);
    assert.ok(stray);
    assert.equal(presentPod(stray, NOW_S).contextValue, 'pod.stray');
    assert.match(presentPod(stray, NOW_S).tooltip, /may be billing/);
  });

  it('loads lazily', async function () {
    let loads = 0;
    const model = new PodsModel(async () => {
      loads += 1;
      return [];
    });
    assert.equal(model.isLoaded, false);
    await model.ensureLoaded();
    await model.ensureLoaded();
    assert.equal(loads, 1);
    await model.refresh();
    assert.equal(loads, 2);
  });

  describe('the account listing', function () {
    const HOST_KEY =
      'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl';
    const t = useTempStore('overbrainer-ui-pods-');

    /** A run of the t.store with a pod record (podId in `podState`). */
    function recordRun(
      state: 'running' | 'succeeded',
      podId: string,
      podState: 'running' | 'kept' | 'deleted',
    ): string {
      const run = t.store.create({ project: 'tiny', target: 'runpod', remoteDir: (id) => id });
      run.state = state;
      t.store.saveRun(run);
      const pod = newPodRecord(run.id, podState === 'kept', 1, HOST_KEY);
      pod.beginAttempt('NVIDIA A40', t.clock.nowMs(), 12);
      pod.created({ id: podId, costPerHourUsd: 0.44 }, 'created', t.clock.nowMs());
      pod.state = podState;
      t.store.savePod(pod);
      return run.id;
    }

    /** A source counting API calls, over the real t.store and records. */
    function source(account: () => Promise<readonly Pod[]>): PodsSource & { calls: number } {
      const src = {
        calls: 0,
        fetchAccountPods: async () => {
          src.calls += 1;
          return account();
        },
        classify: (pods: readonly Pod[]) => classifyAccountPods(pods, [t.store]),
        localRuns: () => readRuns([{ dir: t.store.runsDir, workspaceName: 'w' }]),
      };
      return src;
    }

    const pods = (model: PodsModel): PodEntry[] =>
      model.all.filter((item): item is PodEntry => !isPodsMessage(item));

    it('flags strays and orphans of the account with the rules of pod ls', async function () {
      const live = recordRun('running', 'plive', 'running');
      t.clock.nowMs = (
        (t) => () =>
          t
      )(t.clock.nowMs() + 1000); // a second run ID
      const ended = recordRun('succeeded', 'pended', 'running');
      const account = [
        accountPod('plive', live),
        accountPod('pdup', live),
        accountPod('pended', ended),
        accountPod('pelse', 'other_20261201-000000'),
        accountPod('pnomark', null, 'overbrainer-lost'),
        accountPod('foreign', null, 'my-notebook'),
      ];
      const model = new PodsModel(
        source(async () => account),
        { clock: t.clock },
      );
      await model.refresh();
      const byId = new Map(pods(model).map((p) => [p.podId, p]));
      assert.equal(
        byId.has('foreign'),
        false,
        'a pod without marker or overbrainer name is not ours',
      );
      assert.equal(byId.get('plive')?.role, 'running');
      assert.equal(byId.get('plive')?.runDir, t.store.runDir(live));
      assert.equal(byId.get('pdup')?.role, 'stray');
      assert.equal(byId.get('pended')?.role, 'orphan');
      assert.match(byId.get('pended')?.note ?? '', /run succeeded, not deleted/);
      assert.equal(byId.get('pelse')?.role, 'orphan');
      assert.equal(byId.get('pelse')?.runDir, null, 'an orphan without a run here: no run dir');
      assert.equal(byId.get('pelse')?.runId, 'other_20261201-000000');
      assert.equal(byId.get('pnomark')?.role, 'orphan');
      assert.equal(pods(model)[0]?.role, 'orphan', 'the pods needing the user come first');
      const view = presentPod(byId.get('pelse')!, t.clock.nowMs() / 1000);
      assert.equal(view.contextValue, 'pod.orphan');
      assert.match(
        view.description,
        /^orphan · other_20261201-000000 · RUNNING · NVIDIA A40 · \$0\.44\/h$/,
      );
      assert.match(view.tooltip, /may be billing/);
    });

    it('lists the account at most once a minute; a refresh inside it reuses the list on fresh records', async function () {
      const id = recordRun('running', 'p1', 'running');
      const src = source(async () => [accountPod('p1', id)]);
      const model = new PodsModel(src, { clock: t.clock, debounceMs: 0 });
      await model.refresh();
      assert.equal(src.calls, 1);
      const fetchedAt = t.clock.nowMs();
      assert.deepEqual(model.listing, {
        fetchedAtMs: fetchedAt,
        fromAccount: true,
        nextFetchAtMs: fetchedAt + ACCOUNT_LIST_INTERVAL_MS,
      });
      // Another window deletes the pod and records it: the cached list no longer shows it.
      const pod = t.store.loadPod(id)!;
      pod.deleted('client', t.clock.nowMs());
      t.store.savePod(pod);
      await t.clock.advanceMs(30_000);
      await model.refresh();
      await model.refresh();
      assert.equal(src.calls, 1, 'no second call inside the minute');
      assert.deepEqual(pods(model), []);
      assert.match(
        podsViewMessage(model.listing, t.clock.nowMs(), (ms) =>
          new Date(ms).toISOString().slice(11, 19),
        ),
        /^Runpod account listed at 12:00:00 \(30s ago\); listed again on a refresh after 12:01:00\.$/,
      );
      await t.clock.advanceMs(30_000);
      await model.refresh();
      assert.equal(src.calls, 2, 'a minute later the account is listed again');
    });

    it('drops at once a pod this window saw deleted, and shows pods created since the listing', async function () {
      const a = recordRun('running', 'pa', 'running');
      const src = source(async () => [accountPod('pa', a), accountPod('pdup', a)]);
      const model = new PodsModel(src, { clock: t.clock, debounceMs: 0 });
      await model.refresh();
      assert.deepEqual(
        pods(model)
          .map((p) => p.podId)
          .sort(),
        ['pa', 'pdup'],
      );
      model.noteDeleted('pdup');
      t.clock.nowMs = (
        (t) => () =>
          t
      )(t.clock.nowMs() + 1000);
      const b = recordRun('running', 'pb', 'running');
      await model.refresh();
      assert.equal(src.calls, 1);
      const shown = pods(model);
      assert.deepEqual(shown.map((p) => p.podId).sort(), ['pa', 'pb']);
      const pb = shown.find((p) => p.podId === 'pb');
      assert.equal(pb?.runDir, t.store.runDir(b));
      assert.equal(pb?.source, 'records');
      assert.match(pb?.note ?? '', /not in the account’s last listing/);
    });

    it('without a key: the records’ pods and "Set Runpod API Key", and tries again on the next refresh', async function () {
      recordRun('running', 'p1', 'running');
      let key = false;
      const src = source(async () => {
        if (!key) throw new SetupError('No Runpod API key is set.', 'Set it.', true);
        return [];
      });
      const model = new PodsModel(src, { clock: t.clock, debounceMs: 0 });
      await model.refresh();
      const [first, ...rest] = model.all;
      assert.ok(first && isPodsMessage(first));
      assert.equal(first.text, 'Set Runpod API Key');
      assert.deepEqual(first.command, { id: 'overbrainer.setApiKey', title: 'Set Runpod API Key' });
      assert.deepEqual(
        rest.map((p) => (p as PodEntry).podId),
        ['p1'],
      );
      assert.equal(model.listing.fromAccount, false);
      const view = presentPodsItem(first, 0);
      assert.deepEqual(view.command, first.command);
      // No call was made without a key: setting one lists the account at once.
      key = true;
      await model.refresh();
      assert.equal(model.listing.fromAccount, true);
      assert.equal(model.all.some(isPodsMessage), false);
    });

    it('Runpod down: the records’ pods and "Runpod unreachable", not retried inside the minute', async function () {
      recordRun('running', 'p1', 'running');
      const src = source(async () => {
        throw new ApiError('transport', 'connect ECONNREFUSED 127.0.0.1:1');
      });
      const model = new PodsModel(src, { clock: t.clock, debounceMs: 0 });
      await model.refresh();
      await model.refresh();
      assert.equal(src.calls, 1, 'a failed call counts: Runpod is not hammered');
      const message = model.all[0] as PodsItem;
      assert.ok(isPodsMessage(message));
      assert.equal(message.text, 'Runpod unreachable: connect ECONNREFUSED 127.0.0.1:1');
      assert.equal(message.command?.id, 'overbrainer.refreshPods');
      assert.deepEqual(
        pods(model).map((p) => p.podId),
        ['p1'],
      );
      assert.match(
        podsViewMessage(model.listing, t.clock.nowMs(), () => 'T'),
        /^From the local run records: the account could not be listed at T\.$/,
      );
      const refused = listingProblem(new ApiError('unauthorized', 'Unauthorized'));
      assert.equal(refused.text, 'Runpod refused the API key');
      assert.equal(refused.command?.id, 'overbrainer.setApiKey');
    });

    it('debounces a burst of refreshes into one load; the first load is immediate', async function () {
      let loads = 0;
      const model = new PodsModel(
        async () => {
          loads += 1;
          return [];
        },
        { clock: t.clock, debounceMs: 500 },
      );
      await model.refresh();
      assert.equal(loads, 1);
      const burst = [model.refresh(), model.refresh(), model.refresh()];
      await t.clock.advanceMs(499);
      assert.equal(loads, 1);
      await t.clock.advanceMs(1);
      await Promise.all(burst);
      assert.equal(loads, 2);
    });

    it('takes the row of the folder that knows the run when several folders hold runs', async function () {
      const id = recordRun('running', 'p1', 'running');
      const other = new RunStore(path.join(t.root, 'other-runs'), t.clock);
      const rows = await classifyAccountPods([accountPod('p1', id)], [other, t.store]);
      assert.deepEqual(
        rows.map((r) => [r.podId, r.kind]),
        [['p1', 'in_progress']],
      );
    });
  });
});
