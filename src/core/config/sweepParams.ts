/**
 * `[sweep.params]`: the search space, each parameter a range (`{ low, high, log, step }`, Optuna's
 * `suggest_int` when low, high and step are TOML integers, else `suggest_float`) or a list of
 * values (`suggest_categorical`). A table that is not a range groups parameters under a dotted
 * name (`lora.r = [8, 16]` is the parameter `lora.r`, a nested key of the trainer's YAML).
 */
import { closest, describe, dotted, isTable, type Path, type Reporter, type Table } from './report';

export type SweepChoice = string | number | boolean;

export type SweepParam =
  | { kind: 'float'; low: number; high: number; log: boolean; step: number | null }
  | { kind: 'int'; low: number; high: number; log: boolean; step: number }
  | { kind: 'choice'; choices: readonly SweepChoice[] };

/** One segment of a parameter's name: it becomes `{name}`, OVERBRAINER_PARAM_NAME and a YAML key. */
const PARAM_SEGMENT = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const RANGE_KEYS = ['low', 'high', 'log', 'step'];
const MAX_PARAMS = 64;
const MAX_CHOICES = 1000;
const EXAMPLE = 'learning_rate = { low = 1e-5, high = 1e-3, log = true } or lora_r = [8, 16, 32]';

/**
 * The environment variable a trial's job gets parameter `name` in: OVERBRAINER_PARAM_ and the name
 * uppercased, a dot (a nested key) written `__` (`lora.r` → OVERBRAINER_PARAM_LORA__R).
 */
export function paramEnvName(name: string): string {
  return `OVERBRAINER_PARAM_${name.toUpperCase().replaceAll('.', '__')}`;
}

/**
 * The parameters of `table` (read with TOML integers as bigint), by dotted name; null when any is
 * wrong (each problem reported at its place). `sampler` = "grid" needs every value listed.
 */
export function checkSweepParams(
  report: Reporter,
  table: Table,
  sampler: string,
): Record<string, SweepParam> | null {
  const before = report.errors.length;
  const params = Object.create(null) as Record<string, SweepParam>;
  walk(report, table, [], params);
  const names = Object.keys(params);
  const byEnv = new Map<string, string>();
  for (const name of names) {
    const env = paramEnvName(name);
    const other = byEnv.get(env);
    if (other !== undefined) {
      report.add(
        ['sweep', 'params', ...name.split('.')],
        `parameters ${other} and ${name} both reach the job as the environment variable ${env}`,
        `Rename one of them (names differing only in case, or in . against __, are one variable).`,
        'key',
      );
    }
    byEnv.set(env, name);
  }
  if (report.errors.length === before && names.length === 0) {
    report.add(
      ['sweep', 'params'],
      '[sweep.params] holds no parameter: the study would have nothing to search',
      `Add one, e.g. ${EXAMPLE}.`,
      'key',
    );
  }
  if (names.length > MAX_PARAMS) {
    report.add(
      ['sweep', 'params'],
      `[sweep.params] holds ${names.length} parameters, more than ${MAX_PARAMS}`,
      "Search fewer parameters at once: fix the others in the trainer's own config.",
      'key',
    );
  }
  if (sampler === 'grid') {
    for (const [name, param] of Object.entries(params)) {
      if (param.kind === 'float' && param.step === null) {
        report.add(
          ['sweep', 'params', ...name.split('.')],
          `sampler = "grid" tries every value, and ${name} is a range without a step`,
          `Give it a step (e.g. step = ${niceStep(param.low, param.high)}) or write its values as a list, or choose sampler = "tpe".`,
          'key',
        );
      }
    }
  }
  return report.errors.length > before ? null : params;
}

function walk(
  report: Reporter,
  table: Table,
  prefix: string[],
  out: Record<string, SweepParam>,
): void {
  for (const [key, value] of Object.entries(table)) {
    const names = [...prefix, key];
    const path: Path = ['sweep', 'params', ...names];
    const name = names.join('.');
    if (!PARAM_SEGMENT.test(key)) {
      report.add(
        path,
        `parameter name "${key.slice(0, 40)}" is not allowed: it becomes {${key.slice(0, 40)}} in a command and an environment variable`,
        `Rename it with letters, digits and _ only, starting with a letter or _ (e.g. ${key.replace(/[^A-Za-z0-9_]+/g, '_').replace(/^(\d)/, '_$1') || 'lr'}).`,
        'key',
      );
      continue;
    }
    if (Array.isArray(value)) {
      const param = checkChoices(report, path, name, value);
      if (param) out[name] = param;
    } else if (isTable(value) && RANGE_KEYS.some((k) => Object.hasOwn(value, k))) {
      const param = checkRange(report, path, name, value);
      if (param) out[name] = param;
    } else if (isTable(value) && Object.keys(value).length > 0 && names.length < 8) {
      walk(report, value, names, out);
    } else {
      report.add(
        path,
        `sweep.params.${name} must be a range { low, high } or a list of values, not ${describe(plain(value))}`,
        isScalar(value)
          ? `Write ${key} = [${JSON.stringify(plain(value))}] to try that one value, or a range: ${key} = { low = …, high = … }.`
          : `Write e.g. ${EXAMPLE}.`,
      );
    }
  }
}

function checkChoices(
  report: Reporter,
  path: Path,
  name: string,
  list: unknown[],
): SweepParam | null {
  if (list.length === 0) {
    report.add(
      path,
      `sweep.params.${name} is an empty list: there is nothing to try`,
      `List the values to try, e.g. ${name.split('.').pop() ?? name} = [8, 16, 32].`,
    );
    return null;
  }
  if (list.length > MAX_CHOICES) {
    report.add(
      path,
      `sweep.params.${name} lists ${list.length} values, more than ${MAX_CHOICES}`,
      'Write it as a range { low, high, step } instead.',
    );
    return null;
  }
  const choices: SweepChoice[] = [];
  const seen = new Set<string>();
  for (const [index, item] of list.entries()) {
    if (!isScalar(item)) {
      report.add(
        [...path, index],
        `sweep.params.${name} item ${index + 1} must be a string, a number or true/false, not ${describe(plain(item))}`,
        'Write each value as a plain string, number or boolean; a parameter holds one value per trial.',
      );
      return null;
    }
    const value = plain(item) as SweepChoice;
    const id = `${typeof value}:${String(value)}`;
    if (seen.has(id)) {
      report.add(
        [...path, index],
        `sweep.params.${name} lists ${describe(value)} twice`,
        'Remove the repeated value: each is tried once per draw.',
      );
      return null;
    }
    seen.add(id);
    choices.push(value);
  }
  return { kind: 'choice', choices };
}

function checkRange(report: Reporter, path: Path, name: string, table: Table): SweepParam | null {
  const before = report.errors.length;
  for (const key of Object.keys(table)) {
    if (RANGE_KEYS.includes(key)) continue;
    const guess = closest(key, RANGE_KEYS);
    report.add(
      [...path, key],
      `${dotted([...path, key])} is not a key of a range`,
      `${guess ? `Did you mean ${guess}? ` : ''}A range has low, high and optionally log = true or step.`,
      'key',
    );
  }
  const number = (key: string, required: boolean): number | bigint | null => {
    const value = table[key];
    if (value === undefined) {
      if (required)
        report.add(
          path,
          `sweep.params.${name} needs ${key}`,
          `Add ${key} = … to the range, e.g. { low = 1e-5, high = 1e-3 }.`,
          'key',
        );
      return null;
    }
    if (typeof value === 'bigint' || (typeof value === 'number' && Number.isFinite(value))) {
      if (
        typeof value === 'bigint' &&
        (value > BigInt(Number.MAX_SAFE_INTEGER) || value < -BigInt(Number.MAX_SAFE_INTEGER))
      ) {
        report.add(
          [...path, key],
          `sweep.params.${name}.${key} is too large`,
          'Write a number between -9007199254740991 and 9007199254740991.',
        );
        return null;
      }
      return value;
    }
    report.add(
      [...path, key],
      `sweep.params.${name}.${key} must be a number, not ${describe(plain(value))}`,
      `Write ${key} = 0.001 (a plain number, no quotes).`,
    );
    return null;
  };
  const low = number('low', true);
  const high = number('high', true);
  const step = number('step', false);
  const logValue = table.log;
  if (logValue !== undefined && typeof logValue !== 'boolean') {
    report.add(
      [...path, 'log'],
      `sweep.params.${name}.log must be true or false, not ${describe(plain(logValue))}`,
      'Write log = true to search the range on a log scale, or leave it out.',
    );
  }
  if (report.errors.length > before || low === null || high === null) return null;
  const log = logValue === true;
  const isInt =
    typeof low === 'bigint' &&
    typeof high === 'bigint' &&
    (step === null || typeof step === 'bigint');
  const [lo, hi] = [Number(low), Number(high)];
  if (!(lo < hi)) {
    report.add(
      [...path, 'low'],
      `sweep.params.${name}: low (${lo}) must be less than high (${hi})`,
      lo === hi
        ? `Write ${name.split('.').pop() ?? name} = [${lo}] to try the one value, or widen the range.`
        : 'Swap low and high.',
    );
    return null;
  }
  if (log && lo <= 0) {
    report.add(
      [...path, 'low'],
      `sweep.params.${name}: a log range needs low > 0, not ${lo}`,
      'Raise low above 0 (e.g. 1e-6), or remove log = true.',
    );
    return null;
  }
  if (step !== null) {
    const s = Number(step);
    if (!(s > 0)) {
      report.add(
        [...path, 'step'],
        `sweep.params.${name}.step must be greater than 0, not ${s}`,
        'Write a positive step, e.g. step = 0.1, or leave it out.',
      );
      return null;
    }
    if (s > hi - lo) {
      report.add(
        [...path, 'step'],
        `sweep.params.${name}.step (${s}) is wider than the range (${hi - lo})`,
        'Lower the step, or write the values as a list.',
      );
      return null;
    }
    if (log && !(isInt && s === 1)) {
      report.add(
        [...path, 'step'],
        `sweep.params.${name}: Optuna cannot take a step on a log range`,
        'Remove step to search the log range freely, or remove log = true to search in steps.',
      );
      return null;
    }
  }
  if (isInt) return { kind: 'int', low: lo, high: hi, log, step: step === null ? 1 : Number(step) };
  return { kind: 'float', low: lo, high: hi, log, step: step === null ? null : Number(step) };
}

function isScalar(value: unknown): boolean {
  return ['string', 'number', 'bigint', 'boolean'].includes(typeof value);
}

function plain(value: unknown): unknown {
  return typeof value === 'bigint' ? Number(value) : value;
}

function niceStep(low: number, high: number): number {
  const raw = (high - low) / 10;
  return Number(raw.toPrecision(1));
}
