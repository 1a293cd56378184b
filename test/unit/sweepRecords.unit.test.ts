import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { systemClock } from '../../src/core/clock';
import {
  loadSweep,
  lockSweep,
  saveSweep,
  SweepError,
  type SweepRecord,
} from '../../src/core/sweep/records';

const RECORD: SweepRecord = {
  version: 1,
  name: 'lr',
  metric: 'eval_loss',
  direction: 'minimize',
  trials_max: 4,
  parallel: 2,
  budget_usd: 5,
  created: '2026-12-06T21:00:00.000Z',
  state: 'running',
  end: null,
  message: null,
  trials: [
    {
      number: 0,
      params: { learning_rate: 0.001, lora_r: 16 },
      run_id: 'tiny_20261206-210000',
      state: 'running',
      objective: null,
      cap_usd: 0.52,
      cost_usd: null,
      message: null,
    },
  ],
};

describe('sweep records: sweep.json and the sweep lock', () => {
  let runs: string;
  beforeEach(() => {
    runs = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-sweep-rec-'));
  });
  afterEach(() => fs.rmSync(runs, { recursive: true, force: true }));

  it('writes sweep.json under runs/sweeps/<name>/ and reads it back', () => {
    assert.equal(loadSweep(runs, 'lr'), null);
    saveSweep(runs, RECORD);
    assert.ok(fs.existsSync(path.join(runs, 'sweeps', 'lr', 'sweep.json')));
    assert.deepEqual(loadSweep(runs, 'lr'), RECORD);
  });

  it('refuses a damaged sweep.json, naming the field and what to do', () => {
    saveSweep(runs, RECORD);
    const file = path.join(runs, 'sweeps', 'lr', 'sweep.json');
    const damaged = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
    (damaged.trials as Record<string, unknown>[])[0]!.state = 'exploded';
    fs.writeFileSync(file, JSON.stringify(damaged));
    assert.throws(
      () => loadSweep(runs, 'lr'),
      (error: unknown) =>
        error instanceof SweepError &&
        error.kind === 'invalid' &&
        /trials\.0\.state/.test(error.message) &&
        /move runs\/sweeps\/lr\//.test(error.hint ?? ''),
    );
  });

  it('lets one client hold a sweep: a second is refused, naming the holder, until it lets go', () => {
    const lock = lockSweep(runs, 'lr', 'first client', systemClock);
    assert.throws(
      () => lockSweep(runs, 'lr', 'second client', systemClock),
      (error: unknown) =>
        error instanceof SweepError && error.kind === 'busy' && /first client/.test(error.message),
    );
    lock.dispose();
    lockSweep(runs, 'lr', 'second client', systemClock).dispose();
  });
});
