import { presentRunChild } from '../../src/ui/runs/runChildView';
import * as assert from 'node:assert/strict';
import { EventBus } from '../../src/core/events';
import {
  compareRunsNewestFirst,
  displayState,
  isRunChild,
  LIVE_REDRAW_MS,
  RunsModel,
  type MetricsSummary,
  type PodSummary,
  type RunChild,
  type RunSummary,
} from '../../src/ui/runs/runsModel';
import { escapeMarkdown, formatDurationS, presentRun } from '../../src/ui/runs/runsView';
import { FakeClock } from '../helpers/fakeClock';

/** The tooltip's text without its Markdown escapes. */
const plain = (markdown: string): string => markdown.replace(/\\(.)/g, '$1');

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
      assert.deepEqual([view.iconId, view.colorId], ['bracket-error', 'list.errorForeground']);
      assert.equal(displayState(run({ state: null })), 'unreadable');
    });

    it('keeps the run state of a damaged pod.json but flags it, with the next action', function () {
      const view = presentRun(
        run({
          problem: 'pod.json is not a valid pod record (line 1, column 2): it is not valid JSON',
          problemHint: 'Repair or restore the file.',
          problemFile: 'pod.json',
        }),
        NOW_S,
      );
      assert.equal(view.contextValue, 'run.running', 'the menus still apply (Remove Pod, Cancel)');
      assert.equal(view.iconId, 'bracket-error');
      assert.match(view.description, /^pod\.json is not a valid pod record .* · running · runpod$/);
      assert.match(plain(view.tooltip), /Next: Repair or restore the file\./);
    });

    it('shows the ETA of a running run seen live, and the spend so far in the tooltip', function () {
      const view = presentRun(run({ pod: pod({ createdUnixS: NOW_S - 3600 }) }), NOW_S, {
        etaMs: (3 * 3600 + 5 * 60) * 1000,
        step: 40,
        maxSteps: 100,
        loss: 1.23456,
      });
      assert.equal(
        view.description,
        'running · runpod · pod running · $0.29/h · $0.29 so far · about $1.18 at the ETA · 4h 12m left · ETA 3h 05m',
      );
      assert.match(plain(view.tooltip), /Spent so far: about \$0\.29/);
      assert.ok(plain(view.tooltip).includes('Step: 40 / 100'));
      assert.match(plain(view.tooltip), /Loss: 1\.235/);
      const done = presentRun(run({ state: 'succeeded' }), NOW_S, {
        etaMs: 1000,
        step: 1,
        maxSteps: 1,
        loss: null,
      });
      assert.doesNotMatch(done.description, /ETA/, 'no ETA once the run is over');
    });

    it('says a kept pod has no deadline', function () {
      const view = presentRun(
        run({ pod: pod({ state: 'kept', keep: true, deadlineUnixS: null }) }),
        NOW_S,
      );
      assert.match(plain(view.tooltip), /Deadline: none: the pod is kept/);
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

  describe('children', function () {
    const base = (r: RunSummary): { runDir: string; run: RunSummary } => ({
      runDir: r.dir,
      run: r,
    });
    const metrics = (m: Partial<MetricsSummary> = {}): MetricsSummary => ({
      step: 40,
      maxSteps: 100,
      epoch: 0.4,
      loss: 1.5,
      evalLoss: null,
      learningRate: 0.0002,
      ended: false,
      skippedLines: 0,
      partial: false,
      ...m,
    });

    it('counts the spend so far as the pod record does: from the create call sent, in ms', function () {
      // Created (answered) at NOW - 1 h, but billed from the create call's sending 30 min earlier
      // (a slow, retried create): 1.5 h at $4/h is $6.00, not the $4.00 an hour of uptime says.
      const billedFromMs = (NOW_S - 5400) * 1000;
      const r = run({
        pod: pod({ costPerHourUsd: 4, createdUnixS: NOW_S - 3600, billedFromMs }),
      });
      const view = presentRunChild({ ...base(r), kind: 'pod' }, NOW_S);
      assert.match(view.description ?? '', /about \$6\.00 so far/);
      assert.match(plain(presentRun(r, NOW_S).tooltip), /Spent so far: about \$6\.00/);
    });

    it('presents the pod with its rate and spend so far', function () {
      const r = run({ pod: pod({ createdUnixS: NOW_S - 3600 }) });
      const view = presentRunChild({ ...base(r), kind: 'pod' }, NOW_S);
      assert.equal(view.label, 'Pod pod-1');
      assert.equal(view.description, 'running · NVIDIA RTX A5000 · $0.29/h · about $0.29 so far');
      assert.equal(view.contextValue, 'runChild.pod');
      assert.equal(view.openPath, null);
      const deleted = presentRunChild(
        {
          ...base(
            run({ pod: pod({ state: 'deleted', estimatedSpendUsd: 1.234, strayPodIds: ['s'] }) }),
          ),
          kind: 'pod',
        },
        NOW_S,
      );
      assert.equal(deleted.description, 'deleted · NVIDIA RTX A5000 · about $1.23 · 1 stray');
      assert.match(deleted.tooltip, /may be billing/);
    });

    it('presents the metrics summary, opening metrics.jsonl on click', function () {
      const r = run();
      const view = presentRunChild({ ...base(r), kind: 'metrics', metrics: metrics() }, NOW_S);
      assert.equal(view.description, 'step 40/100 · loss 1.5');
      assert.equal(view.openPath, `${r.dir}/metrics.jsonl`);
      const empty = presentRunChild(
        { ...base(r), kind: 'metrics', metrics: metrics({ step: null, loss: null }) },
        NOW_S,
      );
      assert.equal(empty.description, 'no training log yet');
      const done = presentRunChild(
        {
          ...base(r),
          kind: 'metrics',
          metrics: metrics({ evalLoss: 1.25, ended: true, skippedLines: 2 }),
        },
        NOW_S,
      );
      assert.equal(done.description, 'step 40/100 · loss 1.5 · eval 1.25 · ended');
      assert.match(done.tooltip, /2 malformed line/);
    });

    it('opens files on click and expands folders', function () {
      const r = run();
      const file = presentRunChild(
        { ...base(r), kind: 'file', path: `${r.dir}/job.log`, name: 'job.log', isDir: false },
        NOW_S,
      );
      assert.equal(file.openPath, `${r.dir}/job.log`);
      assert.equal(file.expandable, false);
      const dir = presentRunChild(
        { ...base(r), kind: 'file', path: `${r.dir}/output`, name: 'output', isDir: true },
        NOW_S,
      );
      assert.equal(dir.openPath, null);
      assert.equal(dir.expandable, true);
      assert.equal(dir.iconId, 'folder');
      const problem = presentRunChild(
        {
          ...base(r),
          kind: 'problem',
          text: 'pod.json is bad',
          hint: 'Repair it.',
          path: `${r.dir}/pod.json`,
        },
        NOW_S,
      );
      assert.equal(problem.iconId, 'error');
      assert.equal(problem.openPath, `${r.dir}/pod.json`);
    });

    it('gives every child a unique id under its run and tells children from runs', function () {
      const r = run();
      const children: RunChild[] = [
        { ...base(r), kind: 'pod' },
        { ...base(r), kind: 'metrics', metrics: metrics() },
        { ...base(r), kind: 'file', path: `${r.dir}/a`, name: 'a', isDir: false },
        { ...base(r), kind: 'file', path: `${r.dir}/b`, name: 'b', isDir: true },
        { ...base(r), kind: 'more', parent: `${r.dir}/b`, count: 3 },
        { ...base(r), kind: 'problem', text: 'x', hint: null, path: null },
      ];
      const ids = children.map((c) => presentRunChild(c, NOW_S).id);
      assert.equal(new Set([...ids, presentRun(r, NOW_S).id]).size, ids.length + 1);
      assert.ok(children.every(isRunChild));
      assert.equal(isRunChild(r), false);
    });
  });

  describe('RunsModel', function () {
    it('keeps the pace of runs seen live, redrawing a row at most once a second', async function () {
      const clock = new FakeClock(NOW_S * 1000);
      const bus = new EventBus();
      const model = new RunsModel(async () => [run()], { clock });
      const sub = model.observe(bus);
      await model.refresh();
      const redrawn: string[] = [];
      model.onDidChangeRun((r) => redrawn.push(r.id));
      const metric = (step: number, time: number) => ({
        type: 'metric' as const,
        runId: 'tiny_20261202-100000',
        metric: {
          time,
          step,
          epoch: null,
          maxSteps: 100,
          loss: 1,
          evalLoss: null,
          learningRate: null,
          gradNorm: null,
        },
      });
      bus.publish(metric(0, 0));
      bus.publish(metric(10, 100));
      assert.equal(model.live('tiny_20261202-100000')?.etaMs, 900_000);
      await clock.advanceMs(LIVE_REDRAW_MS);
      assert.deepEqual(redrawn, ['tiny_20261202-100000'], 'one redraw for the burst');
      // The ETA counts down from the latest metric.
      await clock.advanceMs(60_000);
      assert.equal(model.live('tiny_20261202-100000')?.etaMs, 900_000 - 61_000);
      bus.publish({
        type: 'runState',
        runId: 'tiny_20261202-100000',
        state: 'succeeded',
        message: null,
        cause: 'completed',
      });
      assert.equal(model.live('tiny_20261202-100000'), null);
      sub.dispose();
      model.dispose();
    });

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
