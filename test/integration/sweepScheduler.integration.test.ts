/**
 * The sweep's scheduler on the real Optuna (/usr/bin/python3 with python3-optuna), with a
 * runner standing in for the pods whose trials cost exactly what the test says (the pods
 * themselves: sweep.integration.test.ts). What it proves is the budget's arithmetic end to end
 * (a trial starts only when spent + the running trials' worst cases + its own fit), the
 * objective (any key; a trial that never writes it fails saying so), and pruning.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { systemClock } from '../../src/core/clock';
import type { SweepConfig } from '../../src/core/config';
import { EventBus, type TrainMetric } from '../../src/core/events';
import { RunStore } from '../../src/core/runs/store';
import { loadSweep } from '../../src/core/sweep/records';
import { runSweep, type TrialOutcome, type TrialRunner } from '../../src/core/sweep/scheduler';

const PYTHON = '/usr/bin/python3';
const WORST = 0.5;

function config(overrides: Partial<SweepConfig> = {}): SweepConfig {
  return {
    name: 'unit',
    target: 'pod',
    metric: 'accuracy',
    direction: 'maximize',
    trials: 6,
    parallel: 3,
    budgetUsd: 3 * WORST,
    sampler: 'random',
    pruner: 'none',
    samplerSeed: 1,
    minResource: null,
    maxResource: null,
    params: { x: { kind: 'float', low: 0, high: 1, log: false, step: null } },
    ...overrides,
  };
}

/**
 * Trials that write `metric` at steps 1..steps (value = x · step / steps, or nothing when
 * `writes` is false), each costing `costUsd`, ending when the test lets it (`release`).
 */
class StandIn implements TrialRunner {
  private n = 0;
  readonly started: number[] = [];
  readonly pruned: string[] = [];
  maxLive = 0;
  private live = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(
    private readonly bus: EventBus,
    private readonly store: RunStore,
    private readonly opts: { costUsd: number; metric: string; writes?: boolean; steps?: number },
  ) {}

  release(): void {
    for (const go of this.waiting.splice(0)) go();
  }

  async run(
    trial: { number: number; params: Record<string, string | number | boolean> },
    onRun: (runId: string) => void,
  ): Promise<TrialOutcome> {
    const runId = `run${this.n++}`;
    fs.mkdirSync(this.store.runDir(runId), { recursive: true });
    this.started.push(trial.number);
    onRun(runId);
    this.live++;
    this.maxLive = Math.max(this.maxLive, this.live);
    const steps = this.opts.steps ?? 4;
    for (let step = 1; step <= steps; step++) {
      if (this.pruned.includes(runId)) break;
      if (this.opts.writes !== false) {
        const metric: TrainMetric = {
          time: 1,
          step,
          values: { [this.opts.metric]: ((trial.params.x as number) * step) / steps },
        };
        this.bus.publish({ type: 'metric', runId, metric });
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.live--;
    return {
      state: this.pruned.includes(runId) ? 'cancelled' : 'succeeded',
      message: null,
    };
  }
  resume(): Promise<TrialOutcome> {
    return Promise.resolve({ state: 'succeeded', message: null });
  }
  prune(runId: string): Promise<boolean> {
    this.pruned.push(runId);
    return Promise.resolve(true);
  }
  findRun(): string | null {
    return null;
  }
  costUsd(): number {
    return this.opts.costUsd;
  }
}

describe('sweep scheduler: the budget, the objective and pruning, on the real Optuna', function () {
  // Each case waits on the sweep's end, a state; its time is Optuna's CPU (a Python process per
  // sweep, a round trip per ask, report and tell), 4-9 s at a load of 10 and 18-77 s at a load of 30-56 in
  // CI, where the pruner's 12 trials passed 120 s. The bound is the run's, not an idle guess.
  this.timeout(300_000);
  let dir: string;
  let store: RunStore;
  let bus: EventBus;
  const said: string[] = [];
  /** The warnings the sweep published (VS Code notifies each). */
  const warned: { code: string; message: string }[] = [];

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-sweep-sched-'));
    store = new RunStore(path.join(dir, 'runs'), systemClock);
    bus = new EventBus();
    said.length = 0;
    warned.length = 0;
    bus.on((e) => {
      if (e.type === 'log') said.push(e.message);
      if (e.type === 'warning') warned.push({ code: e.code, message: e.message });
    });
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** Runs the sweep, releasing the stand-in's trials as they wait until the sweep ends. */
  async function sweepWith(runner: StandIn, c: SweepConfig) {
    const releaser = setInterval(() => runner.release(), 50);
    try {
      return await runSweep({ store, bus, clock: systemClock, owner: 'test' }, c, runner, {
        trialWorstUsd: WORST,
        study: { python: PYTHON },
        pollMs: 50,
      });
    } finally {
      clearInterval(releaser);
    }
  }

  it('trials that spend their worst case: a budget of 3 worst cases runs 3 and ends saying so', async () => {
    const runner = new StandIn(bus, store, { costUsd: WORST, metric: 'accuracy' });
    const result = await sweepWith(runner, config());
    assert.equal(result.record.end, 'budget', said.join('\n'));
    assert.deepEqual(runner.started, [0, 1, 2]);
    assert.match(
      result.record.message!,
      /the budget's \$0\.00 left cannot hold another trial's worst case \(\$0\.50\): the sweep starts no more trials after 3/,
    );
    assert.equal(loadSweep(store.runsDir, 'unit')?.end, 'budget');
    // The budget's stop is a warning, once, as it happens (VS Code shows it as a notification).
    assert.deepEqual(warned, [
      {
        code: 'sweep_budget',
        message: `sweep unit: ${result.record.message!}`,
      },
    ]);
  });

  it('trials one at a time under their worst case: each end gives the rest back, until it cannot', async () => {
    // Each trial spends 0.4 of its 0.5: the 4th needs 1.2 + 0.5 > 1.5, so 3 run, one at a time.
    const runner = new StandIn(bus, store, { costUsd: 0.4, metric: 'accuracy' });
    const result = await sweepWith(runner, config({ parallel: 1 }));
    assert.equal(runner.maxLive, 1);
    assert.deepEqual(runner.started, [0, 1, 2]);
    assert.equal(result.record.end, 'budget');
    assert.ok(result.record.trials.every((t) => t.state === 'complete'));
    // The best of a maximized metric: the highest final value, its params.
    const best = Math.max(...result.record.trials.map((t) => t.objective!));
    assert.equal(result.best?.objective, best);
    assert.equal(result.best?.params.x, best);
  });

  it('a trial whose job never writes the metric fails, naming it', async () => {
    const runner = new StandIn(bus, store, { costUsd: 0.01, metric: 'loss', writes: false });
    const result = await sweepWith(runner, config({ trials: 2, parallel: 2, metric: 'bleu' }));
    assert.equal(result.record.end, 'trials');
    for (const t of result.record.trials) {
      assert.equal(t.state, 'fail');
      assert.match(t.message!, /never wrote "bleu" on its metrics stream/);
    }
    assert.equal(result.best, null);
  });

  it('a trial that cannot start its run (a missing secret) ends the sweep, not every trial after it', async () => {
    const runner = new StandIn(bus, store, { costUsd: 0.01, metric: 'accuracy' });
    runner.run = () =>
      Promise.resolve({ state: 'error', message: 'the job needs the secret WANDB_API_KEY' });
    const result = await sweepWith(runner, config({ trials: 6, parallel: 1, budgetUsd: 100 }));
    assert.equal(result.record.end, 'stopped');
    assert.equal(result.record.trials.length, 1);
    assert.equal(result.record.trials[0]?.state, 'fail');
    assert.match(
      result.record.message!,
      /trial 0 could not start its run \(the job needs the secret WANDB_API_KEY\): the sweep starts no more trials/,
    );
  });

  it("reports each value as it arrives; Optuna's pruner stops trials behind the others", async () => {
    // 5 values a trial, not 10: each is a report to the study's process and its pruner's
    // judgement over every trial so far, which at a load of 30-56 put the case past its timeout.
    const runner = new StandIn(bus, store, { costUsd: 0.01, metric: 'accuracy', steps: 5 });
    const result = await sweepWith(
      runner,
      config({ trials: 12, parallel: 1, budgetUsd: 100, pruner: 'median', samplerSeed: 5 }),
    );
    const pruned = result.record.trials.filter((t) => t.state === 'pruned');
    assert.ok(pruned.length > 0, said.join('\n'));
    // Every pruned trial's run was cancelled, in order; a prune that reached a run after it had
    // ended (a loaded machine's Optuna answers late) stopped nothing: that trial is complete.
    const prunedRuns = pruned.map((t) => t.run_id);
    assert.deepEqual(
      runner.pruned.filter((id) => prunedRuns.includes(id)),
      prunedRuns,
    );
    for (const id of runner.pruned.filter((run) => !prunedRuns.includes(run))) {
      assert.equal(result.record.trials.find((t) => t.run_id === id)?.state, 'complete', id);
    }
    assert.ok(result.record.trials.some((t) => t.state === 'complete'));
  });

  it('a trial the pruner stops after its job ended is complete with its value (its run succeeded); one it stops is pruned', async () => {
    // Trials 0-4 (the median pruner's startup trials) write 1.0, 0.9, 0.8; trials 5 and 6 are far
    // behind (5 at each step). Trial 5's job had ended when its prune came (the cancel found nothing
    // to stop, the run succeeded); trial 6's prune stopped its job (the run was cancelled).
    const pruned: string[] = [];
    const runner: TrialRunner = {
      run(trial, onRun) {
        const runId = `run${trial.number}`;
        onRun(runId);
        for (let step = 1; step <= 3; step++) {
          const evalLoss = trial.number >= 5 ? 5 : 1.1 - step / 10;
          bus.publish({ type: 'metric', runId, metric: { time: step, step, evalLoss } });
        }
        return Promise.resolve({
          state: trial.number === 6 ? 'cancelled' : 'succeeded',
          message: null,
        });
      },
      resume: () => Promise.reject(new Error('nothing to resume')),
      prune(runId) {
        pruned.push(runId);
        return Promise.resolve(true);
      },
      findRun: () => null,
      costUsd: () => 0.01,
    };
    const result = await runSweep(
      { store, bus, clock: systemClock, owner: 'test' },
      config({
        trials: 7,
        parallel: 1,
        budgetUsd: 100,
        pruner: 'median',
        metric: 'eval_loss',
        direction: 'minimize',
      }),
      runner,
      { trialWorstUsd: WORST, study: { python: PYTHON }, pollMs: 50 },
    );
    assert.deepEqual(pruned, ['run5', 'run6'], said.join('\n'));
    assert.deepEqual(
      result.record.trials.map((t) => t.state),
      ['complete', 'complete', 'complete', 'complete', 'complete', 'complete', 'pruned'],
    );
    assert.equal(result.record.trials[5]?.objective, 5);
  });
});
