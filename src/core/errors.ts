/**
 * The base of the core's typed errors: a message saying what happened and, where there is one,
 * a hint saying the next action. The CLI and the extension render both the same way
 * ({@link hintOf}); an error without a hint says enough on its own.
 */
export class HintedError extends Error {
  constructor(
    message: string,
    /** The next action, in a sentence; null when the message says it all. */
    readonly hint: string | null = null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The hint of any error that carries one (a {@link HintedError} or a look-alike), else null. */
export function hintOf(error: unknown): string | null {
  if (typeof error !== 'object' || error === null || !('hint' in error)) return null;
  const hint = (error as { hint: unknown }).hint;
  return typeof hint === 'string' && hint.trim() !== '' ? hint : null;
}
