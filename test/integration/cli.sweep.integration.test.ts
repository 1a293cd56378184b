/**
 * `overbrainer sweep` as a user runs it: a child process (the built CLI) with a cleared
 * environment against the Runpod emulator (real pods) and the real Optuna
 * (OVERBRAINER_SWEEP_PYTHON=/usr/bin/python3): the dry run's quote creates nothing; a sweep of
 * 2 trials runs to its end (exit 0); `sweep ls --json` and `sweep show` list it with its best;
 * `sweep attach` and `sweep stop` of the ended sweep change nothing.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ROOT } from '../helpers/cli';
import { cliSuite } from '../helpers/cliSuite';
import { tinyToml } from '../helpers/tinyWorkspace';

const SWEEP = `max_cost_usd = 0.5

[sweep]
name = "cli-sweep"
metric = "eval_loss"
direction = "minimize"
trials = 2
parallel = 2
budget_usd = 3
sampler = "random"
sampler_seed = 2
pruner = "none"

[sweep.params]
learning_rate = { low = 1e-5, high = 1e-2, log = true }
lora_r = [8, 16]
`;

describe('overbrainer sweep against the Runpod emulator and the real Optuna', function () {
  this.timeout(300_000);
  const suite = cliSuite(
    'cli-sweep-it-',
    () =>
      tinyToml(
        'python3 train.py --steps 10 --step-seconds 0.05 --learning-rate {learning_rate} --lora-r {lora_r}',
        SWEEP,
      ),
    {
      env: { OVERBRAINER_SWEEP_PYTHON: '/usr/bin/python3' },
      prepare: (ws) =>
        fs.copyFileSync(
          path.join(ROOT, 'examples', 'sweep', 'train.py'),
          path.join(ws, 'train.py'),
        ),
    },
  );
  const { cli, runsDir } = suite;

  it('sweep start --dry-run quotes the budget and creates nothing', async () => {
    const ran = await cli(['sweep', 'start', '--dry-run']);
    assert.equal(ran.code, 0, ran.stderr);
    assert.match(ran.stdout, /sweep cli-sweep: 2 trials, 2 at once, budget \$3\.00/);
    assert.match(ran.stdout, /a trial's worst case: \$0\.5\d/);
    assert.match(ran.stdout, /the budget starts 2 trial\(s\) if each spends its worst case/);
    assert.equal(fs.existsSync(runsDir()), false);
    assert.deepEqual(suite.emulator.ledger().pods, []);
  });

  it('sweep runs the trials to the best; sweep ls and sweep show list it', async () => {
    const ran = await cli(['sweep']);
    assert.equal(ran.code, 0, `${ran.stdout}\n${ran.stderr}`);
    assert.match(ran.stdout, /sweep cli-sweep: ended \(trials\)/);
    assert.match(ran.stdout, /best: trial \d, eval_loss [\d.]+, \{"learning_rate":/);
    const ls = await cli(['sweep', 'ls', '--json']);
    assert.equal(ls.code, 0, ls.stderr);
    const doc = JSON.parse(ls.stdout) as {
      sweeps: { name: string; state: string; trials: number; best: { value: number } | null }[];
    };
    assert.equal(doc.sweeps.length, 1);
    assert.equal(doc.sweeps[0]?.name, 'cli-sweep');
    assert.equal(doc.sweeps[0]?.state, 'ended');
    assert.equal(doc.sweeps[0]?.trials, 2);
    assert.ok(doc.sweeps[0]?.best !== null);
    const show = await cli(['sweep', 'show', 'cli-sweep']);
    assert.equal(show.code, 0, show.stderr);
    assert.equal(show.stdout.match(/^ {2}\d {2}COMPLETE /gm)?.length, 2, show.stdout);
    const missing = await cli(['sweep', 'show', 'nope']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no sweep nope/);
    // The ended sweep: attach shows it, stop has nothing to stop; another name is refused.
    const attach = await cli(['sweep', 'attach', 'cli-sweep']);
    assert.equal(attach.code, 0, attach.stderr);
    assert.match(attach.stdout, /sweep cli-sweep: ended \(trials\)/);
    const stop = await cli(['sweep', 'stop', 'cli-sweep']);
    assert.equal(stop.code, 0, stop.stderr);
    assert.match(stop.stderr, /sweep cli-sweep had already ended: nothing to stop/);
    const other = await cli(['sweep', 'stop', 'nope']);
    assert.notEqual(other.code, 0);
    assert.match(
      other.stderr,
      /sweep nope is not the \[sweep\] of overbrainer\.toml .*name = "nope"/s,
    );
    assert.deepEqual(
      suite.emulator.ledger().pods.filter((p) => p.billing),
      [],
      'attach and stop of an ended sweep create no pod',
    );
  });
});
