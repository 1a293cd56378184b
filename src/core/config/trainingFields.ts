/**
 * The keys of `[training]` beyond the trainer's, as the overbrainer CLI has them: the model keys
 * the Axolotl config is generated from (with that CLI's defaults), `merge`, `hub_model_id` and
 * the names of the secrets the job gets.
 */
import { z } from 'zod';
import type { Field } from './report';
import { aboveZero, boolean, toNumber, wholeAtLeast } from './schemas';

/** The defaults of the model keys, those of the overbrainer CLI's `[training]`. */
export const TRAINING_DEFAULTS = {
  adapter: 'lora',
  epochs: 3,
  learning_rate: 2e-4,
  lora_r: 16,
  lora_alpha: 32,
  lora_dropout: 0.05,
  sequence_len: 4096,
  micro_batch_size: 2,
  gradient_accumulation_steps: 4,
  optimizer: 'adamw_torch_fused',
  lr_scheduler: 'cosine',
  sample_packing: true,
  evals_per_epoch: 4,
  saves_per_epoch: 1,
} as const;

/** A Hugging Face repository ID: `namespace/name`. */
export const HUB_REPO_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;
/** A secret's name: an environment variable the job reads. */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const WORD = /^[A-Za-z0-9_.-]{1,100}$/;

/** The keys the config is generated from: with `config` (the user's own YAML) they are refused. */
export const TRAINING_MODEL_FIELDS = {
  base_model: {
    schema: z
      .string()
      .trim()
      .min(1)
      .max(300)
      .regex(/^[\x21-\x7e]+$/),
    rule: 'must be a Hugging Face model ID or a path, without spaces',
    hint: 'Write base_model = "Qwen/Qwen2.5-0.5B-Instruct".',
  },
  adapter: {
    schema: z.enum(['lora', 'qlora', 'full']),
    rule: 'must be "lora", "qlora" or "full"',
    hint: 'Write adapter = "lora", or leave it out for lora.',
  },
  epochs: {
    schema: wholeAtLeast(1),
    rule: 'must be a whole number, at least 1',
    hint: 'Write epochs = 3, or leave it out for 3.',
  },
  learning_rate: {
    schema: aboveZero(1),
    rule: 'must be a number greater than 0 and at most 1',
    hint: 'Write learning_rate = 2e-4, or leave it out for 2e-4.',
  },
  lora_r: {
    schema: wholeAtLeast(1),
    rule: 'must be a whole number, at least 1',
    hint: 'Write lora_r = 16, or leave it out for 16.',
  },
  lora_alpha: {
    schema: wholeAtLeast(1),
    rule: 'must be a whole number, at least 1',
    hint: 'Write lora_alpha = 32, or leave it out for 32.',
  },
  lora_dropout: {
    schema: z.preprocess(toNumber, z.number().min(0).lt(1)),
    rule: 'must be a number from 0 up to (not including) 1',
    hint: 'Write lora_dropout = 0.05, or leave it out for 0.05.',
  },
  sequence_len: {
    schema: wholeAtLeast(16),
    rule: 'must be a whole number of tokens, at least 16',
    hint: 'Write sequence_len = 4096, or leave it out for 4096.',
  },
  micro_batch_size: {
    schema: wholeAtLeast(1),
    rule: 'must be a whole number, at least 1',
    hint: 'Write micro_batch_size = 2, or leave it out for 2.',
  },
  gradient_accumulation_steps: {
    schema: wholeAtLeast(1),
    rule: 'must be a whole number, at least 1',
    hint: 'Write gradient_accumulation_steps = 4, or leave it out for 4.',
  },
  optimizer: {
    schema: z.string().regex(WORD),
    rule: 'must be an optimizer name Axolotl knows (letters, digits, _ . -)',
    hint: 'Write optimizer = "adamw_torch_fused", or leave it out for that default.',
  },
  lr_scheduler: {
    schema: z.string().regex(WORD),
    rule: 'must be a scheduler name Axolotl knows (letters, digits, _ . -)',
    hint: 'Write lr_scheduler = "cosine", or leave it out for cosine.',
  },
  sample_packing: {
    schema: boolean(),
    rule: 'must be true or false',
    hint: 'Write sample_packing = true, or leave it out for true.',
  },
  evals_per_epoch: {
    schema: wholeAtLeast(0),
    rule: 'must be a whole number, 0 or more',
    hint: 'Write evals_per_epoch = 4 (0: no evaluation), or leave it out for 4.',
  },
  saves_per_epoch: {
    schema: wholeAtLeast(0),
    rule: 'must be a whole number, 0 or more',
    hint: 'Write saves_per_epoch = 1, or leave it out for 1.',
  },
  axolotl_extra: {
    schema: z.custom<Record<string, unknown>>(
      (value) =>
        value !== null &&
        typeof value === 'object' &&
        !Array.isArray(value) &&
        !(value instanceof Date) &&
        value.constructor?.name !== 'TomlDate',
    ),
    rule: 'must be a table of Axolotl settings',
    hint: 'Write [training.axolotl_extra] with Axolotl keys, e.g. warmup_ratio = 0.1.',
  },
} satisfies Record<string, Field>;

/** Keys that go with either kind of Axolotl config (and `merge` with a command too). */
export const TRAINING_JOB_FIELDS = {
  launcher: {
    schema: z.literal('torchrun'),
    rule: 'must be "torchrun" (PyTorch\'s launcher, started on every node of a cluster)',
    hint: 'Write launcher = "torchrun" with trainer = "command" (the command is then the script and its arguments), or leave it out.',
  },
  merge: {
    schema: boolean(),
    rule: 'must be true or false',
    hint: 'Write merge = true to merge the LoRA into the base model after training (output/merged/), or leave it out.',
  },
  hub_model_id: {
    schema: z.string().regex(HUB_REPO_ID),
    rule: 'must be a Hugging Face repository ID, namespace/name',
    hint: 'Write hub_model_id = "me/my-model" (your user or organisation, then the model\'s name).',
  },
  secrets: {
    schema: z.array(z.string().regex(SECRET_NAME)).max(50),
    rule: 'must be a list of environment variable names',
    hint: 'Write secrets = ["WANDB_API_KEY"]: each is read from your environment (or VS Code\'s secret storage) and given to the job.',
  },
} satisfies Record<string, Field>;
