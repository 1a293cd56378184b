/**
 * Reading a record file: JSON checked by a zod schema at the edge, errors
 * placed by line and column and never quoting the file. Unknown fields are
 * kept (see {@link splitExtra}): a record written by a newer version loses
 * nothing when an older one saves it again.
 */
import type { z } from 'zod';
import { RunsError } from './runsError';
import { jsonPathKey, lineColumn, scanJson } from './jsonPositions';

/** Fields a record file held that this version does not know, written back unchanged. */
export type ExtraFields = Readonly<Record<string, unknown>>;

/** Largest record file read: records are a few KiB; anything bigger is not one. */
export const RECORD_MAX_BYTES = 4 * 1024 * 1024;

function invalid(
  file: string,
  text: string,
  offset: number,
  what: string,
  label: string,
  hint?: string,
): RunsError {
  const { line, column } = lineColumn(text, offset);
  return new RunsError(
    'invalid',
    `${file} is not a valid ${label} (line ${line}, column ${column}): ${what}`,
    hint ??
      (label === 'pod record'
        ? 'Repair or restore the file: until then overbrainer cannot tell whether this run still has a pod; check "pod ls" or the Runpod console for pods named after the run.'
        : 'Repair or restore the file; until then the run is skipped.'),
    { path: file, line, column },
  );
}

/**
 * A {@link RunsError} `invalid` placed at the value at `path` of a record that parsed (a rule
 * the schema cannot say): `what` and `hint` say it, never quoting the file.
 */
export function invalidAt(
  text: string,
  file: string,
  path: readonly (string | number)[],
  what: string,
  label: string,
  hint: string,
): RunsError {
  const scan = scanJson(text);
  const offset = scan.ok ? (scan.valueAt.get(jsonPathKey([...path])) ?? 0) : 0;
  return invalid(file, text, offset, what, label, hint);
}

/** `text` as `schema` describes it, or a {@link RunsError} `invalid` with a place and no content. */
export function decodeRecord<T>(
  text: string,
  file: string,
  schema: z.ZodType<T>,
  label: string,
): T {
  // The fast path first (a view may read a thousand records): the positional scanner runs only
  // to place an error, and gives the same errors as scanning first would.
  let parsed: { value: unknown } | null;
  try {
    parsed = { value: JSON.parse(text) as unknown };
  } catch {
    parsed = null;
  }
  const result = parsed === null ? null : schema.safeParse(parsed.value);
  if (result?.success) return result.data;
  const scan = scanJson(text);
  if (!scan.ok) {
    const what = scan.eof ? 'it is not valid JSON (it ends early)' : 'it is not valid JSON';
    throw invalid(file, text, scan.errorAt, what, label);
  }
  if (result === null) throw invalid(file, text, 0, 'it is not valid JSON', label);
  const issue = result.error.issues[0];
  const path = (issue?.path ?? []).filter((p): p is string | number => typeof p !== 'symbol');
  // The issue's own place, or the nearest enclosing value that exists (a missing key).
  for (let n = path.length; n >= 0; n--) {
    const offset = scan.valueAt.get(jsonPathKey(path.slice(0, n)));
    if (offset === undefined) continue;
    const name = path.length === 0 ? 'the record' : `"${path.join('.')}"`;
    const what =
      n === path.length
        ? path.length === 0
          ? 'it is not a JSON object of the expected shape'
          : `${name} has a value that is not valid here`
        : `${name} is missing`;
    return failWith(invalid(file, text, offset, what, label));
  }
  return failWith(invalid(file, text, 0, 'it does not have the expected shape', label));
}

function failWith(error: RunsError): never {
  throw error;
}

/** The entries of `raw` whose keys are not in `known`, or undefined when there are none. */
export function splitExtra(
  raw: Record<string, unknown>,
  known: readonly string[],
): ExtraFields | undefined {
  const extra: Record<string, unknown> = {};
  let any = false;
  for (const [key, value] of Object.entries(raw)) {
    if (known.includes(key) || key === '__proto__') continue;
    extra[key] = value;
    any = true;
  }
  return any ? extra : undefined;
}

/** `known` followed by `extra` (known fields win), as a JSON text with a final newline. */
export function encodeRecord(
  known: Record<string, unknown>,
  extra: ExtraFields | undefined,
): string {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(known)) if (value !== undefined) out[key] = value;
  if (extra) for (const [key, value] of Object.entries(extra)) if (!(key in out)) out[key] = value;
  return `${JSON.stringify(out, null, 2)}\n`;
}
