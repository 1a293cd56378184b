/**
 * Errors of the runs store. A record's content is never quoted (it may have
 * been damaged into anything, a secret included): a damaged record is reported
 * by its path, line and column only.
 */
import { HintedError } from '../errors';

export type RunsErrorKind =
  /** The ID cannot name a run directory (it would leave runs/, or is too long). */
  | 'invalid_id'
  /** No run has this ID. */
  | 'not_found'
  /** A run.json or pod.json that is not a valid record. */
  | 'invalid'
  /** A file or directory could not be read or written. */
  | 'io';

export class RunsError extends HintedError<RunsErrorKind> {
  declare readonly hint: string;

  constructor(
    kind: RunsErrorKind,
    message: string,
    /** What the user can do about it. */
    hint: string,
    readonly details: { path?: string; line?: number; column?: number; code?: string } = {},
  ) {
    super(kind, message, hint);
    this.name = 'RunsError';
  }

  get path(): string | undefined {
    return this.details.path;
  }
  get line(): number | undefined {
    return this.details.line;
  }
  get column(): number | undefined {
    return this.details.column;
  }
}

export function isRunsError(error: unknown, kind?: RunsErrorKind): error is RunsError {
  return error instanceof RunsError && (kind === undefined || error.kind === kind);
}

/** A Node fs error as a {@link RunsError}, keeping only its code (Node's text repeats the path). */
export function ioError(path: string, error: unknown, doing: string): RunsError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code ?? 'unknown error';
  return new RunsError(
    'io',
    `cannot ${doing} ${path} (${code})`,
    code === 'EACCES' || code === 'EPERM'
      ? 'Check the permissions of the runs/ folder.'
      : code === 'ENOSPC'
        ? 'Free some disk space, then retry.'
        : 'Check that the runs/ folder is on a working, writable disk, then retry.',
    { path, code },
  );
}
