/**
 * What every Runpod call shares: its options, a list page's cursor, and decoding an answer without
 * ever quoting it.
 */
import { z } from 'zod';
import { lineColumn, scanJson } from '../runs/jsonPositions';
import { ApiError } from './apiErrors';

export interface CallOptions {
  /** Aborts the call and any retry wait: rejects with an AbortError. */
  signal?: AbortSignal;
}

/**
 * A list page's `pagination`. The stored document's lists carry none; the
 * live API's may (`GET /pods` pages with a cursor there), so
 * it is followed when present.
 */
export const PaginationWire = z
  .object({ hasNextPage: z.boolean().nullish(), nextCursor: z.string().nullish() })
  .nullish();
export type Pagination = z.infer<typeof PaginationWire>;

export type Decoded<T> = { ok: true; value: T } | { ok: false; reason: string };

/**
 * Parses `text` as JSON and checks it against `schema`. A failure is described
 * by category and position only — `syntax error at line 3 column 7`,
 * `unexpected end at line 1 column 12`, `data: pods.0.id invalid_format` —
 * never by quoting the content, which may hold secrets.
 */
export function decodeJson<T>(text: string, schema: z.ZodType<T>): Decoded<T> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    const scan = scanJson(text);
    // JSON.parse refused what the scanner accepts: nothing known does that; report the end.
    const offset = scan.ok ? text.length : scan.errorAt;
    const { line, column } = lineColumn(text, offset);
    const category = !scan.ok && scan.eof ? 'unexpected end' : 'syntax error';
    return { ok: false, reason: `${category} at line ${line} column ${column}` };
  }
  const result = schema.safeParse(parsed);
  if (result.success) return { ok: true, value: result.data };
  const issue = result.error.issues[0];
  const path = issue ? issue.path.map((p) => (typeof p === 'symbol' ? '?' : String(p))) : [];
  return {
    ok: false,
    reason: `data: ${path.length > 0 ? path.join('.') : '(root)'} ${issue?.code ?? 'invalid'}`,
  };
}

/** The cursor of a list's next page; null on its last page. */
export function nextCursor(pagination: Pagination, path: string): string | null {
  if (!pagination || pagination.hasNextPage === false) return null;
  const cursor = pagination.nextCursor;
  if (cursor) return cursor;
  if (pagination.hasNextPage === true) {
    throw new ApiError('server', `Runpod's list ${path} announces another page without a cursor`);
  }
  return null;
}
