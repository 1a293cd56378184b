/**
 * An executor whose streams are watched, so a test can wait on what came down a stream rather
 * than on time: whether any stream delivered output yet, and whether the events being published
 * right now come from a stream's output (not from a bounded read or a poll).
 */
import type { Executor } from '../../src/core/exec/executor';

export interface StreamTap<E extends Executor> {
  /** The executor to hand to the code under test: `inner` with its streams watched. */
  readonly executor: E;
  /** Whether a stream delivered stdout so far. */
  readonly delivered: boolean;
  /** True while a stream's stdout chunk is handled: what is published now came down a stream. */
  readonly delivering: boolean;
}

export function tapStreams<E extends Executor>(inner: E): StreamTap<E> {
  let delivered = false;
  let delivering = false;
  const executor = Object.create(inner) as E;
  executor.stream = (command, options) =>
    inner.stream(command, {
      ...options,
      onStdout: (chunk) => {
        delivered = true;
        delivering = true;
        try {
          options.onStdout(chunk);
        } finally {
          delivering = false;
        }
      },
    });
  return {
    executor,
    get delivered() {
      return delivered;
    },
    get delivering() {
      return delivering;
    },
  };
}
