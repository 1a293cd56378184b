/**
 * Commands on one SSH connection: each runs as `exec sh -c <command>` after
 * printing the session's process group id (sshd makes every session its own
 * group), so an abort or a timeout kills the whole group from a second
 * channel; output is collected or handed over with backpressure, stdin is
 * fed with backpressure, and a drop fails what was in flight with
 * `connection` (the cut-off groups are killed after the next connect).
 */
import type { ClientChannel } from 'ssh2';
import type { Clock } from '../clock';
import { DEFAULT_MAX_OUTPUT_BYTES, ExecError, type ExecResult } from './executor';
import { abortedError } from './failures';
import { Capped } from './local';
import { shQuote } from './shell';
import type { Connection } from './sshConnection';

/** How long killing an aborted remote command may take before we stop waiting. */
const KILL_WAIT_MS = 10_000;
/** Output before the process-group marker (rc-file noise) kept at most. */
const PREAMBLE_MAX_BYTES = 64 * 1024;
const PGID_MARKER = 'OVERBRAINER_PGID=';

/**
 * A channel's exit status, caught the moment the channel opens. ssh2 parses a whole socket read
 * synchronously: for a quick command on a loaded machine the open confirmation, the output, the
 * exit status and the close can arrive in one read, and an `exit` event emitted before `drive`
 * attaches its listener (a microtask later) is lost — the command then read as "exit null"
 * (output is kept: the stream buffers it). Seen with 20 runs followed at once.
 */
const earlyExits = new WeakMap<ClientChannel, { code: number | null; signal: string | null }>();

export interface RunOptions {
  stdin?: string | Buffer | AsyncIterable<Buffer>;
  signal?: AbortSignal;
  timeoutMs?: number;
  maxOutputBytes?: number;
  onStdout?: (chunk: Buffer) => void;
  /**
   * Each chunk of stdout, one at a time and in order: the channel is paused while the returned
   * promise is pending (backpressure up to the target), and the command's result waits for the
   * last one. A rejection kills the command and is what the run rejects with.
   */
  onStdoutAsync?: (chunk: Buffer) => Promise<void>;
  onStderr?: (chunk: Buffer) => void;
  /** A bulk transfer (a download): the channel keeps a wider receive window (see {@link bulkWindow}). */
  bulk?: boolean;
  what: string;
}

/** The receive window a bulk channel on a distant link keeps, topped up once half was consumed. */
const BULK_WINDOW_BYTES = 16 * 1024 * 1024;
/**
 * A connection whose every channel took this long to open (the open and the exec request: two
 * round trips and sshd's fork) is on a distant link, where a channel's window caps its transfer
 * (2 MiB per round trip both ways: ssh2's for a download, sshd's for an upload). Its results say
 * so (`distant`). The fastest opening counts, not the last: on a busy machine a loopback channel
 * sometimes took 20 ms (sshd's fork), which made an upload in CI go as ranges.
 */
const BULK_LINK_MIN_OPEN_MS = 30;

/** The fastest channel opening of each connection so far (see {@link BULK_LINK_MIN_OPEN_MS}). */
const fastestOpenMs = new WeakMap<Connection, number>();

/**
 * A wider receive window for a bulk channel on a distant link: a function that tops it up to
 * {@link BULK_WINDOW_BYTES}, called whenever the consumer has taken what it was handed (never
 * while it lags behind: then at most the window waits in memory, on top of ssh2's own buffer).
 * ssh2 keeps every channel's window at 2 MiB, topped up each MiB consumed: over 50 ms of round
 * trip that held a download to 17 MiB/s, where 16 MiB gave 75 MiB/s (a delaying proxy in front
 * of a real sshd). On loopback the wider window made a 1 GiB retrieval slower (sshd then sends
 * ahead on the cores the client needs), hence only on a link that is slow to answer. ssh2's
 * window is not an option, so this goes through its channel's fields; an ssh2 without them
 * keeps its own window (undefined).
 */
function bulkWindow(channel: ClientChannel): (() => void) | undefined {
  const inner = channel as unknown as {
    incoming?: { window?: unknown };
    outgoing?: { id?: unknown; state?: unknown };
    _client?: { _protocol?: { channelWindowAdjust?: unknown } };
  };
  const incoming = inner.incoming;
  const outgoing = inner.outgoing;
  const protocol = inner._client?._protocol;
  if (
    typeof incoming?.window !== 'number' ||
    typeof outgoing?.id !== 'number' ||
    typeof protocol?.channelWindowAdjust !== 'function'
  ) {
    return undefined;
  }
  const window = incoming as { window: number };
  const adjust = (protocol.channelWindowAdjust as (id: number, bytes: number) => void).bind(
    protocol,
  );
  const id = outgoing.id;
  return () => {
    if (outgoing.state === 'closed') return;
    const bytes = BULK_WINDOW_BYTES - window.window;
    if (bytes < BULK_WINDOW_BYTES / 2) return;
    window.window += bytes;
    adjust(id, bytes);
  };
}

/** Times a refused channel is asked for again (waits 50 ms, doubling: 3.1 s in all). */
const REFUSED_OPEN_RETRIES = 6;
const REFUSED_OPEN_FIRST_WAIT_MS = 50;

/** The command wrapper that reports the session's process group first. */
export function withPgidMarker(command: string): string {
  return `printf '${PGID_MARKER}%s\\n' "$$" && exec sh -c ${shQuote(command)}`;
}

/** Opens, drives and kills the exec channels of one executor. */
export class Channels {
  constructor(
    /** `user@host:port`, for messages. */
    private readonly where: string,
    private readonly clock: Clock,
    /** Process groups of commands cut off by a drop, killed after the next connect. */
    private readonly orphans: Set<number>,
  ) {}

  /**
   * Opens an exec channel. One the server refuses while the connection is up is asked for again
   * a few times, a little later each: sshd counts a session until it has processed its close,
   * and under load that lags behind our own count of channels (MaxSessions refused one in CI).
   * Nothing runs on a refused channel, so asking again is safe.
   */
  async openExec(conn: Connection, command: string): Promise<ClientChannel> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.openExecOnce(conn, command);
      } catch (error) {
        const refused = error instanceof ExecError && error.kind === 'io' && !conn.closed;
        if (!refused || attempt >= REFUSED_OPEN_RETRIES) throw error;
        await this.clock.sleep(REFUSED_OPEN_FIRST_WAIT_MS * 2 ** attempt);
      }
    }
  }

  private openExecOnce(conn: Connection, command: string): Promise<ClientChannel> {
    return new Promise<ClientChannel>((resolve, reject) => {
      const startedMs = this.clock.nowMs();
      const undo = conn.onDrop(reject);
      try {
        conn.client.exec(command, (error, channel) => {
          undo();
          if (error) {
            reject(
              conn.closed
                ? new ExecError('connection', `the SSH connection to ${this.where} dropped`, {
                    cause: error,
                  })
                : new ExecError(
                    'io',
                    `${this.where} refused a new SSH channel (${error.message})`,
                    {
                      cause: error,
                    },
                  ),
            );
          } else {
            channel.once('exit', (code: number | null, signal?: string) => {
              earlyExits.set(channel, {
                code: typeof code === 'number' ? code : null,
                signal: signal ? (signal.startsWith('SIG') ? signal : `SIG${signal}`) : null,
              });
            });
            const openMs = this.clock.nowMs() - startedMs;
            fastestOpenMs.set(conn, Math.min(fastestOpenMs.get(conn) ?? openMs, openMs));
            resolve(channel);
          }
        });
      } catch (error) {
        // ssh2 throws here when its socket no longer writes, maybe before the close event: the
        // connection is dropped now, so the next call connects again instead of failing too.
        undo();
        const where = `the SSH connection to ${this.where} is closed`;
        const closed = new ExecError('connection', where, { cause: error });
        conn.drop(closed);
        conn.client.end();
        reject(closed);
      }
    });
  }

  drive(conn: Connection, channel: ClientChannel, options: RunOptions): Promise<ExecResult> {
    const maxBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    const stdout = new Capped(maxBytes);
    const stderr = new Capped(maxBytes);
    let preamble: Buffer | undefined = Buffer.alloc(0);
    let pgid: number | undefined;
    let pgidWaiters: (() => void)[] = [];
    let exitCode: number | null = earlyExits.get(channel)?.code ?? null;
    let exitSignal: string | null = earlyExits.get(channel)?.signal ?? null;
    let ended: 'aborted' | 'timeout' | undefined;

    /** The async consumer's chain (onStdoutAsync): the result waits for it. */
    let consumed: Promise<void> = Promise.resolve();
    let consumerError: unknown;
    let consuming = 0;
    /** Set once the run's promise exists: kills the command (a consumer failed). */
    let abortRun: (() => void) | undefined;
    const distant = (fastestOpenMs.get(conn) ?? 0) >= BULK_LINK_MIN_OPEN_MS;
    const topUp = options.bulk && distant ? bulkWindow(channel) : undefined;
    topUp?.();
    const deliver = (chunk: Buffer): void => {
      if (chunk.length === 0) return;
      const consume = options.onStdoutAsync;
      if (consume) {
        consuming++;
        channel.pause();
        consumed = consumed
          .then(() => (consumerError === undefined ? consume(chunk) : undefined))
          .then(
            () => {
              if (--consuming === 0 && !ended) {
                channel.resume();
                topUp?.();
              }
            },
            (error: unknown) => {
              consuming--;
              consumerError ??= error;
              abortRun?.();
            },
          );
        return;
      }
      if (options.onStdout) options.onStdout(chunk);
      else stdout.push(chunk);
      topUp?.();
    };
    const gotPreamble = (): void => {
      for (const wake of pgidWaiters) wake();
      pgidWaiters = [];
    };
    const onData = (chunk: Buffer): void => {
      if (!preamble) return deliver(chunk);
      preamble = Buffer.concat([preamble, chunk]);
      const text = preamble.toString('latin1');
      const match = new RegExp(`${PGID_MARKER}(\\d+)\\n`).exec(text);
      if (match) {
        const id = Number(match[1]);
        if (Number.isSafeInteger(id) && id > 1) pgid = id;
        const rest = preamble.subarray(match.index + match[0].length);
        preamble = undefined;
        gotPreamble();
        deliver(rest);
      } else if (preamble.length > PREAMBLE_MAX_BYTES) {
        // No marker: not a POSIX login shell. Hand everything over; no group to kill.
        const all = preamble;
        preamble = undefined;
        gotPreamble();
        deliver(all);
      }
    };

    return new Promise<ExecResult>((resolve, reject) => {
      let settled = false;
      const timer = new AbortController();
      const finish = (outcome: () => void): void => {
        if (settled) return;
        settled = true;
        undoDrop();
        timer.abort();
        options.signal?.removeEventListener('abort', onAbort);
        outcome();
      };
      const undoDrop = conn.onDrop((error) => {
        if (pgid !== undefined) this.orphans.add(pgid);
        finish(() => reject(error));
      });

      const end = (why: 'aborted' | 'timeout'): void => {
        if (settled || ended) return;
        ended = why;
        void (async () => {
          if (pgid === undefined && preamble) {
            // The marker comes first thing; give it a moment if it has not arrived yet.
            await new Promise<void>((resolve) => {
              pgidWaiters.push(resolve);
              void this.clock.sleep(KILL_WAIT_MS, timer.signal).then(resolve, resolve);
            });
          }
          if (pgid !== undefined && !settled) {
            await this.killGroup(conn, pgid).catch(() => undefined);
          }
          channel.close();
          finish(() =>
            reject(
              consumerError !== undefined
                ? consumerError
                : why === 'aborted'
                  ? abortedError(options.what, options.signal?.reason)
                  : new ExecError(
                      'timeout',
                      `${options.what} did not finish within ${options.timeoutMs} ms on ${this.where}`,
                    ),
            ),
          );
        })();
      };
      const onAbort = (): void => end('aborted');
      abortRun = onAbort;
      options.signal?.addEventListener('abort', onAbort, { once: true });
      if (options.timeoutMs !== undefined) {
        this.clock.sleep(options.timeoutMs, timer.signal).then(
          () => end('timeout'),
          () => undefined,
        );
      }

      channel.on('data', onData);
      channel.stderr.on('data', (chunk: Buffer) => {
        options.onStderr?.(chunk);
        stderr.push(chunk);
      });
      channel.on('exit', (code: number | null, signal?: string) => {
        exitCode = typeof code === 'number' ? code : null;
        exitSignal = signal ? (signal.startsWith('SIG') ? signal : `SIG${signal}`) : null;
      });
      channel.on('close', () => {
        if (ended) return; // the kill path settles
        if (preamble && preamble.length > 0) {
          const all = preamble;
          preamble = undefined;
          deliver(all);
        }
        const settle = (): void =>
          finish(() => {
            if (stdinError) {
              reject(
                new ExecError(
                  'io',
                  `${options.what} could not read its input: ${stdinError.message}`,
                  {
                    cause: stdinError,
                  },
                ),
              );
              return;
            }
            resolve({
              code: exitCode,
              signal: exitSignal,
              stdout: options.onStdout ? Buffer.alloc(0) : stdout.bytes,
              stderr: stderr.bytes,
              truncated: stdout.truncated || stderr.truncated,
              distant,
            });
          });
        // Without an exit status the close may come from a drop: ssh2 tells the client
        // before its channels, so one turn later the drop has settled it as `connection`.
        // An async consumer finishes what it was handed first.
        const settleNow = (): void => {
          if (exitCode !== null || exitSignal !== null) settle();
          else setImmediate(settle);
        };
        if (options.onStdoutAsync) void consumed.then(settleNow, settleNow);
        else settleNow();
      });
      let stdinError: Error | undefined;
      void this.feed(
        channel,
        options.stdin,
        () => settled || ended !== undefined,
        (error) => (stdinError = error),
      );
    });
  }

  /** Writes stdin (a buffer or a stream, with backpressure), then closes it. */
  private async feed(
    channel: ClientChannel,
    stdin: RunOptions['stdin'],
    stopped: () => boolean,
    failed: (error: Error) => void,
  ): Promise<void> {
    try {
      if (stdin === undefined || typeof stdin === 'string' || Buffer.isBuffer(stdin)) {
        channel.end(stdin ?? '');
        return;
      }
      let closed = false;
      channel.once('close', () => (closed = true));
      for await (const chunk of stdin) {
        if (closed || stopped()) return;
        if (!channel.write(chunk)) {
          await new Promise<void>((resolve) => {
            const done = (): void => {
              channel.off('drain', done);
              channel.off('close', done);
              resolve();
            };
            channel.on('drain', done);
            channel.on('close', done);
          });
        }
      }
      if (!closed) channel.end();
    } catch (error) {
      // A failing source (a local read error) ends the command with its stdin cut short;
      // the call then rejects with that error rather than the command's complaint.
      failed(error instanceof Error ? error : new Error(String(error)));
      channel.close();
    }
  }

  /** TERM the remote process group, KILL it if it lingers; resolves once it is gone. */
  async killGroup(conn: Connection, pgid: number): Promise<void> {
    if (!Number.isSafeInteger(pgid) || pgid <= 1) return; // never `kill -- -1`
    // `kill -SIG -PGID` without `--`: dash's kill takes no `--`; bash and busybox accept this form.
    const script =
      `kill -TERM -${pgid} 2>/dev/null || exit 0; i=0; ` +
      `while kill -0 -${pgid} 2>/dev/null; do i=$((i+1)); ` +
      `if [ "$i" -gt 20 ]; then kill -KILL -${pgid} 2>/dev/null; exit 0; fi; sleep 0.1; done`;
    if (conn.closed) {
      this.orphans.add(pgid);
      return;
    }
    // Not counted against the channel slots: a kill must get through when all are busy.
    const channel = await this.openExec(conn, `exec sh -c ${shQuote(script)}`);
    const timer = new AbortController();
    await new Promise<void>((resolve) => {
      const undo = conn.onDrop(() => resolve());
      channel.on('close', () => {
        undo();
        resolve();
      });
      channel.on('data', () => undefined);
      channel.stderr.on('data', () => undefined);
      channel.end();
      void this.clock.sleep(KILL_WAIT_MS, timer.signal).then(
        () => {
          channel.close();
          resolve();
        },
        () => undefined,
      );
    });
    timer.abort();
  }
}
