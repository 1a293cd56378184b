/**
 * The base of every typed error: a `kind` callers decide on, a message saying what happened and
 * a hint saying the next action a user can take. The CLI and the extension render both the same
 * way ({@link describeError}, {@link hintOf}). Every class gives one: its callers' (each `new`
 * names it), or its own by kind where the caller has nothing better to say (a unit test holds
 * every class of src/ to it).
 */
export class HintedError<K extends string = string> extends Error {
  /** What went wrong, as a caller decides on it (each class lists its kinds). */
  readonly kind: K;
  /**
   * The next action, in a sentence. Not an enumerable field, so an error's own fields stay its
   * data (an ApiError's are checked to hold no secret).
   */
  declare readonly hint: string;

  constructor(kind: K, message: string, hint: string, options?: { cause?: unknown }) {
    super(message, options);
    this.kind = kind;
    Object.defineProperty(this, 'hint', { value: hint, enumerable: false, configurable: true });
  }
}

/** The hint of any error that carries one (a {@link HintedError} or a look-alike), else null. */
export function hintOf(error: unknown): string | null {
  if (typeof error !== 'object' || error === null || !('hint' in error)) return null;
  const hint = (error as { hint: unknown }).hint;
  return typeof hint === 'string' && hint.trim() !== '' ? hint : null;
}

/**
 * What an error says to a user, in a log line, a notification or a saved message: its message
 * (an Error's), or the thrown value as text. Its hint is said apart ({@link hintOf}).
 */
export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
