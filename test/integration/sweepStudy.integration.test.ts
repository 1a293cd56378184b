/**
 * A sweep's study on the real Optuna: /usr/bin/python3 with Debian's python3-optuna (3.1; users
 * get 5.x from pip, and the study process uses only what both share). No pod: the study is a
 * local process and its SQLite storage.
 *
 * A study process's start is most of this file's CPU (`import optuna` and the storage's schema
 * check: 0.6 CPU-s idle, 1–2 on a loaded machine), so the tests that need no fresh process share
 * one, each opening studies in storage of its own, as the process lets a client do; only the
 * restart's test starts its own two.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { SweepParam } from '../../src/core/config';
import { StudyClient, StudyError } from '../../src/core/sweep/study';
import type { StudySpec } from '../../src/core/sweep/studyMessages';

const PYTHON = '/usr/bin/python3';

const PARAMS: Record<string, SweepParam> = {
  learning_rate: { kind: 'float', low: 1e-5, high: 1e-1, log: true, step: null },
  layers: { kind: 'int', low: 1, high: 8, log: false, step: 1 },
  optimizer: { kind: 'choice', choices: ['adamw', 'sgd'] },
};

/** A known objective: best at learning_rate 1e-3, 4 layers, adamw. */
function loss(params: Record<string, unknown>): number {
  const lr = Math.log10(params.learning_rate as number);
  return (
    (lr + 3) ** 2 +
    ((params.layers as number) - 4) ** 2 / 10 +
    (params.optimizer === 'sgd' ? 0.5 : 0)
  );
}

describe('sweep study: Optuna in its own process, the study in its SQLite storage', function () {
  this.timeout(120_000);
  let dir: string;
  const clients: StudyClient[] = [];

  /** The study process the tests share (started in `before`, killed in `after`). */
  let shared: StudyClient;

  before(async function () {
    // Found, not imported: the shared process's start imports it, and says so when it cannot.
    const probe = spawnSync(
      PYTHON,
      ['-c', 'import importlib.util, sys; sys.exit(importlib.util.find_spec("optuna") is None)'],
      { encoding: 'utf8' },
    );
    assert.equal(
      probe.status,
      0,
      `${PYTHON} has no Optuna: apt-get install python3-optuna (npm test installs it)\n${probe.stderr}`,
    );
    shared = await StudyClient.start({ python: PYTHON });
  });
  after(() => shared?.kill());

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-sweep-study-'));
  });
  afterEach(async () => {
    for (const client of clients.splice(0)) await client.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function start(): Promise<StudyClient> {
    const client = await StudyClient.start({ python: PYTHON });
    clients.push(client);
    return client;
  }

  function spec(overrides: Partial<StudySpec> = {}): StudySpec {
    return {
      storagePath: path.join(dir, 'runs', 'sweeps', 'lr', 'study.db'),
      study: 'lr',
      direction: 'minimize',
      sampler: 'tpe',
      pruner: 'none',
      samplerSeed: 7,
      minResource: null,
      maxResource: null,
      params: PARAMS,
      ...overrides,
    };
  }

  /** What Optuna itself reads from the storage, as a user's notebook would (optuna.load_study). */
  function loadStudy(storagePath: string, name: string): { states: string[]; best: number } {
    const code = [
      'import json, optuna, sys',
      'optuna.logging.set_verbosity(optuna.logging.WARNING)',
      `s = optuna.load_study(study_name=${JSON.stringify(name)}, storage="sqlite:///" + sys.argv[1])`,
      'print(json.dumps({"states": [t.state.name for t in s.trials], "best": s.best_value}))',
    ].join('\n');
    const result = spawnSync(PYTHON, ['-c', code, storagePath], { encoding: 'utf8' });
    assert.equal(result.status, 0, result.stderr);
    return JSON.parse(result.stdout) as { states: string[]; best: number };
  }

  it('drives a study to completion: ask, report, tell; the storage opens with optuna.load_study', async () => {
    const client = shared;
    assert.match(client.optunaVersion, /^\d+\.\d+/);
    const study = spec();
    assert.deepEqual(await client.open(study), { trials: 0 });
    const values: number[] = [];
    for (let i = 0; i < 8; i++) {
      const trial = await client.ask({ sweep: 'lr' });
      assert.equal(trial.number, i);
      const lr = trial.params.learning_rate as number;
      assert.ok(lr >= 1e-5 && lr <= 1e-1, String(lr));
      assert.ok(Number.isInteger(trial.params.layers));
      assert.ok(['adamw', 'sgd'].includes(trial.params.optimizer as string));
      const value = loss(trial.params);
      for (let step = 1; step <= 3; step++) {
        assert.deepEqual(await client.report(trial.number, step, value * (4 - step)), {
          shouldPrune: false,
        });
      }
      assert.equal(await client.tell(trial.number, 'complete', value), 'COMPLETE');
      values.push(value);
    }
    const { trials, best } = await client.trials();
    assert.deepEqual(
      trials.map((t) => t.state),
      Array(8).fill('COMPLETE'),
    );
    const bestValue = Math.min(...values);
    assert.equal(best, values.indexOf(bestValue));
    assert.deepEqual(trials[0]?.intermediate, {
      '1': values[0]! * 3,
      '2': values[0]! * 2,
      '3': values[0]!,
    });
    assert.deepEqual(trials[0]?.attrs, { sweep: 'lr' });
    // Read by another process while this one lives: each answer came once its change was stored.
    const stored = loadStudy(study.storagePath, 'lr');
    assert.deepEqual(stored.states, Array(8).fill('COMPLETE'));
    assert.equal(stored.best, bestValue);
  });

  it("prunes where Optuna's pruner says so: the median pruner stops a trial far behind, never one ahead", async () => {
    const client = shared;
    await client.open(spec({ pruner: 'median', sampler: 'random' }));
    // The median pruner judges once 5 trials are complete: their curves 1.0, 0.9, 0.8 at steps 1-3.
    for (let i = 0; i < 5; i++) {
      const { number } = await client.ask();
      for (let step = 1; step <= 3; step++) await client.report(number, step, 1.1 - step / 10);
      await client.tell(number, 'complete', 0.8);
    }
    const behind = await client.ask();
    assert.deepEqual(await client.report(behind.number, 1, 5), { shouldPrune: true });
    assert.equal(await client.tell(behind.number, 'pruned'), 'PRUNED');
    const ahead = await client.ask();
    assert.deepEqual(await client.report(ahead.number, 1, 0.5), { shouldPrune: false });
    const { trials } = await client.trials();
    assert.equal(trials[behind.number]?.state, 'PRUNED');
    assert.deepEqual(trials[behind.number]?.intermediate, { '1': 5 });

    // The same far-behind value, in a study whose pruner is "none": not pruned.
    const never = shared;
    await never.open(spec({ study: 'never', pruner: 'none', sampler: 'random' }));
    for (let i = 0; i < 5; i++) {
      const { number } = await never.ask();
      for (let step = 1; step <= 3; step++) await never.report(number, step, 1.1 - step / 10);
      await never.tell(number, 'complete', 0.8);
    }
    const kept = await never.ask();
    assert.deepEqual(await never.report(kept.number, 1, 5), { shouldPrune: false });
  });

  it('goes on after its process is killed: the same trials, their run links, nothing twice', async () => {
    const first = await start();
    const study = spec({ pruner: 'hyperband' });
    await first.open(study);
    const a = await first.ask();
    await first.setAttrs(a.number, { run_id: 'demo_20261206-190000' });
    const b = await first.ask();
    await first.setAttrs(b.number, { run_id: 'demo_20261206-190001' });
    await first.report(a.number, 1, 0.9);
    await first.tell(b.number, 'complete', 0.4);
    // A request in flight when the process dies fails as process_died.
    const inFlight = first.trials();
    await first.kill();
    await assert.rejects(inFlight, (error: StudyError) => error.kind === 'process_died');

    const second = await start();
    assert.deepEqual(await second.open(study), { trials: 2 });
    let { trials } = await second.trials();
    assert.deepEqual(
      trials.map((t) => [t.number, t.state, t.attrs.run_id]),
      [
        [0, 'RUNNING', 'demo_20261206-190000'],
        [1, 'COMPLETE', 'demo_20261206-190001'],
      ],
    );
    assert.deepEqual(trials[0]?.params, a.params);
    // A value reported again after the restart (the metrics replayed) is not reported twice.
    await second.report(a.number, 1, 0.9);
    await second.report(a.number, 2, 0.7);
    // A trial told again stays as it was: counted once.
    assert.equal(await second.tell(b.number, 'complete', 0.1), 'COMPLETE');
    assert.equal(await second.tell(a.number, 'complete', 0.7), 'COMPLETE');
    assert.equal(await second.tell(a.number, 'fail'), 'COMPLETE');
    // A new trial gets the next number: none is started twice.
    assert.equal((await second.ask()).number, 2);
    ({ trials } = await second.trials());
    assert.deepEqual(trials[0]?.intermediate, { '1': 0.9, '2': 0.7 });
    assert.deepEqual(
      trials.map((t) => [t.state, t.value]),
      [
        ['COMPLETE', 0.7],
        ['COMPLETE', 0.4],
        ['RUNNING', null],
      ],
    );
    await assert.rejects(
      second.tell(9, 'complete', 1),
      (error: StudyError) => error.kind === 'no_trial',
    );
    await second.close();
  });

  it('refuses to open a stored study the other way round (minimize vs maximize)', async () => {
    const client = shared;
    await client.open(spec());
    await assert.rejects(client.open(spec({ direction: 'maximize' })), (error: StudyError) => {
      assert.equal(error.kind, 'study_mismatch');
      assert.match(error.message, /minimizes its metric, and the sweep says maximize/);
      return true;
    });
  });

  it("samples with each of Optuna's samplers the sweep may name (grid over lists and stepped ranges)", async () => {
    const grid: Record<string, SweepParam> = {
      layers: { kind: 'int', low: 2, high: 6, log: false, step: 2 },
      dropout: { kind: 'float', low: 0, high: 0.2, log: false, step: 0.1 },
      optimizer: { kind: 'choice', choices: ['adamw', 'sgd'] },
    };
    const client = shared;
    for (const sampler of ['tpe', 'random', 'cmaes', 'grid'] as const) {
      await client.open(
        spec({ study: sampler, sampler, params: sampler === 'grid' ? grid : PARAMS }),
      );
      const seen = new Set<string>();
      for (let i = 0; i < 4; i++) {
        const trial = await client.ask();
        seen.add(JSON.stringify(trial.params));
        await client.tell(
          trial.number,
          'complete',
          loss({ learning_rate: 1e-3, layers: 4, ...trial.params }),
        );
      }
      if (sampler === 'grid') assert.equal(seen.size, 4, [...seen].join(' '));
    }
  });
});
