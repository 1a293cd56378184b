/** Asserts the executor tests share: a typed rejection, and a condition reached in time. */
import assert from 'node:assert/strict';
import { ExecError } from '../../src/core/exec/executor';

/** `promise` rejects with an ExecError of `kind`; that error. */
export async function rejects(
  promise: Promise<unknown>,
  kind: ExecError['kind'],
): Promise<ExecError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ExecError, `expected an ExecError, got ${String(error)}`);
    assert.equal(error.kind, kind, error.message);
    return error;
  }
  assert.fail(`expected a rejection with ${kind}`);
}

/** Polls `check` every 20 ms until it holds; fails after `timeoutMs`. */
export async function waitFor(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) assert.fail('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
