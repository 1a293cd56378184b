/** Quoting for POSIX sh. Secrets never go through here: they travel on stdin. */

/** `value` as one sh word, single-quoted (`'` becomes `'\''`). */
export function shQuote(value: string): string {
  if (value.includes('\0')) throw new TypeError('a shell word cannot hold a NUL byte');
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
