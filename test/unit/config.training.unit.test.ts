/**
 * `[training]` with the original CLI's model keys (issue 36 part 1): their defaults, their errors
 * at their place, the user's own YAML against them, and the Axolotl config generated from them
 * (axolotl_extra deep-merged), as the run uploads it and `--dry-run` prints it.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadConfig, type ConfigError } from '../../src/core/config';
import type { AxolotlModel, TrainingConfig } from '../../src/core/config/types';
import {
  afterTrainingS,
  generatedAxolotlConfig,
  quoteForTarget,
  quoteLines,
  trainingPlanLines,
} from '../../src/core/flow';
import { checkRunFiles } from '../../src/core/flow/runFiles';
import { axolotlSettings, axolotlYaml, deepMerge } from '../../src/core/train/axolotlConfig';
import { jobScript } from '../../src/core/train/jobScripts';
import { billionsFromName, mergeEstimateS } from '../../src/core/train/mergeEstimate';
import { PRODUCTION_TIMING } from '../../src/core/timing';
import { at, axolotlToml, errors, firstTarget, ok, one, pod } from '../helpers/configFixture';

const TARGET = `
[targets.pod]
kind = "runpod"
gpu_types = ["NVIDIA A40"]
max_hours = 6
`;

/** `[training]` with `lines` (from line 2 on), then a runpod target. */
const withTraining = (lines: string): string => `[training]\n${lines}\n${TARGET}`;

function training(lines: string): TrainingConfig {
  const config = ok(withTraining(lines));
  assert.ok(config.training);
  return config.training;
}

function model(lines: string): AxolotlModel {
  const trainer = training(lines).trainer;
  assert.ok(trainer.kind === 'axolotl' && trainer.model !== null);
  return trainer.model;
}

describe('config: [training] model keys generate the Axolotl config', () => {
  it("takes base_model alone with the original's defaults", () => {
    const t = training('trainer = "axolotl"\nbase_model = "Qwen/Qwen2.5-0.5B-Instruct"');
    assert.deepEqual(t.trainer, {
      kind: 'axolotl',
      configPath: null,
      model: {
        baseModel: 'Qwen/Qwen2.5-0.5B-Instruct',
        adapter: 'lora',
        epochs: 3,
        learningRate: 2e-4,
        loraR: 16,
        loraAlpha: 32,
        loraDropout: 0.05,
        sequenceLen: 4096,
        microBatchSize: 2,
        gradientAccumulationSteps: 4,
        optimizer: 'adamw_torch_fused',
        lrScheduler: 'cosine',
        samplePacking: true,
        evalsPerEpoch: 4,
        savesPerEpoch: 1,
        extra: {},
      },
    });
    assert.equal(t.merge, false);
    assert.equal(t.hubModelId, null);
    assert.deepEqual(t.secrets, []);
  });

  it('takes every key, merge, hub_model_id, secrets and axolotl_extra', () => {
    const t = training(`trainer = "axolotl"
base_model = "meta-llama/Llama-3.1-8B"
adapter = "qlora"
epochs = 1
learning_rate = 1e-5
lora_r = 8
lora_alpha = 16
lora_dropout = 0.1
sequence_len = 2048
micro_batch_size = 1
gradient_accumulation_steps = 8
optimizer = "adamw_bnb_8bit"
lr_scheduler = "linear"
sample_packing = false
evals_per_epoch = 0
saves_per_epoch = 2
merge = true
hub_model_id = "me/llama-lora"
secrets = ["WANDB_API_KEY", "WANDB_API_KEY"]

[training.axolotl_extra]
warmup_ratio = 0.1`);
    assert.equal(t.merge, true);
    assert.equal(t.hubModelId, 'me/llama-lora');
    assert.deepEqual(t.secrets, ['WANDB_API_KEY']);
    assert.ok(t.trainer.kind === 'axolotl' && t.trainer.model);
    const m = t.trainer.model;
    assert.deepEqual(
      [m.adapter, m.epochs, m.learningRate, m.loraR, m.samplePacking, m.evalsPerEpoch],
      ['qlora', 1, 1e-5, 8, false, 0],
    );
    assert.deepEqual({ ...m.extra }, { warmup_ratio: 0.1 });
  });

  it('takes the keys from the environment, as strings', () => {
    const config = ok(withTraining('trainer = "axolotl"\nbase_model = "m"'), {
      OVERBRAINER_TRAINING__EPOCHS: '5',
      OVERBRAINER_TRAINING__SAMPLE_PACKING: 'false',
      OVERBRAINER_TRAINING__MERGE: 'true',
      OVERBRAINER_TRAINING__SECRETS: 'WANDB_API_KEY, COMET_API_KEY',
    });
    const t = config.training!;
    assert.ok(t.trainer.kind === 'axolotl' && t.trainer.model);
    assert.equal(t.trainer.model.epochs, 5);
    assert.equal(t.trainer.model.samplePacking, false);
    assert.equal(t.merge, true);
    assert.deepEqual(t.secrets, ['WANDB_API_KEY', 'COMET_API_KEY']);
  });

  it('refuses config and model keys together, saying the YAML wins, at the first model key', () => {
    const error = one(
      withTraining('trainer = "axolotl"\nconfig = "axolotl.yaml"\nbase_model = "m"\nepochs = 2'),
    );
    at(
      error,
      4,
      1,
      /training.config and base_model and epochs are both given: your own Axolotl YAML \(config\) wins, and base_model and epochs would be ignored/,
      /Remove base_model and epochs here.*or remove config to have Overbrainer generate/,
    );
  });

  it('refuses model keys without base_model, bad values and merge of a full fine-tune, each at its place', () => {
    at(
      one(withTraining('trainer = "axolotl"\nepochs = 2')),
      3,
      1,
      /generated from \[training\] needs base_model/,
      /Add base_model = /,
    );
    const found = errors(
      withTraining(`trainer = "axolotl"
base_model = "m"
adapter = "dora"
learning_rate = 0
lora_dropout = 1
sample_packing = "yes"
hub_model_id = "just-a-name"
secrets = ["HF_TOKEN", "OVERBRAINER_X", "not a name"]
axolotl_extra = 3`),
    );
    const where = found.map((e: ConfigError) => [e.line, e.column, e.message]);
    assert.deepEqual(where, [
      [4, 11, 'training.adapter must be "lora", "qlora" or "full", not "dora"'],
      [5, 17, 'training.learning_rate must be a number greater than 0 and at most 1, not 0'],
      [6, 16, 'training.lora_dropout must be a number from 0 up to (not including) 1, not 1'],
      [7, 18, 'training.sample_packing must be true or false, not "yes"'],
      [
        8,
        16,
        'training.hub_model_id must be a Hugging Face repository ID, namespace/name, not "just-a-name"',
      ],
      [9, 11, 'training.secrets must be a list of environment variable names, not a list'],
      [10, 17, 'training.axolotl_extra must be a table of Axolotl settings, not 3'],
    ]);
    at(
      one(withTraining('trainer = "axolotl"\nbase_model = "m"\nadapter = "full"\nmerge = true')),
      5,
      1,
      /merge = true merges a LoRA.*adapter = "full"/,
      /Remove merge/,
    );
    const [tokenName, ours] = errors(
      withTraining(
        'trainer = "axolotl"\nbase_model = "m"\nsecrets = ["HF_TOKEN", "OVERBRAINER_X"]',
      ),
    );
    at(tokenName!, 4, 12, /secrets lists HF_TOKEN/, /OVERBRAINER_HF_TOKEN.*Set Hugging Face Token/);
    at(ours!, 4, 24, /secrets lists OVERBRAINER_X/, /WANDB_API_KEY/);
  });

  it('refuses model keys and merge with trainer = "command"', () => {
    const found = errors(
      withTraining('trainer = "command"\ncommand = "x"\nlora_r = 8\nmerge = true'),
    );
    at(found[0]!, 4, 1, /training.lora_r only applies to trainer = "axolotl"/, /generate/);
    at(found[1]!, 5, 1, /training.merge only applies to trainer = "axolotl"/, /LoRA merge/);
  });

  it('still takes a user YAML, with merge and hub_model_id', () => {
    const t = training(
      'trainer = "axolotl"\nconfig = "./my/ax.yaml"\nmerge = true\nhub_model_id = "org/m"',
    );
    assert.deepEqual(t.trainer, { kind: 'axolotl', configPath: 'my/ax.yaml', model: null });
    assert.equal(t.merge, true);
    assert.equal(pod(ok(withTraining('trainer = "axolotl"\nconfig = "a.yaml"'))).maxHours, 6);
  });
});

describe('the generated Axolotl config', () => {
  const base = (): AxolotlModel =>
    model('trainer = "axolotl"\nbase_model = "Qwen/Qwen2.5-0.5B-Instruct"');

  it('is the LoRA run of the original defaults, with the metrics plugin and the run layout', () => {
    assert.equal(
      axolotlYaml(base(), { evalData: true }),
      `# Generated by Overbrainer from [training] in overbrainer.toml (axolotl_extra merged in).
# Paths are relative to the run directory, where \`axolotl train axolotl.yaml\` runs.
base_model: Qwen/Qwen2.5-0.5B-Instruct
plugins:
  - overbrainer_metrics.OverbrainerMetricsPlugin
datasets:
  - path: data/train.jsonl
    type: chat_template
test_datasets:
  - path: data/eval.jsonl
    type: chat_template
dataset_prepared_path: ./prepared
output_dir: ./output
adapter: lora
load_in_4bit: false
lora_r: 16
lora_alpha: 32
lora_dropout: 0.05
lora_target_linear: true
sequence_len: 4096
sample_packing: true
pad_to_sequence_len: true
micro_batch_size: 2
gradient_accumulation_steps: 4
num_epochs: 3
optimizer: adamw_torch_fused
lr_scheduler: cosine
learning_rate: 0.0002
bf16: auto
gradient_checkpointing: true
logging_steps: 1
evals_per_epoch: 4
saves_per_epoch: 1
`,
    );
  });

  it('leaves out the eval set when none is uploaded, and the LoRA keys for a full fine-tune', () => {
    const settings = axolotlSettings(base(), { evalData: false });
    assert.equal(settings.test_datasets, undefined);
    const full = axolotlSettings({ ...base(), adapter: 'full' }, { evalData: false });
    for (const key of ['adapter', 'lora_r', 'lora_alpha', 'lora_dropout', 'load_in_4bit'])
      assert.equal(full[key], undefined, key);
    assert.equal(
      axolotlSettings({ ...base(), adapter: 'qlora' }, { evalData: false }).load_in_4bit,
      true,
    );
  });

  it('deep-merges axolotl_extra: tables key by key, lists and values replaced, the plugin kept', () => {
    const m = model(`trainer = "axolotl"
base_model = "m"

[training.axolotl_extra]
learning_rate = 1e-7
warmup_ratio = 0.1
plugins = ["axolotl.integrations.liger.LigerPlugin"]
datasets = [{ path = "data/mine.jsonl", type = "alpaca" }]

[training.axolotl_extra.special_tokens]
pad_token = "<|pad|>"`);
    const settings = axolotlSettings(m, { evalData: false });
    assert.equal(settings.learning_rate, 1e-7);
    assert.equal(settings.warmup_ratio, 0.1);
    assert.deepEqual(settings.plugins, [
      'overbrainer_metrics.OverbrainerMetricsPlugin',
      'axolotl.integrations.liger.LigerPlugin',
    ]);
    assert.deepEqual(settings.datasets, [{ path: 'data/mine.jsonl', type: 'alpaca' }]);
    assert.deepEqual(settings.special_tokens, { pad_token: '<|pad|>' });
    assert.deepEqual(deepMerge({ a: { b: 1, c: 2 } }, { a: { c: 3, d: 4 } }), {
      a: { b: 1, c: 3, d: 4 },
    });
    const yaml = axolotlYaml(m, { evalData: false });
    // YAML 1.1 (PyYAML) reads a float only with a dot before the exponent.
    assert.match(yaml, /^learning_rate: 1\.0e-7$/m);
    assert.match(yaml, /^special_tokens:\n {2}pad_token: "<\|pad\|>"$/m);
    assert.match(yaml, /^datasets:\n {2}- path: data\/mine\.jsonl\n {4}type: alpaca$/m);
  });
});

describe('a run of the generated config (files, job, quote, plan)', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-training-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** An overbrainer.toml of the original CLI: training keys, merge and hub_model_id. */
  const ORIGINAL = axolotlToml(2);

  it('loads an original overbrainer.toml, writes the generated axolotl.yaml and merges after training', () => {
    fs.writeFileSync(path.join(dir, 'overbrainer.toml'), ORIGINAL);
    const missing = loadConfig(dir, {});
    assert.ok(!missing.ok);
    assert.match(missing.errors[0]!.message, /trains on data\/train\.jsonl, which does not exist/);
    assert.deepEqual([missing.errors[0]!.line, missing.errors[0]!.column], [4, 1]);
    fs.mkdirSync(path.join(dir, 'data'));
    fs.writeFileSync(path.join(dir, 'data', 'train.jsonl'), '{"messages":[]}\n');
    const loaded = loadConfig(dir, {});
    assert.ok(loaded.ok);
    const runDir = path.join(dir, 'runs', 'r');
    fs.mkdirSync(runDir, { recursive: true });
    assert.equal(loaded.config.training?.hubModelId, 'me/qwen-lora');
    const noPush = { ...loaded.config, training: { ...loaded.config.training!, hubModelId: null } };
    const files = checkRunFiles(noPush, firstTarget(noPush), dir, runDir);
    const written = fs.readFileSync(path.join(runDir, 'axolotl.yaml'), 'utf8');
    assert.equal(written, generatedAxolotlConfig(loaded.config, dir));
    assert.match(written, /^num_epochs: 2$/m);
    assert.doesNotMatch(written, /test_datasets/);
    assert.doesNotMatch(written, /hub_model_id/); // the push is the job's end, not the trainer's
    assert.deepEqual(files.job, {
      trainer: 'axolotl',
      config: 'axolotl.yaml',
      venv: '',
      merge: true,
      afterS: 280,
    });
    const script = jobScript({ ...files.job, venv: '/v' } as Parameters<typeof jobScript>[0], {
      runDir: '/w/r',
      jobEnvFile: null,
    });
    assert.match(
      script,
      /OVERBRAINER_AFTER_S=280 && '\/v\/bin\/axolotl' train 'axolotl.yaml' && \{ \[ -e snapshot.json \] \|\| \{ .*'\/v\/bin\/axolotl' merge-lora 'axolotl.yaml'; \}; \}$/,
    );
    // The eval set, once uploaded, is named.
    fs.writeFileSync(path.join(dir, 'data', 'eval.jsonl'), '{"messages":[]}\n');
    assert.match(
      generatedAxolotlConfig(loaded.config, dir) ?? '',
      /test_datasets:\n {2}- path: data\/eval\.jsonl/,
    );
    // The plan both front ends show: the whole generated config, then the merge, then the push.
    const plan = trainingPlanLines(loaded.config, dir);
    assert.equal(plan[0], 'Axolotl config generated from [training] (uploaded as axolotl.yaml):');
    assert.ok(plan.includes('  base_model: Qwen/Qwen2.5-7B-Instruct'));
    assert.match(
      plan.at(-2) ?? '',
      /^After training: Axolotl's LoRA merge into output\/merged\/ \(about 5 min\)/,
    );
    assert.equal(
      plan.at(-1),
      "At the job's end: output/merged/ pushed from the pod to the Hub as me/qwen-lora (https://huggingface.co), with your HF token; a failed push keeps the results",
    );
  });

  it("counts the merge's time in the quote's expected cost", () => {
    fs.mkdirSync(path.join(dir, 'data'));
    fs.writeFileSync(path.join(dir, 'data', 'train.jsonl'), '{}\n');
    fs.writeFileSync(path.join(dir, 'overbrainer.toml'), ORIGINAL);
    const loaded = loadConfig(dir, {});
    assert.ok(loaded.ok);
    const target = pod(loaded.config);
    const catalog = [
      { id: 'NVIDIA A40', securePricePerHourUsd: 0.36, availability: 'HIGH' },
    ] as unknown as Parameters<typeof quoteForTarget>[1];
    const afterS = afterTrainingS(loaded.config);
    assert.equal(afterS, 280);
    const without = quoteForTarget(target, catalog, [3600], PRODUCTION_TIMING);
    const withMerge = quoteForTarget(target, catalog, [3600], PRODUCTION_TIMING, null, afterS);
    assert.equal(without.after, null);
    assert.deepEqual(withMerge.after, { seconds: 280, usd: 0.03 });
    // 3600 s × 1.2 + 280 s at $0.36/h.
    assert.equal(withMerge.expected?.highUsd, Math.round(((4320 + 280) * 0.36) / 36) / 100);
    assert.ok((withMerge.expected?.highUsd ?? 0) > (without.expected?.highUsd ?? 0));
    assert.ok(
      quoteLines(withMerge).some((l) =>
        /^Merge: about 5 min after training, about \$0\.03/.test(l),
      ),
    );
  });
});

describe('the merge estimate', () => {
  it('reads the size from the name: 40 s a billion, 2 min at least, 8 B when unknown', () => {
    assert.equal(billionsFromName('Qwen/Qwen2.5-0.5B-Instruct'), 0.5);
    assert.equal(billionsFromName('meta-llama/Llama-3.1-70b'), 70);
    assert.equal(billionsFromName('mistralai/Mixtral-8x7B-v0.1'), 56);
    assert.equal(billionsFromName('HuggingFaceTB/SmolLM2-360M'), 0.36);
    assert.equal(billionsFromName('gpt2'), null);
    assert.equal(mergeEstimateS('Qwen/Qwen2.5-0.5B-Instruct'), 120);
    assert.equal(mergeEstimateS('meta-llama/Llama-3.1-70b'), 2800);
    assert.equal(mergeEstimateS(null), 320);
  });
});
