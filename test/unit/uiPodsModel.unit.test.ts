import * as assert from 'node:assert/strict';
import { podsFromRuns, presentPod, PodsModel } from '../../src/ui/podsModel';
import type { PodSummary, RunSummary } from '../../src/ui/runsModel';

const NOW_S = 1_800_000_000;

function run(id: string, pod: Partial<PodSummary> | null): RunSummary {
  return {
    id,
    dir: `/w/runs/${id}`,
    workspaceName: 'w',
    target: 'runpod',
    createdUnixS: 1,
    state: 'running',
    message: null,
    problem: null,
    pod:
      pod === null
        ? null
        : {
            podId: 'p',
            state: 'running',
            gpuType: null,
            costPerHourUsd: null,
            deadlineUnixS: null,
            estimatedSpendUsd: null,
            keep: false,
            strayPodIds: [],
            ...pod,
          },
  };
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
});
