import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TrainMetric } from '../../src/core/events';
import { readMetricsFile } from '../../src/ui/panel/runMetricsFile';
import {
  Coalescer,
  RunSeries,
  runActions,
  runStatusView,
  type StatusExtras,
} from '../../src/ui/panel/runSeries';
import type { PodSummary, RunSummary } from '../../src/ui/runs/runsModel';
import { FakeClock } from '../helpers/fakeClock';

const MIN = 60_000;
const HOUR = 60 * MIN;

function log(step: number, extra: Partial<TrainMetric> = {}): TrainMetric {
  return { time: 1000 + step, step, maxSteps: 100, loss: 1 / step, learningRate: 1e-3, ...extra };
}

function pod(overrides: Partial<PodSummary> = {}): PodSummary {
  return {
    podId: 'pod123',
    state: 'running',
    gpuType: 'NVIDIA GeForce RTX 4090',
    costPerHourUsd: 0.69,
    deadlineUnixS: null,
    estimatedSpendUsd: null,
    keep: false,
    strayPodIds: [],
    ...overrides,
  };
}

function run(overrides: Partial<RunSummary> = {}): RunSummary {
  return {
    id: 'tiny_20261202-171500',
    dir: '/ws/runs/tiny_20261202-171500',
    workspaceName: 'ws',
    target: 'pod',
    createdUnixS: null,
    state: 'running',
    message: null,
    pod: pod(),
    problem: null,
    ...overrides,
  };
}

function extras(clock: FakeClock, overrides: Partial<StatusExtras> = {}): StatusExtras {
  return {
    nowMs: clock.nowMs(),
    followed: true,
    maxCostUsd: null,
    podCreatedUnixS: null,
    podDeletedUnixS: null,
    overrunMessage: null,
    hasOutput: false,
    ...overrides,
  };
}

describe('run webview series (model)', function () {
  describe('RunSeries', function () {
    it('keeps one point per step: the eval log of a step fills in its training point', function () {
      const series = new RunSeries('r');
      assert.equal(series.add(log(1), 0), 'append');
      assert.equal(series.add(log(2), 0), 'append');
      assert.equal(series.add({ time: 1003, step: 2, evalLoss: 0.7 }, 0), 'append');
      assert.equal(series.add({ time: 1004, step: 3, gradNorm: 1 }, 0), 'none');
      const { columns } = series.snapshot();
      assert.deepEqual(columns, {
        step: [1, 2],
        loss: [1, 0.5],
        evalLoss: [null, 0.7],
        learningRate: [1e-3, 1e-3],
        // The trainer's clock at each step's first log: the chart's wall-time x.
        time: [1001, 1002],
      });
      // The line without values still moves the progress on.
      assert.deepEqual(series.progress(), { step: 3, maxSteps: 100 });
    });

    it('sends each page only what it has not seen, resending the last point it saw', function () {
      const series = new RunSeries('r');
      series.add(log(1), 0);
      const { cursor } = series.snapshot();
      assert.deepEqual(series.pending(cursor), { kind: 'none' });
      series.add(log(2), 0);
      series.add(log(3), 0);
      const first = series.pending(cursor);
      assert.equal(first.kind, 'append');
      assert.deepEqual(first.kind === 'append' && first.columns.step, [1, 2, 3]);
      assert.deepEqual(series.pending(cursor), { kind: 'none' });
      // An eval loss for the last step: the page gets that step again, filled in.
      series.add({ time: 1004, step: 3, evalLoss: 0.2 }, 0);
      const fill = series.pending(cursor);
      assert.deepEqual(fill.kind === 'append' && fill.columns, {
        step: [3],
        loss: [1 / 3],
        evalLoss: [0.2],
        learningRate: [1e-3],
        time: [1003],
      });
    });

    it('keeps separate cursors for two pages showing the same run', function () {
      const series = new RunSeries('r');
      const a = series.snapshot().cursor;
      series.add(log(1), 0);
      const b = series.snapshot().cursor;
      series.add(log(2), 0);
      const forA = series.pending(a);
      const forB = series.pending(b);
      assert.deepEqual(forA.kind === 'append' && forA.columns.step, [1, 2]);
      assert.deepEqual(forB.kind === 'append' && forB.columns.step, [1, 2]);
    });

    it('starts over when the step goes backwards (a replay or a restarted trainer): pages get a snapshot', function () {
      const series = new RunSeries('r');
      for (let s = 1; s <= 5; s++) series.add(log(s), 0);
      const { cursor } = series.snapshot();
      assert.equal(series.add(log(3, { loss: 9 }), 0), 'reset');
      assert.deepEqual(series.pending(cursor), { kind: 'snapshot' });
      const again = series.snapshot();
      assert.deepEqual(again.columns.step, [1, 2, 3]);
      assert.equal(again.columns.loss[2], 9);
      // A replay of the same file rebuilds the same points.
      for (let s = 4; s <= 5; s++) series.add(log(s), 0);
      for (let s = 1; s <= 5; s++) series.add(log(s), 0);
      assert.deepEqual(series.snapshot().columns.step, [1, 2, 3, 4, 5]);
    });

    it("continues a resumed run's curve: the earlier run's points go first, once, and pages get a snapshot", function () {
      const series = new RunSeries('r');
      for (let s = 8; s <= 9; s++) series.add(log(s, { time: 100 + s }), 0);
      const { cursor } = series.snapshot();
      series.prefix([1, 2, 3, 4, 5, 6, 7, 8].map((s) => log(s, { loss: 10 + s })));
      assert.deepEqual(series.pending(cursor), { kind: 'snapshot' });
      const { columns } = series.snapshot();
      assert.deepEqual(columns.step, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
      assert.equal(columns.loss[0], 11, "the earlier run's loss");
      assert.equal(columns.loss[7], 1 / 8, "this run's own step 8 is kept");
      series.prefix([1, 2].map((s) => log(s)));
      assert.deepEqual(series.snapshot().columns.step, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
      // The ETA is this run's own pace: 1 step/s from its own two points.
      assert.equal(series.etaMs(0), 91_000);
    });

    it('gives the ETA from now: the pace from the trainer clock, minus the time since the last metric', function () {
      const series = new RunSeries('r');
      assert.equal(series.etaMs(0), null);
      // 10 steps in 10 s of trainer time → 1 step/s; 89 steps left → 89 s.
      series.add(log(1, { time: 0 }), 50_000);
      series.add(log(11, { time: 10 }), 60_000);
      assert.equal(series.etaMs(60_000), 89_000);
      assert.equal(series.etaMs(70_000), 79_000);
      assert.equal(series.etaMs(500_000), 0);
    });
  });

  describe('Coalescer', function () {
    it('flushes the first poke at once, then at most once per interval', async function () {
      const clock = new FakeClock();
      const flushes: number[] = [];
      const coalescer = new Coalescer(clock, 100, () => flushes.push(clock.nowMs()));
      const t0 = clock.nowMs();
      coalescer.poke();
      await clock.advanceMs(0);
      assert.deepEqual(flushes, [t0]);
      // Ten pokes within the next 100 ms: one flush, at the end of the interval.
      for (let i = 0; i < 10; i++) {
        await clock.advanceMs(5);
        coalescer.poke();
      }
      assert.equal(flushes.length, 1);
      await clock.advanceMs(60);
      assert.deepEqual(flushes, [t0, t0 + 100]);
      // Quiet for a while: the next poke flushes at once again.
      await clock.advanceMs(1000);
      coalescer.poke();
      await clock.advanceMs(0);
      assert.equal(flushes.length, 3);
      assert.equal(flushes[2], t0 + 1110);
      coalescer.dispose();
      coalescer.poke();
      await clock.advanceMs(1000);
      assert.equal(flushes.length, 3, 'nothing after dispose');
    });

    it('turns 10 Hz metrics into at most 10 flushes a second', async function () {
      const clock = new FakeClock();
      let flushes = 0;
      const coalescer = new Coalescer(clock, 100, () => flushes++);
      for (let i = 0; i < 100; i++) {
        coalescer.poke();
        coalescer.poke();
        await clock.advanceMs(25);
      }
      assert.ok(flushes <= 26 && flushes >= 24, `${flushes} flushes in 2.5 s`);
      coalescer.dispose();
    });
  });

  describe('status texts', function () {
    it('shows progress, epoch, ETA, time to the deadline, spend so far and at the ETA, and the cap', function () {
      const clock = new FakeClock();
      const nowS = clock.nowMs() / 1000;
      const series = new RunSeries('r');
      series.add(log(1, { time: 0, epoch: 0.05 }), clock.nowMs());
      series.add(log(26, { time: 3600, epoch: 1.25 }), clock.nowMs());
      const view = runStatusView(
        run({ pod: pod({ deadlineUnixS: nowS + 4 * 3600 + 12 * 60 + 30 }) }),
        series,
        extras(clock, { podCreatedUnixS: nowS - 2 * 3600, maxCostUsd: 20 }),
      );
      assert.equal(view.state, 'running');
      assert.equal(view.summary, 'running · target pod · NVIDIA GeForce RTX 4090 · pod pod123');
      assert.equal(view.stepText, 'step 26 / 100');
      assert.equal(view.progress, 0.26);
      assert.equal(view.epochText, 'epoch 1.25');
      // 25 steps an hour, 74 left: 2h 57m 36s.
      assert.equal(view.etaText, 'ETA 2h 57m');
      assert.equal(view.deadlineText, '4h 12m until the deadline');
      // $0.69/h × 2 h so far; × (2 h + 2.96 h) at the ETA.
      assert.equal(
        view.spendText,
        '$1.38 so far at $0.69/h · about $3.42 at the ETA · max_cost_usd $20.00',
      );
      assert.equal(view.overrun, null);
      assert.deepEqual(view.actions, ['stop', 'cancel', 'keep', 'remove']);
    });

    it("a cluster run (no pod.json): rank 0's metrics drive the ETA, its spend is N × the member rate", function () {
      const clock = new FakeClock();
      const nowMs = clock.nowMs();
      const series = new RunSeries('r');
      series.add(log(1, { time: 0 }), nowMs);
      series.add(log(26, { time: 3600 }), nowMs);
      const node = (rank: number) => ({
        rank,
        podId: `pod-${rank}`,
        ip: null,
        state: 'running' as const,
        deadlineUnixS: Math.floor(nowMs / 1000) + 5 * 3600,
        costCapAtUnixS: null,
        message: null,
      });
      const cluster = {
        id: 'clu-1',
        name: 'overbrainer-r-c1',
        gpuTypeId: 'NVIDIA GeForce RTX 4090',
        gpuCountPerPod: 1,
        costPerHourUsd: 0.69,
        createdAt: new Date(nowMs - 2 * 3600_000).toISOString(),
        deletedAt: null,
        nodes: [node(0), node(1)],
        billedUsd: null,
        billedCheckedAt: null,
      };
      const view = runStatusView(
        run({ pod: null, cluster }),
        series,
        extras(clock, { podCreatedUnixS: Math.floor(nowMs / 1000) - 2 * 3600 }),
      );
      assert.equal(
        view.summary,
        'running · target pod · 2 nodes × NVIDIA GeForce RTX 4090 · cluster clu-1',
      );
      assert.equal(view.etaText, 'ETA 2h 57m');
      assert.equal(view.deadlineText, '5h 00m until the deadline');
      // 2 nodes × $0.69/h × 2 h so far; × (2 h + 2.96 h) at the ETA.
      assert.equal(view.spendText, '$2.76 so far at $1.38/h · about $6.84 at the ETA');
    });

    it('counts the ETA and the spend down as the clock moves', async function () {
      const clock = new FakeClock();
      const nowS = clock.nowMs() / 1000;
      const series = new RunSeries('r');
      series.add(log(1, { time: 0 }), clock.nowMs());
      series.add(log(11, { time: 600 }), clock.nowMs());
      const r = run({ pod: pod({ deadlineUnixS: nowS + 3600, costPerHourUsd: 1 }) });
      const before = runStatusView(r, series, extras(clock, { podCreatedUnixS: nowS }));
      assert.equal(before.etaText, 'ETA 1h 29m');
      await clock.advanceMs(30 * MIN);
      const after = runStatusView(r, series, extras(clock, { podCreatedUnixS: nowS }));
      assert.equal(after.etaText, 'ETA 59m');
      assert.equal(after.deadlineText, '30m until the deadline');
      assert.match(
        after.spendText ?? '',
        /^\$0\.50 so far at \$1\.00\/h · about \$1\.48 at the ETA$/,
      );
    });

    it('shows the overrun when the ETA passes the deadline (the core warning first)', function () {
      const clock = new FakeClock();
      const nowS = clock.nowMs() / 1000;
      const series = new RunSeries('r');
      series.add(log(1, { time: 0 }), clock.nowMs());
      series.add(log(2, { time: 3600 }), clock.nowMs());
      const r = run({ pod: pod({ deadlineUnixS: nowS + HOUR / 1000 }) });
      const computed = runStatusView(r, series, extras(clock));
      assert.match(computed.overrun ?? '', /needs about 98\.0h more, past max_hours/);
      const fromCore = runStatusView(r, series, extras(clock, { overrunMessage: 'core says' }));
      assert.equal(fromCore.overrun, 'core says');
      const done = runStatusView({ ...r, state: 'succeeded' }, series, extras(clock));
      assert.equal(done.overrun, null);
      assert.equal(done.etaText, null);
    });

    it('after the run: the estimated spend, no deadline, the output button', function () {
      const clock = new FakeClock();
      const series = new RunSeries('r');
      const view = runStatusView(
        run({ state: 'succeeded', pod: pod({ state: 'deleted', estimatedSpendUsd: 0.0123 }) }),
        series,
        extras(clock, { hasOutput: true, followed: false }),
      );
      assert.equal(view.state, 'succeeded');
      assert.equal(view.stepText, null);
      assert.equal(view.deadlineText, null);
      assert.equal(view.spendText, 'about $0.01 spent');
      assert.deepEqual(view.actions, ['openOutput']);
    });

    it('the boot log while the run is live, none once it ended or without lines', function () {
      const clock = new FakeClock();
      const lines = ['system: pulling image', 'container: starting sshd'];
      const preparing = run({ state: 'preparing', pod: pod() });
      const with_ = (r: RunSummary, bootLog: string[] | null) =>
        runStatusView(r, new RunSeries('r'), extras(clock, { bootLog })).bootLog;
      assert.deepEqual(with_(preparing, lines), lines);
      assert.equal(with_(preparing, []), null);
      assert.equal(with_(preparing, null), null);
      assert.equal(with_({ ...preparing, state: 'failed' }, lines), null);
    });

    it("the GPUs' newest figures beside the loss, a line each, and what was found of their use", function () {
      const clock = new FakeClock();
      const gpu = (g: number, utilizationPct: number) => ({
        index: g,
        name: 'NVIDIA A100-SXM4-80GB',
        utilizationPct,
        memoryUsedMiB: 72433,
        memoryTotalMiB: 81920,
        temperatureC: 61,
        powerW: 352.09,
        powerLimitW: 400,
      });
      const view = runStatusView(
        run(),
        new RunSeries('r'),
        extras(clock, {
          gpu: {
            last: { timeMs: 0, gpus: [gpu(0, 100), gpu(1, 0)] },
            samples: 60,
            findings: [
              {
                code: 'gpu_idle',
                message: 'GPU 1 of 2 is idle while the pod bills: is the job waiting on data?',
                wastedUsdPerHour: 1.2,
                timeMs: 0,
              },
            ],
          },
        }),
      );
      assert.deepEqual(view.gpuText, [
        'GPU 0 · 100 % · 70.7 of 80.0 GiB · 61 °C · 352 W',
        'GPU 1 · 0 % · 70.7 of 80.0 GiB · 61 °C · 352 W',
      ]);
      assert.equal(
        view.gpuWarning,
        'GPU 1 of 2 is idle while the pod bills: is the job waiting on data?',
      );
      const none = runStatusView(run(), new RunSeries('r'), extras(clock));
      assert.equal(none.gpuText, null);
      assert.equal(none.gpuWarning, null);
    });

    it('a kept pod: no deadline, Release and Remove offered', function () {
      const clock = new FakeClock();
      const r = run({ state: 'succeeded', pod: pod({ state: 'kept', keep: true }) });
      const view = runStatusView(r, new RunSeries('r'), extras(clock));
      assert.equal(view.state, 'pod kept');
      assert.equal(view.deadlineText, 'no deadline (pod kept)');
      assert.deepEqual(runActions(r, false), ['release', 'remove']);
      assert.deepEqual(runActions(run({ pod: null, state: 'preparing' }), false), ['cancel']);
    });

    it('a running run offers Stop and Snapshot; an ended one with a snapshot offers Resume Run', function () {
      assert.deepEqual(runActions(run({ pod: pod(), state: 'running' }), false), [
        'stop',
        'cancel',
        'keep',
        'remove',
      ]);
      const snapshot = { checkpoint: 'output/checkpoint-7', step: 7, reason: 'requested' as const };
      const stopped = run({ state: 'stopped', snapshot, pod: pod({ state: 'deleted' }) });
      assert.deepEqual(runActions(stopped, true), ['resume', 'openOutput']);
      assert.deepEqual(runActions({ ...stopped, snapshot: null }, true), ['openOutput']);
    });
  });

  describe('metrics.jsonl of a run not followed', function () {
    let dir: string;
    beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-metrics-'))));
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

    it('reads the metrics, skips what is not one, and says when there is no file', async function () {
      const file = path.join(dir, 'metrics.jsonl');
      fs.writeFileSync(
        file,
        [
          '{"event":"begin","time":1,"max_steps":3}',
          '{"event":"log","time":2,"step":1,"loss":0.9}',
          'garbage',
          '{"event":"log","time":3,"step":2,"loss":NaN,"eval_loss":0.5}',
          '{"event":"log","time":4,"step":3,"loss":0.4}',
        ].join('\n'),
      );
      const read = await readMetricsFile(file);
      assert.ok(read);
      assert.deepEqual(
        read.metrics.map((m) => [m.step, m.loss, m.evalLoss]),
        [
          [1, 0.9, null],
          [2, null, 0.5],
          [3, 0.4, null],
        ],
      );
      assert.equal(read.skipped, 1);
      assert.equal(read.truncated, false);
      assert.equal(await readMetricsFile(path.join(dir, 'none.jsonl')), null);
    });

    it('reads at most the bound of a runaway file, dropping its cut last line', async function () {
      const file = path.join(dir, 'metrics.jsonl');
      const line = (s: number): string => `{"event":"log","time":${s},"step":${s},"loss":1}\n`;
      fs.writeFileSync(file, Array.from({ length: 1000 }, (_, i) => line(i + 1)).join(''));
      const bound = line(1).length * 10 + 5;
      const read = await readMetricsFile(file, bound);
      assert.ok(read);
      assert.equal(read.truncated, true);
      assert.equal(read.metrics.length, 10);
    });
  });
});
