/**
 * `overbrainer.toml` → {@link OverbrainerConfig}: smol-toml parses, the
 * `OVERBRAINER_*` environment overrides, zod checks each value, and every
 * problem found is reported at once, each with its file, line and column and
 * a sentence saying what to write instead. Unknown keys are refused (a typo
 * must not silently fall back to a default that keeps a pod billing longer).
 */
import { parse as parseToml, TomlError } from 'smol-toml';
import { z } from 'zod';
import { ENV_API_KEY, ENV_BASE_URL, ENV_SSH_CLIENT, envOverrides, type Env } from './env';
import { TomlPositions } from './tomlPositions';
import {
  DEFAULT_ARTIFACTS,
  DEFAULT_RUNPOD_IMAGE,
  DEFAULT_RUNPOD_VENV,
  TARGET_NAME,
  type ConfigError,
  type ConfigResult,
  type ListOrAuto,
  type LocalTargetConfig,
  type OverbrainerConfig,
  type RunpodTargetConfig,
  type TargetConfig,
  type TrainerConfig,
  type TrainingConfig,
} from './types';

export interface ParseOptions {
  /** The file name errors carry (the path of overbrainer.toml). */
  file: string;
  /** Environment overrides; none when omitted. */
  env?: Env;
  /** The workspace folder's name: the project name when `[project] name` is unset. */
  workspaceName: string;
}

type Path = readonly (string | number)[];
type Table = Record<string, unknown>;

// ---------------------------------------------------------------------------
// Value schemas (zod at the edge). A field's own message and hint say what is
// wrong and what to write; zod's default texts never reach the user.

const NUMERIC = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
/** Numeric fields take numbers or numeric strings (env values always arrive as strings). */
const toNumber = (value: unknown): unknown =>
  typeof value === 'string' && NUMERIC.test(value.trim()) ? Number(value.trim()) : value;
const MAX_INT = 2 ** 31 - 1;
const wholeAtLeast = (min: number) =>
  z.preprocess(toNumber, z.number().int().min(min).max(MAX_INT));
const aboveZero = (max?: number) =>
  z.preprocess(toNumber, max === undefined ? z.number().gt(0) : z.number().gt(0).max(max));
const SAFE_IMAGE = /^[A-Za-z0-9][A-Za-z0-9._\-/:@+]*$/;
const SAFE_ABSOLUTE = /^\/[A-Za-z0-9._\-/+@=,]*$/;
const SAFE_ID = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

interface Field {
  schema: z.ZodType;
  /** What the value must be: "must be a whole number of at least 20". */
  rule: string;
  /** A sentence saying what to write. */
  hint: string;
  /** For required keys: what to add when the key is missing. */
  example?: string;
  required?: boolean;
}

/** A custom problem a schema found, with its own words. */
interface Problem {
  path: Path;
  message: string;
  hint: string;
}

/**
 * A list of strings, or (with `auto`) the exact word "auto". `["auto"]` is a
 * list and refused: a GPU type named "auto" would never be placed.
 */
function listSchema(
  key: string,
  options: { auto: boolean; nonEmpty: boolean; item: RegExp; itemRule: string; example: string },
): z.ZodType {
  return z.unknown().superRefine((value, ctx) => {
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
function relativePathProblem(value: string): string | null {
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
): z.ZodType {
  return z.unknown().superRefine((value, ctx) => {
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

const PROJECT_FIELDS: Record<string, Field> = {
  name: {
    schema: z.string().trim().min(1).max(200),
    rule: 'must be a non-empty string',
    hint: 'Write name = "my-model": run IDs start with it.',
  },
};

const TRAINING_FIELDS: Record<string, Field> = {
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
};

const RUNPOD_FIELDS: Record<string, Field> = {
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
};

const LOCAL_FIELDS: Record<string, Field> = {
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
};

/** Keys that belong to the original CLI or elsewhere, with what to do instead. */
const TRAINING_MOVED = [
  'base_model',
  'adapter',
  'epochs',
  'learning_rate',
  'lora_r',
  'lora_alpha',
  'lora_dropout',
  'sequence_len',
  'micro_batch_size',
  'gradient_accumulation_steps',
  'optimizer',
  'lr_scheduler',
  'sample_packing',
  'evals_per_epoch',
  'saves_per_epoch',
  'merge',
  'hub_model_id',
  'axolotl_extra',
];

const TOP_LEVEL = ['project', 'training', 'targets'];

// ---------------------------------------------------------------------------

/** Collects errors, each placed in the file (or at the env variable that set the value). */
class Reporter {
  readonly errors: ConfigError[] = [];

  constructor(
    readonly file: string,
    readonly positions: TomlPositions,
    /** Config paths set from the environment, by JSON path → variable name. */
    readonly origins: Map<string, string>,
  ) {}

  envVarOf(path: Path): string | undefined {
    for (let n = path.length; n > 0; n--) {
      const origin = this.origins.get(JSON.stringify(path.slice(0, n).map(String)));
      if (origin !== undefined) return origin;
    }
    return undefined;
  }

  /** An env variable that set something under `path`, when the file does not define `path` at all. */
  private envVarUnder(path: Path): string | undefined {
    const names = path.map(String);
    for (let n = names.length; n > 0; n--) {
      const prefix = names.slice(0, n);
      if (this.positions.key(prefix) || this.positions.table(prefix)) return undefined;
      const inner = JSON.stringify(prefix).slice(0, -1);
      for (const [id, envVar] of this.origins) if (id.startsWith(`${inner},`)) return envVar;
    }
    return undefined;
  }

  add(path: Path, message: string, hint: string, want: 'key' | 'value' = 'value'): void {
    const key = dotted(path);
    const envVar = this.envVarOf(path) ?? this.envVarUnder(path);
    if (envVar !== undefined) {
      this.errors.push({ file: `env:${envVar}`, line: 1, column: 1, key, message, hint, envVar });
      return;
    }
    const at = this.positions.locate(path.map(String), want);
    this.errors.push({ file: this.file, line: at.line, column: at.column, key, message, hint });
  }
}

/** `targets.pod.gpu_types[1]`. */
function dotted(path: Path): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number' || /^\d+$/.test(segment)) text += `[${segment}]`;
    else text += text === '' ? segment : `.${segment}`;
  }
  return text;
}

/** A short description of a value for messages (never long, never a whole table). */
function describe(value: unknown): string {
  if (typeof value === 'string') {
    const shown = value.length > 40 ? `${value.slice(0, 40)}…` : value;
    return JSON.stringify(shown);
  }
  if (typeof value === 'number') return Number.isNaN(value) ? 'nan' : String(value);
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return 'a list';
  if (value instanceof Date) return 'a date';
  if (value !== null && typeof value === 'object') {
    return value.constructor?.name === 'TomlDate' ? 'a date' : 'a table';
  }
  return String(value);
}

function isTable(value: unknown): value is Table {
  return (
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    !(value instanceof Date) &&
    value.constructor?.name !== 'TomlDate'
  );
}

/** Levenshtein distance, for "did you mean". */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0] ?? 0;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j] ?? 0;
      row[j] = Math.min(
        (row[j] ?? 0) + 1,
        (row[j - 1] ?? 0) + 1,
        previous + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
      previous = current;
    }
  }
  return row[b.length] ?? 0;
}

function closest(key: string, candidates: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = 3;
  for (const candidate of candidates) {
    const d = distance(key, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/**
 * Checks each key of `table` against `fields`: unknown keys are reported (with
 * `unknownHint` or a "did you mean"), each known value is checked by its schema,
 * missing required keys are reported at the table. Returns the valid values.
 */
function checkFields(
  report: Reporter,
  table: Table,
  at: Path,
  fields: Record<string, Field>,
  unknownHint: (key: string, value: unknown) => { message: string; hint: string } | null,
): Map<string, unknown> {
  const valid = new Map<string, unknown>();
  const known = Object.keys(fields);
  for (const [key, value] of Object.entries(table)) {
    const path = [...at, key];
    const field = Object.hasOwn(fields, key) ? fields[key] : undefined;
    if (!field) {
      const special = unknownHint(key, value);
      if (special) {
        report.add(path, special.message, special.hint, 'key');
      } else {
        const guess = closest(key, known);
        report.add(
          path,
          `${dotted(path)} is not a key overbrainer knows`,
          guess
            ? `Did you mean ${guess}? Otherwise remove it; the keys of [${dotted(at)}] are ${known.join(', ')}.`
            : `Remove it; the keys of [${dotted(at)}] are ${known.join(', ')}.`,
          'key',
        );
      }
      continue;
    }
    const result = field.schema.safeParse(value);
    if (result.success) {
      valid.set(key, result.data);
      continue;
    }
    const seen = new Set<string>();
    for (const issue of result.error.issues) {
      const issuePath = [...path, ...issue.path.map((p) => (typeof p === 'symbol' ? '' : p))];
      const id = JSON.stringify(issuePath);
      if (seen.has(id)) continue;
      seen.add(id);
      const params =
        issue.code === 'custom' ? (issue.params as { hint?: string } | undefined) : undefined;
      if (params?.hint !== undefined) {
        report.add(issuePath, issue.message, params.hint);
      } else {
        report.add(path, `${dotted(path)} ${field.rule}, not ${describe(value)}`, field.hint);
        break; // one error per scalar field
      }
    }
  }
  for (const [key, field] of Object.entries(fields)) {
    if (field.required && key !== 'kind' && !Object.hasOwn(table, key)) {
      report.add(
        [...at, key],
        `${dotted(at)} needs ${key}`,
        `Add ${field.example ?? `${key} = …`}.`,
        'key',
      );
    }
  }
  return valid;
}

function envOnlyProblem(key: string, envVar: string): { message: string; hint: string } {
  return {
    message: `${key} is read from the environment only, never from overbrainer.toml (a secret in a file ends up in git and backups)`,
    hint: `Remove it from the file and set ${envVar} instead${envVar === ENV_API_KEY ? ' (or run "Overbrainer: Set Runpod API Key")' : ''}.`,
  };
}

// ---------------------------------------------------------------------------

/**
 * Parses and validates `text` (the content of overbrainer.toml) with the
 * environment overrides of `options.env`. Collects every error, not just the
 * first.
 */
export function parseConfig(text: string, options: ParseOptions): ConfigResult {
  return parseConfigWithPositions(text, options).result;
}

/** {@link parseConfig}, also returning the reporter so callers can add errors at the same places. */
export function parseConfigWithPositions(
  text: string,
  options: ParseOptions,
): { result: ConfigResult; report: Reporter | null } {
  let document: Table;
  try {
    document = parseToml(text) as Table;
  } catch (error) {
    if (error instanceof TomlError) {
      // The first line only: the rest of smol-toml's message quotes the file.
      const what = (error.message.split('\n')[0] ?? '').replace(/^Invalid TOML document:\s*/, '');
      return {
        result: {
          ok: false,
          errors: [
            {
              file: options.file,
              line: error.line,
              column: error.column,
              key: '',
              message: `overbrainer.toml is not valid TOML: ${what}`,
              hint: 'Fix the syntax at this place (strings in "quotes", lists in [brackets], one key = value per line).',
            },
          ],
        },
        report: null,
      };
    }
    throw error;
  }

  const report = new Reporter(options.file, new TomlPositions(text), new Map());
  applyEnv(document, options.env ?? {}, report);

  for (const [key, value] of Object.entries(document)) {
    if (TOP_LEVEL.includes(key)) {
      if (!isTable(value)) {
        report.add(
          [key],
          `${key} must be a table, not ${describe(value)}`,
          `Write it as a [${key}] section.`,
          'key',
        );
        document[key] = undefined;
      }
      continue;
    }
    if (key === 'runpod' && isTable(value)) {
      for (const inner of Object.keys(value)) {
        const envVar =
          inner === 'api_key' ? ENV_API_KEY : inner === 'base_url' ? ENV_BASE_URL : null;
        const problem = envVar
          ? envOnlyProblem(`runpod.${inner}`, envVar)
          : {
              message: `runpod.${inner} is not a setting overbrainer knows`,
              hint: `Remove it; Runpod access is set with ${ENV_API_KEY} and ${ENV_BASE_URL} in the environment.`,
            };
        report.add(['runpod', inner], problem.message, problem.hint, 'key');
      }
      if (Object.keys(value).length === 0) {
        report.add(
          ['runpod'],
          'a [runpod] section is not read',
          `Remove it; set ${ENV_API_KEY} in the environment.`,
          'key',
        );
      }
      continue;
    }
    if (key === 'hf_token' || key === 'log') {
      const problem = envOnlyProblem(key, `OVERBRAINER_${key.toUpperCase()}`);
      report.add([key], problem.message, problem.hint, 'key');
      continue;
    }
    const guess = closest(key, TOP_LEVEL);
    report.add(
      [key],
      `${key} is not a section overbrainer knows`,
      guess
        ? `Did you mean [${guess}]? Otherwise remove it; the sections are [project], [training] and [targets.NAME].`
        : 'Remove it; the sections are [project], [training] and [targets.NAME].',
      'key',
    );
  }

  const projectName = checkProject(report, document.project, options.workspaceName);
  const targets = checkTargets(report, document.targets, options.env ?? {});
  const training = checkTraining(report, document.training, targets);

  if (report.errors.length > 0) {
    report.errors.sort((a, b) =>
      a.file === b.file ? a.line - b.line || a.column - b.column : a.file < b.file ? -1 : 1,
    );
    return { result: { ok: false, errors: report.errors }, report };
  }
  const config: OverbrainerConfig = {
    file: options.file,
    projectName,
    training,
    targets: targets.valid,
  };
  return { result: { ok: true, config }, report };
}

/** Layers the overrides of `env` over the document, remembering which paths they set. */
function applyEnv(document: Table, env: Env, report: Reporter): void {
  const { overrides, problems } = envOverrides(env);
  for (const problem of problems) {
    report.errors.push({
      file: `env:${problem.envVar}`,
      line: 1,
      column: 1,
      key: problem.key,
      message: problem.message,
      hint: problem.hint,
      envVar: problem.envVar,
    });
  }
  for (const override of overrides) {
    let table: Table = document;
    let blocked: string | null = null;
    for (let i = 0; i < override.path.length - 1; i++) {
      const segment = override.path[i] ?? '';
      const next: unknown = table[segment];
      if (next === undefined) {
        const created: Table = Object.create(null) as Table;
        table[segment] = created;
        table = created;
      } else if (isTable(next)) {
        table = next;
      } else {
        blocked = dotted(override.path.slice(0, i + 1));
        break;
      }
    }
    if (blocked !== null) {
      report.errors.push({
        file: `env:${override.envVar}`,
        line: 1,
        column: 1,
        key: dotted(override.path),
        envVar: override.envVar,
        message: `${override.envVar} sets a key inside ${blocked}, which is not a table`,
        hint: `Fix ${blocked} in overbrainer.toml, or unset ${override.envVar}.`,
      });
      continue;
    }
    table[override.path[override.path.length - 1] ?? ''] = override.value;
    report.origins.set(JSON.stringify(override.path), override.envVar);
  }
}

function checkProject(report: Reporter, raw: unknown, workspaceName: string): string {
  if (!isTable(raw)) return workspaceName;
  const valid = checkFields(report, raw, ['project'], PROJECT_FIELDS, () => null);
  const name = valid.get('name');
  return typeof name === 'string' ? name : workspaceName;
}

function checkTraining(
  report: Reporter,
  raw: unknown,
  targets: { valid: Record<string, TargetConfig>; names: Set<string> },
): TrainingConfig | null {
  if (raw === undefined) return null;
  if (!isTable(raw)) return null;
  const valid = checkFields(report, raw, ['training'], TRAINING_FIELDS, (key) =>
    TRAINING_MOVED.includes(key)
      ? {
          message: `training.${key} is not read: Overbrainer runs your own Axolotl YAML`,
          hint: `Set ${key} in the YAML that training.config names, and remove it here.`,
        }
      : null,
  );
  const trainerKind = valid.get('trainer') as 'axolotl' | 'command' | undefined;
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
    const configPath = valid.get('config');
    if (typeof configPath === 'string') {
      trainer = { kind: 'axolotl', configPath: normalizeRelative(configPath) };
    } else if (!Object.hasOwn(raw, 'config')) {
      report.add(
        ['training', 'trainer'],
        'trainer = "axolotl" needs config, the path of the Axolotl YAML',
        'Add config = "axolotl.yaml" to [training].',
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
    const command = valid.get('command');
    if (typeof command === 'string') {
      trainer = { kind: 'command', command };
    } else if (!Object.hasOwn(raw, 'command')) {
      report.add(
        ['training', 'trainer'],
        'trainer = "command" needs command, the shell command that trains',
        'Add command = "python train.py" to [training]; it runs in the run directory.',
      );
    }
  }
  const target = valid.get('target');
  if (typeof target === 'string' && !targets.names.has(target)) {
    const names = [...targets.names];
    report.add(
      ['training', 'target'],
      `training.target names "${target}", but there is no [targets.${target}]`,
      names.length > 0
        ? `Write target = "${names[0]}"${names.length > 1 ? ` (or one of ${names.join(', ')})` : ''}, or add a [targets.${target}] table.`
        : `Add a [targets.${target}] table with kind = "runpod" or kind = "local".`,
    );
  }
  if (trainer === null) return null;
  const upload = (valid.get('upload') as string[] | undefined) ?? [];
  const artifacts = (valid.get('artifacts') as string[] | undefined) ?? [...DEFAULT_ARTIFACTS];
  return {
    target: typeof target === 'string' ? target : null,
    trainer,
    upload: upload.map(normalizeRelative),
    artifacts: artifacts.map(normalizeArtifact),
  };
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

function checkTargets(
  report: Reporter,
  raw: unknown,
  env: Env,
): { valid: Record<string, TargetConfig>; names: Set<string> } {
  const valid = Object.create(null) as Record<string, TargetConfig>;
  const names = new Set<string>();
  if (!isTable(raw)) return { valid, names };
  const sshClientEnv = env[ENV_SSH_CLIENT]?.trim();
  if (sshClientEnv && sshClientEnv !== 'openssh' && sshClientEnv !== 'builtin') {
    report.errors.push({
      file: `env:${ENV_SSH_CLIENT}`,
      line: 1,
      column: 1,
      key: 'ssh_client',
      envVar: ENV_SSH_CLIENT,
      message: `${ENV_SSH_CLIENT} must be "openssh" or "builtin"`,
      hint: `Set ${ENV_SSH_CLIENT}=openssh, or unset it.`,
    });
  }
  for (const [name, table] of Object.entries(raw)) {
    const path = ['targets', name];
    // `__proto__` and friends pass the name pattern but must never become keys of a plain object.
    if (
      !TARGET_NAME.test(name) ||
      name === '__proto__' ||
      name === 'constructor' ||
      name === 'prototype'
    ) {
      const suggestion =
        name
          .toLowerCase()
          .replace(/[^a-z0-9_]+/g, '_')
          .replace(/^_+|_+$/g, '') || 'pod';
      report.add(
        path,
        `target name "${name.slice(0, 40)}" is not allowed: use lower-case letters, digits and _`,
        `Rename it, e.g. [targets.${suggestion === 'constructor' || suggestion === 'prototype' ? `${suggestion}_1` : suggestion}].`,
        'key',
      );
      continue;
    }
    names.add(name);
    if (!isTable(table)) {
      report.add(
        path,
        `targets.${name} must be a table, not ${describe(table)}`,
        `Write it as a [targets.${name}] section with kind = "runpod" or "local".`,
        'key',
      );
      continue;
    }
    const kind = table.kind;
    if (kind === 'runpod') {
      const target = checkRunpod(report, table, name, sshClientEnv);
      if (target) valid[name] = target;
    } else if (kind === 'local') {
      const target = checkLocal(report, table, name);
      if (target) valid[name] = target;
    } else if (kind === undefined) {
      report.add(
        path,
        `targets.${name} needs kind`,
        'Add kind = "runpod" (a GPU pod per run) or kind = "local" (this machine).',
        'key',
      );
    } else if (kind === 'ssh') {
      report.add(
        [...path, 'kind'],
        'kind = "ssh" targets are not supported by Overbrainer for VS Code',
        'Write kind = "runpod" for a GPU pod per run, or kind = "local" for this machine.',
      );
    } else {
      report.add(
        [...path, 'kind'],
        `targets.${name}.kind must be "runpod" or "local", not ${describe(kind)}`,
        'Write kind = "runpod" for a GPU pod per run, or kind = "local" for this machine.',
      );
    }
  }
  return { valid, names };
}

function checkRunpod(
  report: Reporter,
  table: Table,
  name: string,
  sshClientEnv: string | undefined,
): RunpodTargetConfig | null {
  const at = ['targets', name];
  const before = report.errors.length;
  const valid = checkFields(report, table, at, RUNPOD_FIELDS, (key, value) => {
    if (key === 'gpu_type') {
      const list = typeof value === 'string' ? `[${JSON.stringify(value)}]` : '["NVIDIA A40"]';
      return {
        message: 'gpu_type is the old single-type key',
        hint: `Did you mean gpu_types = ${list}? It is a list tried in order (or "auto").`,
      };
    }
    if (key === 'host')
      return envOnlyProblem(
        `targets.${name}.host`,
        `OVERBRAINER_TARGETS__${name.toUpperCase()}__HOST`,
      );
    return null;
  });
  const gpuTypes = valid.get('gpu_types') as ListOrAuto | undefined;
  const dataCenterIds = (valid.get('data_center_ids') as ListOrAuto | undefined) ?? [];
  const volume = valid.get('network_volume_id') as string | undefined;
  if (gpuTypes !== undefined && gpuTypes !== 'auto') {
    for (const key of ['min_vram_gb', 'max_price_per_hour']) {
      if (valid.has(key)) {
        report.add(
          [...at, key],
          `${key} only applies to gpu_types = "auto"`,
          `Remove ${key}, or write gpu_types = "auto" to pick GPU types from the catalog by it.`,
          'key',
        );
      }
    }
  }
  if (volume !== undefined) {
    if (dataCenterIds === 'auto') {
      report.add(
        [...at, 'data_center_ids'],
        'data_center_ids = "auto" cannot go with a network volume: the pod must be in the volume\'s data center',
        'Write data_center_ids = ["<the volume\'s data center>"], e.g. ["EU-RO-1"].',
      );
    } else if (dataCenterIds.length !== 1) {
      report.add(
        [...at, 'network_volume_id'],
        `network_volume_id needs exactly one data_center_ids entry, the volume's data center (there ${dataCenterIds.length === 0 ? 'is none' : `are ${dataCenterIds.length}`})`,
        'Write data_center_ids = ["EU-RO-1"] with the data center Runpod shows for the volume.',
        'key',
      );
    }
  } else if (valid.has('max_volume_gb')) {
    report.add(
      [...at, 'max_volume_gb'],
      'max_volume_gb only applies with network_volume_id',
      'Remove max_volume_gb, or add network_volume_id for the volume it may grow.',
      'key',
    );
  }
  if (report.errors.length > before || gpuTypes === undefined) return null;
  const maxHours = valid.get('max_hours') as number | undefined;
  if (maxHours === undefined) return null;
  const number = (key: string): number | null => (valid.get(key) as number | undefined) ?? null;
  const sshClient =
    sshClientEnv === 'openssh' || sshClientEnv === 'builtin'
      ? sshClientEnv
      : ((valid.get('ssh_client') as 'openssh' | 'builtin' | undefined) ?? 'openssh');
  return {
    kind: 'runpod',
    name,
    gpuTypes: gpuTypes === 'auto' ? 'auto' : Object.freeze([...gpuTypes]),
    minVramGb: number('min_vram_gb'),
    maxPricePerHourUsd: number('max_price_per_hour'),
    gpuCount: number('gpu_count') ?? 1,
    image: (valid.get('image') as string | undefined) ?? DEFAULT_RUNPOD_IMAGE,
    venv: (valid.get('venv') as string | undefined) ?? DEFAULT_RUNPOD_VENV,
    containerDiskGb: number('container_disk_gb') ?? 50,
    maxHours,
    maxCostUsd: number('max_cost_usd'),
    bootGraceS: (number('boot_grace_minutes') ?? 30) * 60,
    retrieveGraceS: (number('retrieve_grace_minutes') ?? 60) * 60,
    dataCenterIds: dataCenterIds === 'auto' ? 'auto' : Object.freeze([...dataCenterIds]),
    networkVolumeId: volume ?? null,
    maxVolumeGb: number('max_volume_gb'),
    sshClient,
  };
}

function checkLocal(report: Reporter, table: Table, name: string): LocalTargetConfig | null {
  const before = report.errors.length;
  const valid = checkFields(report, table, ['targets', name], LOCAL_FIELDS, (key) => {
    if (key === 'engine' || key === 'image') {
      return {
        message: `targets.${name}.${key} is not read: a local target runs its job on this machine, not in a container`,
        hint: `Remove ${key}.`,
      };
    }
    if (Object.hasOwn(RUNPOD_FIELDS, key)) {
      return {
        message: `targets.${name}.${key} only applies to kind = "runpod"`,
        hint: `Remove ${key}, or write kind = "runpod" for a GPU pod per run.`,
      };
    }
    return null;
  });
  if (report.errors.length > before) return null;
  return { kind: 'local', name, venv: (valid.get('venv') as string | undefined) ?? null };
}

/** Exported for the template test: every key the parser knows, per section. */
export const KNOWN_KEYS = {
  project: Object.keys(PROJECT_FIELDS),
  training: Object.keys(TRAINING_FIELDS),
  runpod: Object.keys(RUNPOD_FIELDS),
  local: Object.keys(LOCAL_FIELDS),
} as const;

export type { Reporter };
