import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { formatConfigError, loadConfig, type OverbrainerConfig } from '../../src/core/config';

/**
 * The examples cannot rot: each overbrainer.toml goes through the extension's own loader (parse,
 * validation, the files it names must exist), and what each trainer needs to report metrics is
 * in place. The GPU examples cannot run here (no GPU, no model downloads); the tiny one runs in
 * the demo (test/e2e/demo.e2e.test.ts).
 */
const EXAMPLES = path.resolve(__dirname, '..', '..', 'examples');
/** The system's python3: a pyenv shim first on PATH costs seconds per start on a loaded machine. */
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

function load(name: string): OverbrainerConfig {
  // An empty env: the developer's OVERBRAINER_* variables must not make an example pass or fail.
  const loaded = loadConfig(path.join(EXAMPLES, name), {});
  assert.ok(loaded.ok, loaded.ok ? '' : loaded.errors.map(formatConfigError).join('\n'));
  return loaded.config;
}

describe('examples/', function () {
  // Two python3 runs: slow only on a loaded machine.
  this.timeout(30_000);
  it('each example folder has an overbrainer.toml and a README', function () {
    const names = readdirSync(EXAMPLES, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name)
      .sort();
    assert.deepEqual(names, ['axolotl-lora', 'ddp', 'hf-trainer', 'tiny']);
    for (const name of names) {
      assert.ok(
        existsSync(path.join(EXAMPLES, name, 'overbrainer.toml')),
        `${name}/overbrainer.toml`,
      );
      assert.ok(existsSync(path.join(EXAMPLES, name, 'README.md')), `${name}/README.md`);
    }
  });

  it('every example bounds its pod: a runpod target with max_hours of at most 2', function () {
    for (const name of ['tiny', 'axolotl-lora', 'hf-trainer', 'ddp']) {
      const config = load(name);
      const target = config.targets[config.training?.target ?? ''];
      assert.equal(target?.kind, 'runpod', `${name}: the default target is a Runpod pod`);
      if (target?.kind === 'runpod') assert.ok(target.maxHours <= 2, `${name}: max_hours`);
    }
  });

  it('tiny: the stdlib trainer, uploaded with its data, with a local target too', function () {
    const config = load('tiny');
    assert.deepEqual(config.training?.trainer, {
      kind: 'command',
      command: 'python3 train.py --steps 40 --step-seconds 0.5',
    });
    assert.deepEqual(config.training?.upload, ['train.py', 'data']);
    assert.equal(config.targets.here?.kind, 'local');
  });

  it('tiny: train.py writes protocol lines whose loss falls, and its model', function () {
    const dir = mkdtempSync(path.join(tmpdir(), 'overbrainer-tiny-'));
    try {
      const metrics = path.join(dir, 'metrics.jsonl');
      const result = spawnSync(
        PYTHON,
        [path.join(EXAMPLES, 'tiny', 'train.py'), '--steps', '10', '--step-seconds', '0'],
        { cwd: dir, env: { ...process.env, OVERBRAINER_METRICS: metrics }, encoding: 'utf8' },
      );
      assert.equal(result.status, 0, result.stderr);
      const lines = readFileSync(metrics, 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { event: string; loss?: number });
      assert.equal(lines[0]?.event, 'begin');
      assert.equal(lines[lines.length - 1]?.event, 'end');
      const losses = lines.flatMap((line) => (typeof line.loss === 'number' ? [line.loss] : []));
      assert.equal(losses.length, 10);
      assert.ok(losses[9]! < losses[0]!, `loss ${losses[0]} → ${losses[9]}`);
      assert.ok(existsSync(path.join(dir, 'output', 'model.json')));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('axolotl-lora: an Axolotl LoRA config that loads the metrics plugin and writes output/', function () {
    const config = load('axolotl-lora');
    assert.deepEqual(config.training?.trainer, {
      kind: 'axolotl',
      configPath: 'axolotl.yaml',
      model: null,
    });
    const yaml = readFileSync(path.join(EXAMPLES, 'axolotl-lora', 'axolotl.yaml'), 'utf8');
    const key = (name: string): string | undefined =>
      new RegExp(`^${name}:[ \\t]*(\\S.*?)\\s*$`, 'm').exec(yaml)?.[1];
    assert.match(
      yaml,
      /^plugins:\n(?:\s+-.*\n)*\s+- overbrainer_metrics\.OverbrainerMetricsPlugin$/m,
    );
    assert.equal(key('adapter'), 'lora');
    for (const name of ['base_model', 'lora_r', 'lora_alpha', 'lora_dropout', 'learning_rate']) {
      assert.ok(key(name) !== undefined, `axolotl.yaml sets ${name}`);
    }
    assert.match(key('base_model') ?? '', /^Qwen\/Qwen2\.5-0\.5B/);
    // What Axolotl writes is what comes back; the data it reads is uploaded.
    assert.equal(key('output_dir'), './output');
    assert.ok(config.training?.artifacts.includes('output/'));
    const dataPaths = [...yaml.matchAll(/^\s+- path: (\S+)$/gm)].map((match) => match[1]!);
    assert.ok(dataPaths.length > 0, 'a dataset path');
    for (const dataPath of dataPaths) {
      assert.ok(
        config.training?.upload.some(
          (entry) => dataPath === entry || dataPath.startsWith(`${entry}/`),
        ),
        `${dataPath} is uploaded`,
      );
      const rows = readFileSync(path.join(EXAMPLES, 'axolotl-lora', dataPath), 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      assert.ok(rows.length >= 20);
      for (const row of rows)
        assert.deepEqual(Object.keys(row).sort(), ['input', 'instruction', 'output']);
    }
    // No tab, which YAML refuses for indentation.
    assert.doesNotMatch(yaml, /\t/);
  });

  it('hf-trainer: a transformers script using the shipped callback, whose --help runs', function () {
    const config = load('hf-trainer');
    const trainer = config.training?.trainer;
    assert.equal(trainer?.kind, 'command');
    assert.match(trainer?.kind === 'command' ? trainer.command : '', /\btrain\.py\b/);
    assert.ok(config.training?.upload.includes('train.py'));
    const target = config.targets.pod;
    assert.equal(target?.kind === 'runpod' ? target.gpuTypes : null, 'auto');
    const script = path.join(EXAMPLES, 'hf-trainer', 'train.py');
    const source = readFileSync(script, 'utf8');
    assert.match(source, /from overbrainer_metrics import OverbrainerMetricsCallback/);
    assert.match(source, /callbacks=\[OverbrainerMetricsCallback\(\)\]/);
    // The module the script imports is the one the run ships (python/ here, plugin/ on the pod).
    assert.ok(existsSync(path.join(EXAMPLES, '..', 'python', 'overbrainer_metrics.py')));
    // python3 compiles it, and --help runs without torch or transformers and finds the callback's module.
    const help = spawnSync(PYTHON, [script, '--help'], { encoding: 'utf8' });
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /--model/);
  });
});
