import * as assert from 'node:assert/strict';
import {
  compareRunsNewestFirst,
  displayState,
  escapeMarkdown,
  formatDurationS,
  presentRun,
  RunsModel,
  type PodSummary,
  type RunSummary,
} from '../../src/ui/runsModel';

const NOW_S = Date.parse('2026-12-02T12:00:00Z') / 1000;

function run(overrides: Partial<RunSummary> = {}): RunSummary {
  return {
    id: 'tiny_20261202-100000',
    dir: '/w/runs/tiny_20261202-100000',
    workspaceName: 'w',
    target: 'runpod',
    createdUnixS: Date.parse('2026-12-02T10:00:00Z') / 1000,
    state: 'running',
    message: null,
    pod: null,
    problem: null,
    ...overrides,
  };
}

function pod(overrides: Partial<PodSummary> = {}): PodSummary {
  return {
    podId: 'pod-1',
    state: 'running',
    gpuType: 'NVIDIA RTX A5000',
    costPerHourUsd: 0.29,
    deadlineUnixS: NOW_S + 4 * 3600 + 12 * 60,
    estimatedSpendUsd: null,
    keep: false,
    strayPodIds: [],
    ...overrides,
  };
}

describe('ui runs model', function () {
  describe('presentRun', function () {
    it('shows a running run with its pod, rate and time left', function () {
      const view = presentRun(run({ pod: pod() }), NOW_S);
      assert.equal(view.label, 'tiny_20261202-100000');
      assert.equal(view.description, 'running · runpod · pod running · $0.29/h · 4h 12m left');
      assert.equal(view.contextValue, 'run.running');
      assert.deepEqual([view.iconId, view.colorId], ['play-circle', 'charts.blue']);
    });

    it('says the deadline passed instead of a negative time', function () {
      const view = presentRun(run({ pod: pod({ deadlineUnixS: NOW_S - 1 }) }), NOW_S);
      assert.match(view.description, /deadline passed$/);
    });

    it('shows the spend estimate once the pod is deleted, and no rate', function () {
      const view = presentRun(
        run({
          state: 'succeeded',
          pod: pod({ state: 'deleted', estimatedSpendUsd: 0.6412, deadlineUnixS: null }),
        }),
        NOW_S,
      );
      assert.equal(view.description, 'succeeded · runpod · about $0.64');
      assert.equal(view.contextValue, 'run.succeeded');
      assert.equal(view.iconId, 'pass');
    });

    it('lets a kept pod or one awaiting retrieval win over the run state', function () {
      const kept = presentRun(
        run({ state: 'succeeded', pod: pod({ state: 'kept', keep: true, deadlineUnixS: null }) }),
        NOW_S,
      );
      assert.equal(kept.contextValue, 'run.kept');
      assert.equal(kept.description, 'pod kept · runpod · $0.29/h');
      const awaiting = presentRun(
        run({ state: 'failed', pod: pod({ state: 'awaiting_retrieval' }) }),
        NOW_S,
      );
      assert.equal(awaiting.contextValue, 'run.awaiting');
      assert.match(awaiting.description, /^awaiting retrieval · runpod · \$0\.29\/h/);
    });

    it('gives every state its own icon and context value', function () {
      const states = [
        'preparing',
        'running',
        'succeeded',
        'failed',
        'cancelled',
        'stopped',
      ] as const;
      const icons = new Set<string>();
      for (const state of states) {
        const view = presentRun(run({ state }), NOW_S);
        assert.equal(view.contextValue, `run.${state}`);
        icons.add(view.iconId);
      }
      icons.add(presentRun(run({ state: null, problem: 'x' }), NOW_S).iconId);
      assert.equal(icons.size, states.length + 1);
    });

    it('marks an unreadable record with its problem, not its content', function () {
      const view = presentRun(
        run({
          state: null,
          target: null,
          problem: 'run.json is not valid JSON at line 2 column 3',
        }),
        NOW_S,
      );
      assert.equal(view.contextValue, 'run.unreadable');
      assert.equal(view.description, 'run.json is not valid JSON at line 2 column 3');
      assert.equal(displayState(run({ state: null })), 'unreadable');
    });

    it('escapes markdown in the tooltip so a message cannot add links', function () {
      const view = presentRun(run({ message: '[click](http://evil) *x*' }), NOW_S);
      assert.ok(view.tooltip.includes('\\[click\\]\\(http://evil\\) \\*x\\*'), view.tooltip);
      assert.equal(escapeMarkdown('a_b'), 'a\\_b');
    });
  });

  it('formats durations for the description line', function () {
    assert.equal(formatDurationS(45), '45s');
    assert.equal(formatDurationS(12 * 60 + 5), '12m');
    assert.equal(formatDurationS(3 * 3600 + 5 * 60), '3h 05m');
    assert.equal(formatDurationS(-5), '0s');
  });

  it('orders runs newest first, by creation time then id', function () {
    const a = run({ id: 'a', createdUnixS: 100 });
    const b = run({ id: 'b', createdUnixS: 200 });
    const c = run({ id: 'c', createdUnixS: null });
    const d = run({ id: 'd', createdUnixS: 200 });
    assert.deepEqual(
      [a, b, c, d].sort(compareRunsNewestFirst).map((r) => r.id),
      ['d', 'b', 'a', 'c'],
    );
  });

  describe('RunsModel', function () {
    it('loads lazily, once, and sorts newest first', async function () {
      let loads = 0;
      const model = new RunsModel(async () => {
        loads += 1;
        return [run({ id: 'old', createdUnixS: 1 }), run({ id: 'new', createdUnixS: 2 })];
      });
      assert.equal(loads, 0, 'constructing the model reads nothing');
      assert.equal(model.all.length, 0);
      await model.ensureLoaded();
      await model.ensureLoaded();
      assert.equal(loads, 1);
      assert.deepEqual(
        model.all.map((r) => r.id),
        ['new', 'old'],
      );
    });

    it('coalesces refreshes asked during a load into one more load', async function () {
      let loads = 0;
      let release: (() => void) | undefined;
      const model = new RunsModel(async () => {
        loads += 1;
        if (loads === 1) await new Promise<void>((resolve) => (release = resolve));
        return [run({ id: `load${loads}` })];
      });
      let changes = 0;
      model.onDidChange(() => (changes += 1));
      const first = model.refresh();
      const second = model.refresh();
      const third = model.refresh();
      release?.();
      await Promise.all([first, second, third]);
      assert.equal(loads, 2, 'one load, then exactly one more for the refreshes asked meanwhile');
      assert.equal(model.all[0]?.id, 'load2', 'the last load wins');
      assert.equal(changes, 2);
    });

    it('keeps the previous list when a load fails and reports the error', async function () {
      let fail = false;
      const model = new RunsModel(async () => {
        if (fail) throw new Error('EACCES');
        return [run()];
      });
      await model.refresh();
      fail = true;
      await assert.rejects(model.refresh(), /EACCES/);
      assert.equal(model.all.length, 1);
      fail = false;
      await model.refresh();
      assert.equal(model.all.length, 1);
    });
  });
});
