/**
 * `[training]`: the trainer (`axolotl` with the user's own YAML or one generated from the
 * model keys, or a `command`), what is uploaded and what comes back, the LoRA
 * merge, the Hub push and the names of the job's secrets. Every problem at its place.
 */
import type { Env } from './env';
import { TRAINING_FIELDS } from './fields';
import { ENV_HF_ENDPOINT, hubEndpointOf } from './hubEndpoint';
import { checkFields, isTable, type Reporter } from './report';
import { TRAINING_DEFAULTS, TRAINING_JOB_FIELDS, TRAINING_MODEL_FIELDS } from './trainingFields';
import {
  DEFAULT_ARTIFACTS,
  type AxolotlModel,
  type TargetConfig,
  type TrainerConfig,
  type TrainingConfig,
} from './types';

const FIELDS = { ...TRAINING_FIELDS, ...TRAINING_MODEL_FIELDS, ...TRAINING_JOB_FIELDS };
const MODEL_KEYS = Object.keys(TRAINING_MODEL_FIELDS);

/** The environment variable the Hugging Face token is read from (env or `.env`; never the file). */
export const ENV_HF_TOKEN = 'OVERBRAINER_HF_TOKEN';
/** The name the token has in the job's environment (the one the Hugging Face libraries read). */
export const JOB_HF_TOKEN = 'HF_TOKEN';

/** `a, b and c`. */
function listed(keys: readonly string[]): string {
  return keys.length <= 1
    ? (keys[0] ?? '')
    : `${keys.slice(0, -1).join(', ')} and ${keys[keys.length - 1] ?? ''}`;
}

export function checkTraining(
  report: Reporter,
  raw: unknown,
  targets: { valid: Record<string, TargetConfig>; names: Set<string> },
  env: Env = {},
): TrainingConfig | null {
  if (raw === undefined) return null;
  if (!isTable(raw)) return null;
  const before = report.errors.length;
  const valid = checkFields(report, raw, ['training'], FIELDS, () => null);
  const modelKeys = MODEL_KEYS.filter((key) => Object.hasOwn(raw, key));
  const trainerKind = valid.trainer;
  let trainer: TrainerConfig | null = null;
  if (trainerKind === 'axolotl') {
    if (Object.hasOwn(raw, 'command')) {
      report.add(
        ['training', 'command'],
        'training.command only applies to trainer = "command"',
        'Remove command, or write trainer = "command" to run it instead of Axolotl.',
        'key',
      );
    }
    if (Object.hasOwn(raw, 'launcher')) {
      report.add(
        ['training', 'launcher'],
        'training.launcher only applies to trainer = "command": Axolotl\'s own multi-node launch is not supported yet',
        'Remove launcher, or write trainer = "command" with command = "train.py …" to start it with torchrun on every node.',
        'key',
      );
    }
    const configPath = valid.config;
    if (Object.hasOwn(raw, 'config') && modelKeys.length > 0) {
      const keys = listed(modelKeys);
      report.add(
        ['training', modelKeys[0] ?? 'config'],
        `training.config and ${keys} are both given: your own Axolotl YAML (config) wins, and ${keys} would be ignored`,
        `Remove ${keys} here and set ${modelKeys.length === 1 ? 'it' : 'them'} in your YAML, or remove config to have Overbrainer generate the Axolotl config from ${modelKeys.length === 1 ? 'it' : 'them'}.`,
        'key',
      );
    } else if (configPath !== undefined) {
      trainer = { kind: 'axolotl', configPath: normalizeRelative(configPath), model: null };
    } else if (Object.hasOwn(raw, 'config')) {
      // Its own error is already reported.
    } else if (!Object.hasOwn(raw, 'base_model')) {
      report.add(
        ['training', modelKeys.length > 0 ? (modelKeys[0] ?? 'trainer') : 'trainer'],
        modelKeys.length > 0
          ? 'the Axolotl config generated from [training] needs base_model, the model to fine-tune'
          : 'trainer = "axolotl" needs base_model (Overbrainer generates the Axolotl config) or config (your own Axolotl YAML)',
        'Add base_model = "Qwen/Qwen2.5-0.5B-Instruct" to [training], or config = "axolotl.yaml" to train with your own YAML.',
        modelKeys.length > 0 ? 'key' : 'value',
      );
    } else if (report.errors.length === before && valid.base_model !== undefined) {
      trainer = { kind: 'axolotl', configPath: null, model: modelOf(valid) };
    }
    if (valid.merge === true && (valid.adapter ?? TRAINING_DEFAULTS.adapter) === 'full') {
      report.add(
        ['training', 'merge'],
        'merge = true merges a LoRA into its base model, but adapter = "full" trains the whole model: there is nothing to merge',
        'Remove merge, or train an adapter with adapter = "lora" (or "qlora").',
        'key',
      );
    }
  } else if (trainerKind === 'command') {
    if (Object.hasOwn(raw, 'config')) {
      report.add(
        ['training', 'config'],
        'training.config only applies to trainer = "axolotl"',
        'Remove config, or write trainer = "axolotl" to train with that YAML.',
        'key',
      );
    }
    for (const key of [...modelKeys, ...(Object.hasOwn(raw, 'merge') ? ['merge'] : [])]) {
      report.add(
        ['training', key],
        `training.${key} only applies to trainer = "axolotl"`,
        `Remove ${key}, or write trainer = "axolotl" to have Overbrainer ${key === 'merge' ? "run Axolotl's LoRA merge" : 'generate the Axolotl config from it'}.`,
        'key',
      );
    }
    const command = valid.command;
    if (command !== undefined) {
      trainer = { kind: 'command', command, launcher: valid.launcher ?? null };
    } else if (!Object.hasOwn(raw, 'command')) {
      report.add(
        ['training', 'trainer'],
        'trainer = "command" needs command, the shell command that trains',
        'Add command = "python train.py" to [training]; it runs in the run directory.',
      );
    }
  }
  checkSecretNames(report, valid.secrets ?? []);
  const hubModelId = valid.hub_model_id ?? null;
  const endpoint = hubEndpointOf(env);
  if (hubModelId !== null && !endpoint.ok) {
    report.add(
      ['training', 'hub_model_id'],
      `hub_model_id pushes to the Hub at ${ENV_HF_ENDPOINT}, but ${endpoint.message}`,
      endpoint.hint,
      'key',
    );
  }
  const target = valid.target;
  if (target !== undefined && !targets.names.has(target)) {
    const names = [...targets.names];
    report.add(
      ['training', 'target'],
      `training.target names "${target}", but there is no [targets.${target}]`,
      names.length > 0
        ? `Write target = "${names[0]}"${names.length > 1 ? ` (or one of ${names.join(', ')})` : ''}, or add a [targets.${target}] table.`
        : `Add a [targets.${target}] table with kind = "runpod" or kind = "local".`,
    );
  }
  if (trainer === null || report.errors.length > before) return null;
  const upload = valid.upload ?? [];
  const artifacts = valid.artifacts ?? [...DEFAULT_ARTIFACTS];
  return {
    target: target ?? null,
    trainer,
    upload: upload.map(normalizeRelative),
    artifacts: artifacts.map(normalizeArtifact),
    merge: valid.merge ?? false,
    hubModelId,
    hubEndpoint: hubModelId !== null && endpoint.ok ? endpoint.url : null,
    secrets: Object.freeze([...new Set(valid.secrets ?? [])]),
  };
}

type Valid = ReturnType<typeof checkFields<typeof FIELDS>>;

function modelOf(valid: Valid): AxolotlModel {
  const d = TRAINING_DEFAULTS;
  return {
    baseModel: valid.base_model ?? '',
    adapter: valid.adapter ?? d.adapter,
    epochs: valid.epochs ?? d.epochs,
    learningRate: valid.learning_rate ?? d.learning_rate,
    loraR: valid.lora_r ?? d.lora_r,
    loraAlpha: valid.lora_alpha ?? d.lora_alpha,
    loraDropout: valid.lora_dropout ?? d.lora_dropout,
    sequenceLen: valid.sequence_len ?? d.sequence_len,
    microBatchSize: valid.micro_batch_size ?? d.micro_batch_size,
    gradientAccumulationSteps: valid.gradient_accumulation_steps ?? d.gradient_accumulation_steps,
    optimizer: valid.optimizer ?? d.optimizer,
    lrScheduler: valid.lr_scheduler ?? d.lr_scheduler,
    samplePacking: valid.sample_packing ?? d.sample_packing,
    evalsPerEpoch: valid.evals_per_epoch ?? d.evals_per_epoch,
    savesPerEpoch: valid.saves_per_epoch ?? d.saves_per_epoch,
    extra: valid.axolotl_extra ?? {},
  };
}

/** Names the job's environment cannot take from `secrets`. */
function checkSecretNames(report: Reporter, names: readonly string[]): void {
  names.forEach((name, index) => {
    if (name === JOB_HF_TOKEN || name === ENV_HF_TOKEN) {
      report.add(
        ['training', 'secrets', index],
        `secrets lists ${name}, but the Hugging Face token reaches the job as ${JOB_HF_TOKEN} by itself`,
        `Remove it from secrets and set ${ENV_HF_TOKEN} in your environment or .env (VS Code: "Overbrainer: Set Hugging Face Token").`,
      );
    } else if (name.startsWith('OVERBRAINER_') || name === 'PATH' || name === 'HOME') {
      report.add(
        ['training', 'secrets', index],
        `secrets lists ${name}, a variable Overbrainer or the job's shell sets itself`,
        'List only the secrets your job reads, e.g. secrets = ["WANDB_API_KEY"].',
      );
    }
  });
}

/** `./a//b/` → `a/b` (validated relative paths only). */
function normalizeRelative(value: string): string {
  const parts: string[] = [];
  for (const part of value.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return parts.join('/');
}

/** Like {@link normalizeRelative}, keeping the trailing `/` that marks a folder. */
function normalizeArtifact(value: string): string {
  const normalized = normalizeRelative(value);
  return value.endsWith('/') ? `${normalized}/` : normalized;
}
