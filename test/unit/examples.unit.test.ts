import * as assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  formatConfigError,
  loadConfig,
  nodesProblem,
  type OverbrainerConfig,
} from '../../src/core/config';
import { parseMetricLine } from '../../src/core/train/metrics';

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
    assert.deepEqual(names, ['axolotl-lora', 'ddp', 'hf-trainer', 'sweep', 'tiny']);
    for (const name of names) {
      assert.ok(
        existsSync(path.join(EXAMPLES, name, 'overbrainer.toml')),
        `${name}/overbrainer.toml`,
      );
      assert.ok(existsSync(path.join(EXAMPLES, name, 'README.md')), `${name}/README.md`);
    }
  });

  it('every example bounds its pod: a runpod target with max_hours of at most 2', function () {
    for (const name of ['tiny', 'axolotl-lora', 'hf-trainer', 'ddp', 'sweep']) {
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
      launcher: null,
    });
    assert.deepEqual(config.training?.upload, ['train.py', 'data']);
    assert.equal(config.targets.here?.kind, 'local');
  });

  it('ddp: one [training] under torchrun for its pod and its 2-node cluster, each bounded', function () {
    const config = load('ddp');
    const training = config.training!;
    assert.deepEqual(training.trainer, {
      kind: 'command',
      command: 'train.py --steps 40 --save-every 10',
      launcher: 'torchrun',
    });
    const { pod, cluster } = config.targets;
    assert.ok(pod?.kind === 'runpod' && cluster?.kind === 'runpod');
    assert.deepEqual([pod.nodes, cluster.nodes], [1, 2]);
    assert.equal(nodesProblem(training, pod), null);
    assert.equal(nodesProblem(training, cluster), null);
    assert.ok(cluster.maxCostUsd !== null && cluster.maxHours <= 2, 'the cluster is bounded');
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

  describe('sweep: a job whose loss is a known function of its parameters', function () {
    let dir: string;
    beforeEach(() => {
      dir = mkdtempSync(path.join(tmpdir(), 'overbrainer-sweep-'));
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    /** The known loss at the last of 60 steps (examples/sweep/train.py's docstring). */
    const last = (lr: number, r: number): number => {
      const final = 0.1 + 0.3 * (Math.log10(lr) + 3.5) ** 2 + 0.02 * (Math.log2(r) - 4) ** 2;
      return final + (2.5 - final) * Math.exp(-60 / (60 / 12));
    };

    function run(
      args: string[],
      env: Record<string, string> = {},
    ): {
      evalLosses: number[];
      losses: number[];
      result: { learning_rate: number; lora_r: number; eval_loss: number };
    } {
      const metrics = path.join(dir, 'metrics.jsonl');
      rmSync(metrics, { force: true });
      const result = spawnSync(
        PYTHON,
        [path.join(EXAMPLES, 'sweep', 'train.py'), '--step-seconds', '0', ...args],
        {
          cwd: dir,
          env: { ...process.env, ...env, OVERBRAINER_METRICS: metrics },
          encoding: 'utf8',
        },
      );
      assert.equal(result.status, 0, result.stderr);
      // Read as the product reads them: every line a protocol line.
      const parsed = readFileSync(metrics, 'utf8')
        .trim()
        .split('\n')
        .map((line) => parseMetricLine(new TextEncoder().encode(line)));
      assert.equal(parsed[0]?.kind, 'begin');
      assert.equal(parsed[parsed.length - 1]?.kind, 'end');
      const metricsOnly = parsed.flatMap((line) => (line.kind === 'metric' ? [line.metric] : []));
      assert.equal(metricsOnly.length + 2, parsed.length, 'no line skipped');
      return {
        evalLosses: metricsOnly.flatMap((m) =>
          typeof m.evalLoss === 'number' ? [m.evalLoss] : [],
        ),
        losses: metricsOnly.flatMap((m) => (typeof m.loss === 'number' ? [m.loss] : [])),
        result: JSON.parse(readFileSync(path.join(dir, 'output', 'result.json'), 'utf8')) as {
          learning_rate: number;
          lora_r: number;
          eval_loss: number;
        },
      };
    }

    it('its config is a valid [sweep] over learning_rate and lora_r, each pod capped', function () {
      const config = load('sweep');
      assert.equal(config.sweep?.metric, 'eval_loss');
      assert.deepEqual(Object.keys(config.sweep?.params ?? {}).sort(), ['learning_rate', 'lora_r']);
      const target = config.targets[config.sweep?.target ?? ''];
      assert.ok(target?.kind === 'runpod' && target.maxCostUsd !== null);
    });

    it('ends near the known final loss: best at learning_rate 3.2e-4 and lora_r 16, worse away from it', function () {
      const best = run(['--learning-rate', '3.1623e-4', '--lora-r', '16']);
      assert.equal(best.evalLosses.length, 12);
      assert.ok(Math.abs(best.result.eval_loss - 0.1) < 0.01, String(best.result.eval_loss));
      assert.ok(best.losses[59]! < best.losses[0]!);
      const far = run(['--learning-rate', '1e-2', '--lora-r', '4']);
      assert.ok(Math.abs(last(3.1623e-4, 16) - 0.1) < 0.001);
      for (const [lr, r] of [
        [1e-2, 4],
        [1e-5, 64],
      ] as const) {
        const away = run(['--learning-rate', String(lr), '--lora-r', String(r)]).result.eval_loss;
        assert.ok(
          Math.abs(away - last(lr, r)) < last(lr, r) * 0.05,
          `${lr}, ${r}: ${away} vs ${last(lr, r)}`,
        );
        assert.ok(away > best.result.eval_loss + 0.1);
      }
      const expected = last(1e-2, 4);
      assert.ok(
        Math.abs(far.result.eval_loss - expected) < expected * 0.05,
        `${far.result.eval_loss} vs ${expected}`,
      );
      // Behind from its first evaluation: what lets a pruner stop it early.
      assert.ok(far.evalLosses[0]! > best.evalLosses[0]!);
      // Repeatable: the same parameters and seed give the same curve.
      assert.deepEqual(
        run(['--learning-rate', '3.1623e-4', '--lora-r', '16']).evalLosses,
        best.evalLosses,
      );
    });

    it('keeps one order from the first evaluation to the last: a trial near the best that ends behind it is behind it from the start', function () {
      // Curves that cross (a higher learning rate ahead early, behind at the end) have a pruner
      // cut the best trial at its first rung: Hyperband did so on 2 seeds of 5.
      const best = run(['--learning-rate', '3.1623e-4', '--lora-r', '16']).evalLosses;
      for (const [lr, r] of [
        [1e-3, 16],
        [1e-4, 16],
        [3.1623e-4, 4],
      ] as const) {
        const near = run(['--learning-rate', String(lr), '--lora-r', String(r)]).evalLosses;
        assert.ok(near[near.length - 1]! > best[best.length - 1]!, `${lr}, ${r} ends behind`);
        assert.ok(
          near[0]! > best[0]!,
          `${lr}, ${r}: ${near[0]} at the first evaluation, the best ${best[0]}`,
        );
      }
    });

    it('reads params.json, then OVERBRAINER_PARAM_*, then the command line (the later wins)', function () {
      writeFileSync(
        path.join(dir, 'params.json'),
        JSON.stringify({ learning_rate: 1e-4, lora_r: 32 }),
      );
      assert.deepEqual(pick(run([]).result), [1e-4, 32]);
      assert.deepEqual(pick(run([], { OVERBRAINER_PARAM_LORA_R: '8' }).result), [1e-4, 8]);
      assert.deepEqual(
        pick(run(['--learning-rate', '0.002'], { OVERBRAINER_PARAM_LORA_R: '8' }).result),
        [0.002, 8],
      );
    });

    it('stops after the current step on SIGTERM (a pruned trial), writing what it has, exit 143', async function () {
      const metrics = path.join(dir, 'metrics.jsonl');
      const child = spawn(
        PYTHON,
        [path.join(EXAMPLES, 'sweep', 'train.py'), '--step-seconds', '0.2'],
        {
          cwd: dir,
          env: { ...process.env, OVERBRAINER_METRICS: metrics },
        },
      );
      const exited = new Promise<number | null>((resolve) =>
        child.once('exit', (code) => resolve(code)),
      );
      // Waits on the state (a first loss line), not on time.
      while (!(existsSync(metrics) && readFileSync(metrics, 'utf8').includes('"loss"'))) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      child.kill('SIGTERM');
      assert.equal(await exited, 143);
      const result = JSON.parse(readFileSync(path.join(dir, 'output', 'result.json'), 'utf8')) as {
        steps: number;
        stopped: boolean;
      };
      assert.equal(result.stopped, true);
      assert.ok(result.steps < 60, String(result.steps));
      assert.match(readFileSync(metrics, 'utf8'), /"event":"end"/);
    });

    function pick(result: { learning_rate: number; lora_r: number }): [number, number] {
      return [result.learning_rate, result.lora_r];
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
