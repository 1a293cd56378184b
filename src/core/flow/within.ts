/**
 * A remote look held to a bound of its own. An SSH executor's `timeoutMs` covers a command's
 * run only: its connect, its wait for a channel, the kill it sends a command that timed out,
 * and an SFTP read all wait on the host; a frozen host answers none of them, and they end only
 * when SSH keepalive drops the connection (15 s). A cluster's follow counts a node's looks that
 * miss: each must end within the request timeout, or a frozen host is named late.
 */
import type { Clock } from '../clock';
import { ExecError } from '../exec/executor';

/**
 * `work`'s result, or an ExecError `timeout` once `ms` passed on `clock`: `work` goes on
 * unwatched (its rejection swallowed), ending when its own timeout or the connection's drop
 * ends it.
 */
export async function within<T>(
  clock: Clock,
  ms: number,
  what: string,
  work: Promise<T>,
): Promise<T> {
  work.catch(() => undefined);
  const timer = new AbortController();
  const late = clock.sleep(ms, timer.signal).then(() => {
    throw new ExecError('timeout', `${what} gave no answer within ${ms} ms`);
  });
  late.catch(() => undefined);
  try {
    return await Promise.race([work, late]);
  } finally {
    timer.abort();
  }
}
