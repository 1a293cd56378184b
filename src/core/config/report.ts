/**
 * The checking half of the config parser: where each error is placed (file, line and column, or
 * the environment variable that set the value), the short descriptions and "did you mean" that
 * messages use, and {@link checkFields}, which checks one table against its field schemas and
 * returns the valid values typed by those schemas.
 */
import type { z } from 'zod';
import type { ConfigError } from './types';
import type { TomlPositions } from './tomlPositions';

export type Path = readonly (string | number)[];
export type Table = Record<string, unknown>;

export interface Field<S extends z.ZodType = z.ZodType> {
  schema: S;
  /** What the value must be: "must be a whole number of at least 20". */
  rule: string;
  /** A sentence saying what to write. */
  hint: string;
  /** For required keys: what to add when the key is missing. */
  example?: string;
  required?: boolean;
}

/** A custom problem a schema found, with its own words. */
export interface Problem {
  path: Path;
  message: string;
  hint: string;
}

// ---------------------------------------------------------------------------

/** Collects errors, each placed in the file (or at the env variable that set the value). */
export class Reporter {
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
export function dotted(path: Path): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number' || /^\d+$/.test(segment)) text += `[${segment}]`;
    else text += text === '' ? segment : `.${segment}`;
  }
  return text;
}

/** A short description of a value for messages (never long, never a whole table). */
export function describe(value: unknown): string {
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

export function isTable(value: unknown): value is Table {
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

export function closest(key: string, candidates: readonly string[]): string | null {
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

/** The values {@link checkFields} found valid, each typed by its field's schema. */
export type Valid<F extends Record<string, Field>> = {
  [K in keyof F]?: z.output<F[K]['schema']>;
};

/**
 * Checks each key of `table` against `fields`: unknown keys are reported (with
 * `unknownHint` or a "did you mean"), each known value is checked by its schema,
 * missing required keys are reported at the table. Returns the valid values.
 */
export function checkFields<F extends Record<string, Field>>(
  report: Reporter,
  table: Table,
  at: Path,
  fields: F,
  unknownHint: (key: string, value: unknown) => { message: string; hint: string } | null,
): Valid<F> {
  const valid: Record<string, unknown> = Object.create(null);
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
      valid[key] = result.data;
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
  return valid as Valid<F>;
}
