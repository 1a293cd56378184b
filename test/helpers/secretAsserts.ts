/** Asserts that a secret (a marker planted in a file) never shows in what an error carries. */
import assert from 'node:assert/strict';

/** `marker` is in none of the error's message, hint, stack or JSON. */
export function assertNotInError(error: Error & { hint: string }, marker: string): void {
  for (const text of [error.message, error.hint, String(error.stack), JSON.stringify(error)]) {
    assert.ok(!text.includes(marker), text);
  }
}
