/**
 * `[sweep]` and `[sweep.params]` of overbrainer.toml: a sweep as written in the issue parses into
 * typed ranges and lists (TOML integers an int range, floats a float range), and every bad input
 * is an error at its line and column naming what to write.
 */
import assert from 'node:assert/strict';
import { configTemplate, formatConfigError } from '../../src/core/config';
import { BASE, ok, errors, one, at } from '../helpers/configFixture';

/** BASE (lines 1-8), then `[sweep]` from line 10; `extra` lines start at 17, params after. */
function sweep(
  extra = '',
  params = 'learning_rate = { low = 1e-5, high = 1e-3, log = true }\nlora_r = [8, 16, 32]',
): string {
  return `${BASE}
[sweep]
name = "lr-rank"
metric = "eval_loss"
direction = "minimize"
trials = 24
budget_usd = 15
target = "pod"
${extra}
[sweep.params]
${params}
`;
}

describe('config: [sweep]', () => {
  it("reads the sweep as the issue writes it, with Optuna's defaults", () => {
    const config = ok(sweep('parallel = 4\nsampler = "tpe"\npruner = "hyperband"'));
    assert.deepEqual(
      { ...config.sweep, params: { ...config.sweep?.params } },
      {
        name: 'lr-rank',
        target: 'pod',
        metric: 'eval_loss',
        direction: 'minimize',
        trials: 24,
        parallel: 4,
        budgetUsd: 15,
        sampler: 'tpe',
        pruner: 'hyperband',
        samplerSeed: null,
        minResource: null,
        maxResource: null,
        params: {
          learning_rate: { kind: 'float', low: 1e-5, high: 1e-3, log: true, step: null },
          lora_r: { kind: 'choice', choices: [8, 16, 32] },
        },
      },
    );
    const plain = ok(sweep());
    assert.equal(plain.sweep?.parallel, 1);
    assert.equal(plain.sweep?.sampler, 'tpe');
    assert.equal(plain.sweep?.pruner, 'median');
    assert.equal(ok(BASE).sweep, null);
  });

  it('makes TOML integers an int range and floats a float range; nested tables dotted names', () => {
    const config = ok(
      sweep(
        '',
        [
          'layers = { low = 2, high = 8 }',
          'batch = { low = 16, high = 128, step = 16 }',
          'dropout = { low = 0.0, high = 0.5, step = 0.1 }',
          'warmup = { low = 0, high = 1 }',
          'warm = { low = 0.0, high = 1.0 }',
          'heads = { low = 1, high = 64, log = true }',
          'lora.r = [8, 16]',
          'optimizer = ["adamw", "sgd"]',
        ].join('\n'),
      ),
    );
    assert.deepEqual(
      { ...config.sweep?.params },
      {
        layers: { kind: 'int', low: 2, high: 8, log: false, step: 1 },
        batch: { kind: 'int', low: 16, high: 128, log: false, step: 16 },
        dropout: { kind: 'float', low: 0, high: 0.5, log: false, step: 0.1 },
        warmup: { kind: 'int', low: 0, high: 1, log: false, step: 1 },
        warm: { kind: 'float', low: 0, high: 1, log: false, step: null },
        heads: { kind: 'int', low: 1, high: 64, log: true, step: 1 },
        'lora.r': { kind: 'choice', choices: [8, 16] },
        optimizer: { kind: 'choice', choices: ['adamw', 'sgd'] },
      },
    );
  });

  it('takes the target from training.target, or the only runpod target', () => {
    const text = sweep().replace('target = "pod"\n', '');
    assert.equal(ok(text).sweep?.target, 'pod');
  });

  it('takes sweep keys from the environment, never a parameter', () => {
    assert.equal(ok(sweep(), { OVERBRAINER_SWEEP__BUDGET_USD: '7.5' }).sweep?.budgetUsd, 7.5);
    const error = one(sweep(), { OVERBRAINER_SWEEP__PARAMS__LORA_R: '8' });
    assert.equal(error.envVar, 'OVERBRAINER_SWEEP__PARAMS__LORA_R');
    assert.match(error.hint, /\[sweep\.params\] in overbrainer\.toml/);
  });

  const cases: [string, string, string | undefined, number, number, RegExp, RegExp][] = [
    [
      'a sweep name with spaces',
      '',
      undefined,
      11,
      8,
      /sweep\.name must be lower-case/,
      /name = "lr-rank"/,
    ],
    [
      'an unknown sampler',
      'sampler = "bayes"',
      undefined,
      17,
      11,
      /Optuna's samplers "tpe", "random", "grid", "cmaes"/,
      /sampler = "tpe"/,
    ],
    [
      'an unknown pruner',
      'pruner = "asha"',
      undefined,
      17,
      10,
      /pruners "hyperband", "successive_halving", "median", "none"/,
      /pruner = "hyperband"/,
    ],
    [
      'a typo',
      'trails = 3',
      undefined,
      17,
      1,
      /sweep\.trails is not a key/,
      /Did you mean trials\?/,
    ],
    [
      'parallel above trials',
      'parallel = 30',
      undefined,
      17,
      12,
      /parallel \(30\) is more than trials \(24\)/,
      /parallel = 24 or less/,
    ],
    ['a local target', '', undefined, 16, 10, /local target/, /target = "pod"/],
    [
      'a range backwards',
      '',
      'lr = { low = 1e-3, high = 1e-5 }',
      19,
      14,
      /low \(0\.001\) must be less than high/,
      /Swap low and high/,
    ],
    [
      'a log range from 0',
      '',
      'lr = { low = 0.0, high = 1.0, log = true }',
      19,
      14,
      /log range needs low > 0/,
      /Raise low above 0/,
    ],
    [
      'a log range with a float step',
      '',
      'lr = { low = 0.1, high = 1.0, log = true, step = 0.1 }',
      19,
      50,
      /cannot take a step on a log range/,
      /Remove step/,
    ],
    [
      'a range without high',
      '',
      'lr = { low = 0.1 }',
      19,
      1,
      /sweep\.params\.lr needs high/,
      /Add high = /,
    ],
    [
      'a range with a typo',
      '',
      'lr = { low = 0.1, high = 1.0, logg = true }',
      19,
      31,
      /params\.lr\.logg is not a key of a range/,
      /Did you mean log\?/,
    ],
    [
      'a string bound',
      '',
      'lr = { low = "0.1", high = 1.0 }',
      19,
      14,
      /lr\.low must be a number, not "0\.1"/,
      /no quotes/,
    ],
    [
      'a bare value',
      '',
      'lr = 0.001',
      19,
      6,
      /must be a range \{ low, high \} or a list of values, not 0\.001/,
      /lr = \[0\.001\]/,
    ],
    ['an empty list', '', 'lora_r = []', 19, 10, /empty list/, /lora_r = \[8, 16, 32\]/],
    [
      'a repeated value',
      '',
      'lora_r = [8, 16, 8]',
      19,
      18,
      /lists 8 twice/,
      /Remove the repeated value/,
    ],
    [
      'a list of lists',
      '',
      'lora_r = [[8], [16]]',
      19,
      11,
      /item 1 must be a string, a number or true\/false, not a list/,
      /one value per trial/,
    ],
    [
      'a step wider than the range',
      '',
      'd = { low = 0.0, high = 0.5, step = 1.0 }',
      19,
      37,
      /step \(1\) is wider than the range/,
      /Lower the step/,
    ],
    [
      'a bad parameter name',
      '',
      '"learning-rate" = [1, 2]',
      19,
      1,
      /parameter name "learning-rate" is not allowed/,
      /learning_rate/,
    ],
    [
      'two parameters that are one environment variable',
      '',
      'lr = [1, 2]\nLR = [3]',
      20,
      1,
      /parameters lr and LR both reach the job as the environment variable OVERBRAINER_PARAM_LR/,
      /Rename one of them/,
    ],
    [
      'a nested name and its __ spelling',
      '',
      'lora.r = [8]\nlora__r = [16]',
      20,
      1,
      /parameters lora\.r and lora__r both reach the job as .*OVERBRAINER_PARAM_LORA__R/,
      /Rename one of them/,
    ],
    [
      'grid over a float range without step',
      'sampler = "grid"',
      'lr = { low = 0.1, high = 1.0 }',
      19,
      1,
      /sampler = "grid" tries every value, and lr is a range without a step/,
      /step = 0\.09|write its values as a list/,
    ],
  ];
  for (const [title, extra, params, line, column, message, hint] of cases) {
    it(`${title}: placed, with what to write`, () => {
      let text = sweep(extra, params);
      if (title === 'a sweep name with spaces') text = text.replace('"lr-rank"', '"lr rank"');
      if (title === 'a local target') {
        text = `${text}\n[targets.here]\nkind = "local"\n`.replace(
          'target = "pod"',
          'target = "here"',
        );
      }
      at(one(text), line, column, message, hint);
    });
  }

  it('a sweep without [training], [sweep.params] or its required keys: each missing piece named', () => {
    const text = `[targets.pod]\nkind = "runpod"\ngpu_types = ["NVIDIA A40"]\nmax_hours = 6\n\n[sweep]\nname = "x"\n`;
    const found = errors(text).map(formatConfigError).join('\n');
    assert.match(found, /no \[training\]/);
    assert.match(found, /needs \[sweep\.params\]/);
    assert.match(found, /sweep needs metric.*Add metric = "eval_loss"/);
    assert.match(found, /sweep needs direction.*Add direction = "minimize"/);
    assert.match(found, /sweep needs trials/);
    assert.match(found, /sweep needs budget_usd/);
  });

  it("min_resource / max_resource: Hyperband's rungs in the job's steps, only where a pruner takes them", () => {
    const hb = ok(sweep('pruner = "hyperband"\nmin_resource = 5\nmax_resource = 60'));
    assert.deepEqual([hb.sweep?.minResource, hb.sweep?.maxResource], [5, 60]);
    const sh = ok(sweep('pruner = "successive_halving"\nmin_resource = 5'));
    assert.deepEqual([sh.sweep?.minResource, sh.sweep?.maxResource], [5, null]);
    at(
      one(sweep('pruner = "median"\nmin_resource = 5')),
      18,
      16,
      /min_resource is a setting of the "hyperband" and "successive_halving" pruners, and this sweep's pruner is "median"/,
      /Remove min_resource, or write pruner = "hyperband"/,
    );
    at(
      one(sweep('pruner = "successive_halving"\nmax_resource = 60')),
      18,
      16,
      /max_resource is a setting of the "hyperband" pruner/,
      /Remove max_resource/,
    );
    at(
      one(sweep('pruner = "hyperband"\nmin_resource = 10\nmax_resource = 5')),
      19,
      16,
      /max_resource \(5\) is less than min_resource \(10\)/,
      /Write max_resource = 10 or more/,
    );
    at(
      one(sweep('pruner = "hyperband"\nmin_resource = 0')),
      18,
      16,
      /min_resource must be a whole number of steps from 1/,
      /min_resource = 5/,
    );
  });

  it('a target no [targets] defines: the names that exist', () => {
    const error = one(sweep().replace('target = "pod"', 'target = "gpu"'));
    at(error, 16, 10, /the sweep's target "gpu" has no \[targets\.gpu\]/, /target = "pod"/);
  });

  it("the template's [sweep], uncommented, is valid", () => {
    const text = configTemplate();
    const start = text.indexOf('# [sweep]');
    const uncommented = text
      .slice(start)
      .split('\n')
      .map((line) => (line.startsWith('# #') ? '' : line.replace(/^# ?/, '')))
      .join('\n');
    const config = ok(text.slice(0, start) + uncommented);
    assert.equal(config.sweep?.name, 'lr-rank');
    assert.equal(config.sweep?.samplerSeed, 1);
  });
});
