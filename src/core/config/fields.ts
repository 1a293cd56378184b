/**
 * The keys of overbrainer.toml, section by section: each with its zod schema (the edge where
 * values are checked), the rule a wrong value breaks and a sentence saying what to write.
 */
import { z } from 'zod';
import { BUDGET_FIELDS } from './budget';
import { aboveZero, toNumber, wholeAtLeast } from './schemas';
import { SWEEP_FIELDS } from './sweep';
import { TRAINING_JOB_FIELDS, TRAINING_MODEL_FIELDS } from './trainingFields';
import { describe, type Field, type Problem } from './report';
import {
  DEFAULT_RUNPOD_IMAGE,
  DEFAULT_RUNPOD_VENV,
  MAX_CLUSTER_NODES,
  TARGET_NAME,
  type ListOrAuto,
} from './types';

// Value schemas (zod at the edge). A field's own message and hint say what is
// wrong and what to write; zod's default texts never reach the user.

const SAFE_IMAGE = /^[A-Za-z0-9][A-Za-z0-9._\-/:@+]*$/;
const SAFE_ABSOLUTE = /^\/[A-Za-z0-9._\-/+@=,]*$/;
const SAFE_ID = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

/**
 * A list of strings, or (with `auto`) the exact word "auto". `["auto"]` is a
 * list and refused: a GPU type named "auto" would never be placed.
 */
function listSchema(
  key: string,
  options: { auto: boolean; nonEmpty: boolean; item: RegExp; itemRule: string; example: string },
): z.ZodType<ListOrAuto> {
  // Every value is let in, then refined: the refinement's own messages and hints are the errors.
  return z.custom<ListOrAuto>().superRefine((value, ctx) => {
    const add = (problem: Problem): void => {
      ctx.addIssue({
        code: 'custom',
        path: [...problem.path],
        message: problem.message,
        params: { hint: problem.hint },
      });
    };
    if (typeof value === 'string') {
      if (options.auto && value === 'auto') return;
      add({
        path: [],
        message: options.auto
          ? `${key} must be a list of strings or exactly "auto", not ${describe(value)}`
          : `${key} must be a list of strings, not ${describe(value)}`,
        hint:
          options.auto && value.trim().toLowerCase() === 'auto'
            ? `Write ${key} = "auto" (lower case, no spaces).`
            : `Write a list: ${key} = [${JSON.stringify(value)}].`,
      });
      return;
    }
    if (!Array.isArray(value)) {
      add({
        path: [],
        message: `${key} must be a list of strings${options.auto ? ' or "auto"' : ''}, not ${describe(value)}`,
        hint: `Write ${options.example}.`,
      });
      return;
    }
    if (options.nonEmpty && value.length === 0) {
      add({
        path: [],
        message: `${key} must not be empty`,
        hint: `Write ${options.example}.`,
      });
      return;
    }
    value.forEach((item, index) => {
      if (options.auto && item === 'auto') {
        add({
          path: [index],
          message: `["auto"] is a list holding a type named "auto", not the choice "auto"`,
          hint: `Write ${key} = "auto" without brackets, or list real IDs.`,
        });
      } else if (typeof item !== 'string' || !options.item.test(item)) {
        add({
          path: [index],
          message: `${key} item ${index + 1} ${options.itemRule}, not ${describe(item)}`,
          hint: `Write ${options.example}.`,
        });
      }
    });
  });
}

/**
 * A path relative to the workspace or run directory, `/`-separated, that stays
 * inside it: no absolute path, no `..` above the start, no backslash.
 */
export function relativePathProblem(value: string): string | null {
  if (value.trim() === '') return 'is empty';
  if (value.includes('\\')) return 'holds a backslash';
  if ([...value].some((c) => c.charCodeAt(0) < 0x20)) return 'holds a control character';
  if (value.startsWith('/') || /^[A-Za-z]:/.test(value) || value.startsWith('~'))
    return 'is absolute';
  let depth = 0;
  for (const part of value.split('/')) {
    if (part === '..') depth--;
    else if (part !== '.' && part !== '') depth++;
    if (depth < 0) return 'leaves the workspace';
  }
  if (depth === 0) return 'names the workspace itself';
  return null;
}

function pathListSchema(
  key: string,
  example: string,
  nonEmpty: boolean,
  within: string,
): z.ZodType<string[]> {
  return z.custom<string[]>().superRefine((value, ctx) => {
    if (!Array.isArray(value)) {
      ctx.addIssue({
        code: 'custom',
        message: `${key} must be a list of paths, not ${describe(value)}`,
        params: { hint: `Write ${example}.` },
      });
      return;
    }
    if (nonEmpty && value.length === 0) {
      ctx.addIssue({
        code: 'custom',
        message: `${key} must not be empty`,
        params: { hint: `Write ${example}.` },
      });
      return;
    }
    value.forEach((item, index) => {
      const problem =
        typeof item === 'string' ? relativePathProblem(item) : `is ${describe(item)}, not a path`;
      if (problem !== null) {
        ctx.addIssue({
          code: 'custom',
          path: [index],
          message: `${key} item ${index + 1} ${problem}`,
          params: {
            hint: `Give a path relative to ${within} that stays inside it, with / between folders, e.g. ${example}.`,
          },
        });
      }
    });
  });
}

export const PROJECT_FIELDS = {
  name: {
    schema: z.string().trim().min(1).max(200),
    rule: 'must be a non-empty string',
    hint: 'Write name = "my-model": run IDs start with it.',
  },
} satisfies Record<string, Field>;

export const TRAINING_FIELDS = {
  target: {
    schema: z.string().regex(TARGET_NAME),
    rule: 'must name a target (lower-case letters, digits and _)',
    hint: 'Write target = "pod", naming a [targets.pod] table.',
  },
  trainer: {
    schema: z.enum(['axolotl', 'command']),
    rule: 'must be "axolotl" or "command"',
    hint: 'Write trainer = "axolotl" with config = "axolotl.yaml", or trainer = "command" with command = "python train.py".',
    example:
      'trainer = "axolotl" with config = "axolotl.yaml", or trainer = "command" with command = "python train.py"',
    required: true,
  },
  config: {
    schema: z
      .string()
      .refine((value) => relativePathProblem(value) === null)
      .refine((value) => /\.ya?ml$/i.test(value)),
    rule: 'must be the path of a .yaml file inside the workspace',
    hint: 'Write config = "axolotl.yaml", relative to the workspace, with / between folders.',
  },
  command: {
    schema: z.string().trim().min(1).max(10_000),
    rule: 'must be a non-empty shell command',
    hint: 'Write command = "python train.py": it runs with sh -c in the run directory.',
  },
  upload: {
    schema: pathListSchema('upload', 'upload = ["train.py", "data/"]', false, 'the workspace'),
    rule: '',
    hint: '',
  },
  artifacts: {
    schema: pathListSchema(
      'artifacts',
      'artifacts = ["output/", "metrics.jsonl", "job.log"]',
      true,
      'the run directory',
    ),
    rule: '',
    hint: '',
  },
} satisfies Record<string, Field>;

export const RUNPOD_FIELDS = {
  kind: { schema: z.literal('runpod'), rule: '', hint: '', required: true },
  gpu_types: {
    schema: listSchema('gpu_types', {
      auto: true,
      nonEmpty: true,
      item: /^[\x20-\x7e]{1,100}$/,
      itemRule: 'must be a Runpod GPU type ID',
      example: 'gpu_types = ["NVIDIA A40", "NVIDIA L40S"] or gpu_types = "auto"',
    }),
    rule: '',
    hint: '',
    example: 'gpu_types = ["NVIDIA A40", "NVIDIA L40S"] (tried in order) or gpu_types = "auto"',
    required: true,
  },
  min_vram_gb: {
    schema: wholeAtLeast(1),
    rule: 'must be a whole number of GB, at least 1',
    hint: 'Write min_vram_gb = 48 (GB of VRAM per GPU).',
  },
  max_price_per_hour: {
    schema: aboveZero(),
    rule: 'must be a number of USD greater than 0',
    hint: 'Write max_price_per_hour = 1.0 (USD per hour for one GPU).',
  },
  gpu_count: {
    schema: wholeAtLeast(1),
    rule: 'must be a whole number, at least 1',
    hint: 'Write gpu_count = 1, or leave it out for 1.',
  },
  nodes: {
    schema: z.preprocess(toNumber, z.number().int().min(1).max(MAX_CLUSTER_NODES)),
    rule: `must be a whole number from 1 (one pod) to ${MAX_CLUSTER_NODES} (Runpod's Instant Clusters take 2 to ${MAX_CLUSTER_NODES} nodes)`,
    hint: 'Write nodes = 2 for a run on a 2-node cluster launched by torchrun, or leave it out for one pod.',
  },
  image: {
    schema: z.string().max(512).regex(SAFE_IMAGE),
    rule: 'must be a container image reference (letters, digits and ._-/:@+ only)',
    hint: `Write image = "${DEFAULT_RUNPOD_IMAGE.split('@')[0]}…", or leave it out for the pinned Axolotl image.`,
  },
  venv: {
    schema: z.string().max(512).regex(SAFE_ABSOLUTE),
    rule: 'must be an absolute path on the pod (letters, digits and ._-/+@=, only)',
    hint: `Write venv = "${DEFAULT_RUNPOD_VENV}", or leave it out for that default.`,
  },
  container_disk_gb: {
    schema: wholeAtLeast(20),
    rule: 'must be a whole number of GB, at least 20',
    hint: 'Write container_disk_gb = 50, or leave it out for 50 GB.',
  },
  max_hours: {
    schema: aboveZero(720),
    rule: 'must be a number of hours greater than 0 and at most 720',
    hint: "Write max_hours = 6: the pod's watchdog deletes the pod that long after it was created.",
    example:
      "max_hours = 6 (the pod's watchdog deletes the pod that many hours after it was created)",
    required: true,
  },
  max_cost_usd: {
    schema: aboveZero(),
    rule: 'must be a number of USD greater than 0',
    hint: 'Write max_cost_usd = 20, or leave it out for no cost cap.',
  },
  max_recoveries: {
    schema: wholeAtLeast(0),
    rule: 'must be a whole number, 0 or more',
    hint: 'Write max_recoveries = 2 (0 turns automatic recovery on a new pod off), or leave it out for 2.',
  },
  boot_grace_minutes: {
    schema: wholeAtLeast(5),
    rule: 'must be a whole number of minutes, at least 5',
    hint: 'Write boot_grace_minutes = 30, or leave it out for 30 minutes.',
  },
  retrieve_grace_minutes: {
    schema: wholeAtLeast(1),
    rule: 'must be a whole number of minutes, at least 1',
    hint: 'Write retrieve_grace_minutes = 60, or leave it out for 60 minutes.',
  },
  max_retrieve_gb: {
    schema: aboveZero(),
    rule: 'must be a number of GB greater than 0',
    hint: 'Write max_retrieve_gb = 200 (GB of results one retrieval may bring home), or leave it out for 200.',
  },
  data_center_ids: {
    schema: listSchema('data_center_ids', {
      auto: true,
      nonEmpty: false,
      item: SAFE_ID,
      itemRule: 'must be a Runpod data center ID such as EU-RO-1',
      example: 'data_center_ids = ["EU-RO-1"] or data_center_ids = "auto"',
    }),
    rule: '',
    hint: '',
  },
  network_volume_id: {
    schema: z.string().max(100).regex(SAFE_ID),
    rule: 'must be a Runpod network volume ID (letters, digits, _ and -)',
    hint: 'Write network_volume_id = "abc123xyz" as Runpod shows it, or leave it out.',
  },
  max_volume_gb: {
    schema: wholeAtLeast(1),
    rule: 'must be a whole number of GB, at least 1',
    hint: 'Write max_volume_gb = 200, or leave it out to never grow the volume.',
  },
  ssh_client: {
    schema: z.enum(['openssh', 'builtin']),
    rule: 'must be "openssh" or "builtin"',
    hint: 'Write ssh_client = "openssh", or leave it out.',
  },
} satisfies Record<string, Field>;

export const LOCAL_FIELDS = {
  kind: { schema: z.literal('local'), rule: '', hint: '', required: true },
  runtime: {
    schema: z.literal('native'),
    rule: 'must be "native" (jobs of a local target run on this machine, not in a container)',
    hint: 'Remove runtime, or write runtime = "native".',
  },
  venv: {
    schema: z
      .string()
      .max(1024)
      .regex(/^\/[^\0\n\r"'`$\\]*$/),
    rule: 'must be an absolute path without quotes, $, backslashes or line breaks',
    hint: 'Write venv = "/home/me/axolotl-venv", or leave it out to use PATH as it is.',
  },
} satisfies Record<string, Field>;

/** `kind = "ssh"`: the user's own GPU machine (its `host` is read from the environment only). */
export const SSH_FIELDS = {
  kind: { schema: z.literal('ssh'), rule: '', hint: '', required: true },
  host: {
    schema: z.string().max(300),
    rule: 'must be user@host or user@host:port',
    hint: 'Set it as OVERBRAINER_TARGETS__<NAME>__HOST=user@host[:port].',
  },
  workdir: {
    schema: z
      .string()
      .min(1)
      .max(1024)
      .regex(/^[A-Za-z0-9_./~+-][^\0\n\r"'`$\\]*$/),
    rule: 'must be a path on the machine (relative to its home, or absolute) without quotes, $, backslashes or line breaks',
    hint: 'Write workdir = "overbrainer" (under the home of the SSH user), or leave it out.',
  },
  ssh_client: RUNPOD_FIELDS.ssh_client,
  venv: LOCAL_FIELDS.venv,
} satisfies Record<string, Field>;

export const TOP_LEVEL = ['project', 'training', 'targets', 'budget', 'sweep'];

/** Every key the parser knows, per section (the template test checks the template against it). */
export const KNOWN_KEYS = {
  project: Object.keys(PROJECT_FIELDS),
  training: [
    ...Object.keys(TRAINING_FIELDS),
    ...Object.keys(TRAINING_MODEL_FIELDS),
    ...Object.keys(TRAINING_JOB_FIELDS),
  ],
  runpod: Object.keys(RUNPOD_FIELDS),
  local: Object.keys(LOCAL_FIELDS),
  /** `host` is the environment's only (OVERBRAINER_TARGETS__<NAME>__HOST), never a file key. */
  ssh: Object.keys(SSH_FIELDS).filter((key) => key !== 'host'),
  budget: Object.keys(BUDGET_FIELDS),
  /** `[sweep]` without `params`, which is its own section, `[sweep.params]`. */
  sweep: Object.keys(SWEEP_FIELDS).filter((key) => key !== 'params'),
} as const;
