import { isAbortError } from '../clock';
import { ExecError, type ExecErrorKind } from './executor';
import { describeError } from '../errors';

/** The `aborted` error for a signal that fired. */
export function abortedError(what: string, cause?: unknown): ExecError {
  return new ExecError('aborted', `${what} was stopped before it finished`, { cause });
}

export function throwIfAborted(signal: AbortSignal | undefined, what: string): void {
  if (signal?.aborted) throw abortedError(what, signal.reason);
}

/** Local file system errors as ExecError: ENOENT is `not_found`, the rest `io`. */
export function fsError(error: unknown, what: string): ExecError {
  if (error instanceof ExecError) return error;
  if (isAbortError(error)) return abortedError(what, error);
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const kind: ExecErrorKind = code === 'ENOENT' ? 'not_found' : 'io';
  const reason = code ? `${code}` : describeError(error);
  return new ExecError(kind, `${what} failed (${reason})`, { cause: error });
}

/** At most `maxChars` of a command's stderr, for an error text (control characters dropped). */
export function excerpt(bytes: Buffer | string, maxChars = 400): string {
  const text = (typeof bytes === 'string' ? bytes : bytes.toString('utf8'))
    // eslint-disable-next-line no-control-regex -- a remote's output must not drive the terminal
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '')
    .trim();
  return text.length > maxChars ? `${text.slice(0, maxChars)}…` : text;
}
