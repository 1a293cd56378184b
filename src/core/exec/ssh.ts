/**
 * A pod over SSH (ssh2): one connection multiplexing exec channels and one
 * SFTP session, with the run's host key pinned. A host presenting any other
 * key is dropped during key exchange, before authentication, so nothing is
 * ever sent to it; that check applies to every reconnect too. A dropped
 * connection fails what was in flight with `connection`; the next call
 * reconnects. Secrets travel on stdin only, never in a command line.
 */
import { createHash, randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import type { Client, ClientChannel, SFTPWrapper } from 'ssh2';

/**
 * ssh2, loaded on the first connection: activating the extension (no SSH before a run needs
 * it) does not pay for evaluating it. A plain require, so esbuild still bundles it.
 */
function ssh2(): typeof import('ssh2') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('ssh2') as typeof import('ssh2');
}
import type { Clock } from '../clock';
import type { Timing } from '../timing';
import {
  DEFAULT_MAX_OUTPUT_BYTES,
  ExecError,
  type DownloadOptions,
  type ExecOptions,
  type ExecResult,
  type Executor,
  type StreamOptions,
  type UploadOptions,
} from './executor';
import { abortedError, excerpt, throwIfAborted } from './errors';
import { downloadFiles, type EngineLimits, type ReadSource, type SourceFile } from './download';
import { Capped } from './local';
import { shQuote } from './shell';
import { tarDirectory } from './tar';
import { TarReader, type TarHandler } from './tarReader';

export interface SshTarget {
  host: string;
  port: number;
  username: string;
  /** The run's client private key (OpenSSH format), read from `runs/<id>/ssh/id_ed25519`. */
  privateKey: Buffer;
  /** The pinned host key, `ssh-ed25519 AAAA…` (a trailing comment is ignored). */
  hostPublicKey: string;
}

export interface SshExecutorOptions extends SshTarget {
  clock: Clock;
  /** `connectTimeoutMs` bounds each connect (TCP + handshake + auth; at least 2 s). */
  timing: Timing;
  /** Aborts the first connect. */
  signal?: AbortSignal;
  /** SSH keepalive period; a link silent for interval × (countMax + 1) counts as dropped. */
  keepaliveIntervalMs?: number;
  keepaliveCountMax?: number;
  /** Exec channels open at once (OpenSSH allows 10 sessions per connection; SFTP takes one). */
  maxChannels?: number;
  /** Diagnostics (never holds a key or a command's stdin). */
  onLog?: (line: string) => void;
  /** Download tuning (defaults measured by bench/retrieval.bench.ts). */
  transfer?: Partial<EngineLimits> & {
    /** Files at least this big stream through an exec channel (null: never; SFTP reads only). */
    streamMinBytes?: number | null;
    /** Files streamed at once. */
    streams?: number;
  };
}

const DEFAULT_KEEPALIVE_MS = 5_000;
/**
 * A TCP connect plus key exchange plus auth takes real time whatever a test's
 * timing scale says (ed25519 in JS on a busy machine: hundreds of ms).
 */
const MIN_CONNECT_TIMEOUT_MS = 2_000;
const DEFAULT_KEEPALIVE_COUNT = 2;
const DEFAULT_MAX_CHANNELS = 6;
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

/** Bytes asked together with a file's size: most small files come whole in that one read. */
const PREFETCH_BYTES = 16 * 1024;
/** Files from this size on are streamed through an exec channel rather than read over SFTP. */
const STREAM_MIN_BYTES = 1024 * 1024;
/** Exec channels streaming files at once (sshd allows 10 sessions per connection). */
const STREAMS_AT_ONCE = 4;
/** Bytes of quoted names per `tar` command (well inside SSH's packet limit). */
const TAR_COMMAND_BYTES = 32 * 1024;

/** SFTP status codes (draft-ietf-secsh-filexfer-02). */
const SFTP_NO_SUCH_FILE = 2;

/** The pinned key's wire blob, checked to be an ssh-ed25519 key. */
export function parseHostPublicKey(line: string): Buffer {
  const [type, base64] = line.trim().split(/\s+/);
  const blob = base64 ? Buffer.from(base64, 'base64') : Buffer.alloc(0);
  const nameLength = blob.length >= 4 ? blob.readUInt32BE(0) : -1;
  const name = nameLength > 0 ? blob.subarray(4, 4 + nameLength).toString('latin1') : '';
  if (type !== 'ssh-ed25519' || name !== 'ssh-ed25519' || blob.length !== 51) {
    throw new ExecError(
      'host_key',
      'the pinned host key is not an `ssh-ed25519 AAAA…` public key: the run record is damaged; nothing was sent',
    );
  }
  return blob;
}

/** OpenSSH's `SHA256:…` fingerprint of a key blob. */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/** An abortable counting semaphore. */
class Slots {
  private active = 0;
  private readonly waiting: { grant: () => void }[] = [];

  constructor(private readonly limit: number) {}

  async acquire(signal?: AbortSignal): Promise<() => void> {
    if (this.active < this.limit) {
      this.active++;
      return this.releaser();
    }
    await new Promise<void>((resolve, reject) => {
      const entry = {
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        const index = this.waiting.indexOf(entry);
        if (index >= 0) this.waiting.splice(index, 1);
        reject(abortedError('the command', signal?.reason));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(entry);
    });
    this.active++;
    return this.releaser();
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.active--;
      this.waiting.shift()?.grant();
    };
  }
}

/** One established SSH connection and what depends on it. */
class Connection {
  closed = false;
  sftp: Promise<SFTPWrapper> | undefined;
  private readonly dropListeners = new Set<(error: ExecError) => void>();

  constructor(readonly client: Client) {}

  /** Calls `listener` if the connection drops; the returned function unregisters it. */
  onDrop(listener: (error: ExecError) => void): () => void {
    this.dropListeners.add(listener);
    return () => this.dropListeners.delete(listener);
  }

  drop(error: ExecError): void {
    if (this.closed) return;
    this.closed = true;
    for (const listener of [...this.dropListeners]) listener(error);
    this.dropListeners.clear();
  }
}

interface RunOptions {
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
  what: string;
}

export class SshExecutor implements Executor {
  readonly kind = 'ssh' as const;
  private readonly pinned: Buffer;
  private readonly where: string;
  private readonly slots: Slots;
  private conn: Connection | undefined;
  private connecting: Promise<Connection> | undefined;
  private disposed = false;
  /** Process groups of commands cut off by a drop, killed after the next connect. */
  private readonly orphans = new Set<number>();

  private constructor(private readonly options: SshExecutorOptions) {
    this.pinned = parseHostPublicKey(options.hostPublicKey);
    this.where = `${options.username}@${options.host}:${options.port}`;
    this.slots = new Slots(options.maxChannels ?? DEFAULT_MAX_CHANNELS);
  }

  /**
   * Connects (pinned host key, the run's client key) and gives an executor.
   * Rejects with `host_key` (nothing sent), `auth`, `timeout`, `connection`
   * or `aborted`.
   */
  static async connect(options: SshExecutorOptions): Promise<SshExecutor> {
    const executor = new SshExecutor(options);
    try {
      await executor.connection(options.signal);
    } catch (error) {
      // An abort leaves the handshake running: disposing closes it when it lands.
      executor.dispose();
      throw error;
    }
    return executor;
  }

  /** Whether a connection is up right now (the next call reconnects when not). */
  get connected(): boolean {
    return this.conn !== undefined && !this.conn.closed;
  }

  private get connectTimeoutMs(): number {
    return Math.max(MIN_CONNECT_TIMEOUT_MS, this.options.timing.connectTimeoutMs);
  }

  private log(line: string): void {
    this.options.onLog?.(line);
  }

  private connection(signal?: AbortSignal): Promise<Connection> {
    if (this.disposed) return Promise.reject(disposedError());
    if (this.conn && !this.conn.closed) return Promise.resolve(this.conn);
    if (!this.connecting) {
      this.connecting = this.openConnection().then(
        (conn) => {
          this.connecting = undefined;
          if (this.disposed) {
            conn.client.end();
            throw disposedError();
          }
          this.conn = conn;
          this.killOrphans(conn);
          return conn;
        },
        (error: unknown) => {
          this.connecting = undefined;
          throw error;
        },
      );
    }
    return raceAbort(this.connecting, signal, 'connecting');
  }

  private openConnection(): Promise<Connection> {
    const { options } = this;
    const client = new (ssh2().Client)();
    let presented: Buffer | undefined;
    let ready = false;
    let lastError: Error | undefined;
    this.log(`connecting to ${this.where}`);
    return new Promise<Connection>((resolve, reject) => {
      client.on('error', (error: Error & { level?: string }) => {
        lastError = error;
        if (!ready) reject(this.connectError(error, presented));
      });
      client.on('close', () => {
        if (!ready) reject(this.connectError(lastError ?? new Error('closed'), presented));
      });
      client.once('ready', () => {
        ready = true;
        const conn = new Connection(client);
        client.on('close', () => {
          const reason = lastError ? ` (${lastError.message})` : '';
          this.log(`connection to ${this.where} closed${reason}`);
          conn.drop(
            this.disposed
              ? disposedError()
              : new ExecError(
                  'connection',
                  `the SSH connection to ${this.where} dropped${reason}; the next call reconnects`,
                  { cause: lastError },
                ),
          );
        });
        this.log(`connected to ${this.where}`);
        resolve(conn);
      });
      try {
        client.connect({
          host: options.host,
          port: options.port,
          username: options.username,
          privateKey: options.privateKey,
          readyTimeout: this.connectTimeoutMs,
          keepaliveInterval: options.keepaliveIntervalMs ?? DEFAULT_KEEPALIVE_MS,
          keepaliveCountMax: options.keepaliveCountMax ?? DEFAULT_KEEPALIVE_COUNT,
          tryKeyboard: false,
          // Only the key type we pin, so the server cannot offer another one instead.
          algorithms: { serverHostKey: ['ssh-ed25519'] },
          // Runs during key exchange, before any authentication: a wrong key ends it there.
          hostVerifier: (key: Buffer) => {
            const ok = Buffer.isBuffer(key) && key.equals(this.pinned);
            if (!ok) presented = Buffer.from(key);
            return ok;
          },
        });
      } catch (error) {
        reject(this.connectError(error as Error, presented));
      }
    });
  }

  private connectError(
    error: Error & { level?: string; code?: string },
    presented?: Buffer,
  ): ExecError {
    if (presented) {
      return new ExecError(
        'host_key',
        `${this.options.host}:${this.options.port} presented the host key ${fingerprint(presented)}, ` +
          `not the one pinned for this run (${fingerprint(this.pinned)}): refused before anything was sent. ` +
          `It is not the machine this run created; check the pod (\`overbrainer pod ls\`) before trying again.`,
      );
    }
    if (error.level === 'client-authentication') {
      return new ExecError(
        'auth',
        `${this.where} refused this run's SSH key: it is not the run's pod, or its authorized_keys changed`,
        { cause: error },
      );
    }
    if (error.level === 'client-timeout') {
      return new ExecError(
        'timeout',
        `${this.where} gave no SSH answer within ${this.connectTimeoutMs} ms; check the network and that the pod is running`,
        { cause: error },
      );
    }
    const reason = error.code ?? error.message;
    return new ExecError(
      'connection',
      `cannot connect to ${this.where} over SSH (${reason}); check the network and that the pod is running`,
      { cause: error },
    );
  }

  /** Kills the process groups of commands a drop cut off (they would linger on the pod). */
  private killOrphans(conn: Connection): void {
    for (const pgid of [...this.orphans]) {
      this.orphans.delete(pgid);
      void this.killGroup(conn, pgid).catch(() => undefined);
    }
  }

  exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    return this.run(command, { ...options, what: 'the command' });
  }

  stream(command: string, options: StreamOptions): Promise<ExecResult> {
    return this.run(command, {
      signal: options.signal,
      onStdout: options.onStdout,
      onStderr: options.onStderr,
      what: 'the streamed command',
    });
  }

  /**
   * Runs `command` as `exec sh -c <command>` after printing the session's
   * process group id (sshd makes every session its own group), so an abort
   * or a timeout can kill the whole group from a second channel: closing a
   * pty-less channel alone would leave e.g. a `tail -f` running.
   */
  private async run(command: string, options: RunOptions): Promise<ExecResult> {
    throwIfAborted(options.signal, options.what);
    const release = await this.slots.acquire(options.signal);
    try {
      const conn = await this.connection(options.signal);
      throwIfAborted(options.signal, options.what);
      const wrapped = `printf '${PGID_MARKER}%s\\n' "$$" && exec sh -c ${shQuote(command)}`;
      const channel = await this.openExec(conn, wrapped);
      return await this.drive(conn, channel, options);
    } finally {
      release();
    }
  }

  private openExec(conn: Connection, command: string): Promise<ClientChannel> {
    return new Promise<ClientChannel>((resolve, reject) => {
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
            resolve(channel);
          }
        });
      } catch (error) {
        undo();
        reject(
          new ExecError('connection', `the SSH connection to ${this.where} is closed`, {
            cause: error,
          }),
        );
      }
    });
  }

  private drive(
    conn: Connection,
    channel: ClientChannel,
    options: RunOptions,
  ): Promise<ExecResult> {
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
              if (--consuming === 0 && !ended) channel.resume();
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
              void this.options.clock.sleep(KILL_WAIT_MS, timer.signal).then(resolve, resolve);
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
        this.options.clock.sleep(options.timeoutMs, timer.signal).then(
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
  private async killGroup(conn: Connection, pgid: number): Promise<void> {
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
      void this.options.clock.sleep(KILL_WAIT_MS, timer.signal).then(
        () => {
          channel.close();
          resolve();
        },
        () => undefined,
      );
    });
    timer.abort();
  }

  // ---- SFTP ----------------------------------------------------------------

  private async sftpSession(
    signal?: AbortSignal,
  ): Promise<{ conn: Connection; sftp: SFTPWrapper }> {
    const conn = await this.connection(signal);
    const session: Promise<SFTPWrapper> = (conn.sftp ??= new Promise<SFTPWrapper>(
      (resolve, reject) => {
        const undo = conn.onDrop(reject);
        try {
          conn.client.sftp((error, sftp) => {
            undo();
            if (error) {
              reject(
                new ExecError(
                  'io',
                  `${this.where} offers no SFTP session (${error.message}); its sshd_config needs \`Subsystem sftp\``,
                  { cause: error },
                ),
              );
            } else {
              sftp.on('error', () => undefined);
              // A session the server ended is not reused: the next call opens another.
              sftp.on('close', () => {
                if (conn.sftp === session) conn.sftp = undefined;
              });
              resolve(sftp);
            }
          });
        } catch (error) {
          undo();
          reject(
            new ExecError('connection', `the SSH connection to ${this.where} is closed`, {
              cause: error,
            }),
          );
        }
      },
    ));
    const pending = session;
    try {
      return { conn, sftp: await raceAbort(pending, signal, 'opening SFTP') };
    } catch (error) {
      if (conn.sftp === pending && !(error instanceof ExecError && error.kind === 'aborted')) {
        conn.sftp = undefined; // try again next time
      }
      throw error;
    }
  }

  /** An SFTP failure as an ExecError: a drop is `connection`, a missing path `not_found`. */
  private sftpError(conn: Connection, error: unknown, what: string): ExecError {
    if (error instanceof ExecError) return error;
    if (conn.closed) {
      return new ExecError(
        'connection',
        `the SSH connection to ${this.where} dropped while ${what}`,
        {
          cause: error,
        },
      );
    }
    const code = (error as { code?: unknown } | undefined)?.code;
    const message = error instanceof Error ? error.message : String(error);
    if (code === SFTP_NO_SUCH_FILE) {
      return new ExecError('not_found', `${what} failed: no such file on ${this.where}`, {
        cause: error,
      });
    }
    return new ExecError('io', `${what} failed on ${this.where} (${message})`, { cause: error });
  }

  /** Runs one SFTP call, failing at once when the connection drops. */
  private sftpCall<T>(
    conn: Connection,
    what: string,
    call: (callback: (error: Error | undefined | null, value?: T) => void) => void,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const undo = conn.onDrop(reject);
      try {
        call((error, value) => {
          undo();
          if (error) reject(this.sftpError(conn, error, what));
          else resolve(value as T);
        });
      } catch (error) {
        undo();
        reject(this.sftpError(conn, error, what));
      }
    });
  }

  async readRange(path: string, offset: number, maxBytes: number): Promise<Buffer> {
    const { conn, sftp } = await this.sftpSession();
    const what = `reading ${path}`;
    const handle = await this.sftpCall<Buffer>(conn, what, (cb) => sftp.open(path, 'r', cb));
    try {
      const buffer = Buffer.allocUnsafe(Math.max(0, maxBytes));
      let done = 0;
      while (done < buffer.length) {
        const length = buffer.length - done;
        const read = await this.sftpCall<number>(conn, what, (cb) =>
          sftp.read(handle, buffer, done, length, offset + done, (error, bytesRead) =>
            cb(error, bytesRead),
          ),
        );
        if (!read) break;
        done += read;
      }
      return buffer.subarray(0, done);
    } finally {
      sftp.close(handle, () => undefined);
    }
  }

  async writeFileAtomic(path: string, data: string | Buffer): Promise<void> {
    const { conn, sftp } = await this.sftpSession();
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    const dir = posix.dirname(path);
    const temp = posix.join(dir, `.${posix.basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
    const what = `writing ${path}`;
    const openTemp = (): Promise<Buffer> =>
      this.sftpCall<Buffer>(conn, what, (cb) => sftp.open(temp, 'wx', { mode: 0o644 }, cb));
    let handle: Buffer;
    try {
      handle = await openTemp();
    } catch (error) {
      if (!(error instanceof ExecError && error.kind === 'not_found')) throw error;
      await this.mkdirs(conn, sftp, dir);
      handle = await openTemp();
    }
    try {
      const piece = 32 * 1024;
      for (let done = 0; done < bytes.length; done += piece) {
        const length = Math.min(piece, bytes.length - done);
        await this.sftpCall<void>(conn, what, (cb) =>
          sftp.write(handle, bytes, done, length, done, (error) => cb(error)),
        );
      }
      await this.sftpCall<void>(conn, what, (cb) => {
        try {
          sftp.ext_openssh_fsync(handle, (error) => cb(error));
        } catch {
          cb(undefined); // no fsync extension: the rename still makes it atomic
        }
      });
      await this.sftpCall<void>(conn, what, (cb) => sftp.close(handle, (error) => cb(error)));
      await this.sftpCall<void>(conn, what, (cb) => {
        try {
          // posix-rename replaces the target atomically; plain SFTP rename refuses an existing one.
          sftp.ext_openssh_rename(temp, path, (error) => cb(error));
        } catch {
          sftp.unlink(path, () => sftp.rename(temp, path, (error) => cb(error)));
        }
      });
    } catch (error) {
      if (!conn.closed) sftp.unlink(temp, () => undefined);
      throw error;
    }
  }

  /** `mkdir -p` over SFTP. */
  private async mkdirs(conn: Connection, sftp: SFTPWrapper, dir: string): Promise<void> {
    const missing: string[] = [];
    let current = dir;
    for (;;) {
      try {
        const stats = await this.sftpCall<{ isDirectory(): boolean }>(
          conn,
          `creating ${dir}`,
          (cb) => sftp.stat(current, cb),
        );
        if (!stats.isDirectory()) {
          throw new ExecError(
            'io',
            `cannot create ${dir} on ${this.where}: ${current} is not a directory`,
          );
        }
        break;
      } catch (error) {
        if (!(error instanceof ExecError && error.kind === 'not_found')) throw error;
        missing.unshift(current);
        const parent = posix.dirname(current);
        if (parent === current) break;
        current = parent;
      }
    }
    for (const path of missing) {
      try {
        await this.sftpCall<void>(conn, `creating ${path}`, (cb) =>
          sftp.mkdir(path, (error) => cb(error)),
        );
      } catch (error) {
        // Someone else may have created it meanwhile.
        const stats = await this.sftpCall<{ isDirectory(): boolean }>(
          conn,
          `creating ${path}`,
          (cb) => sftp.stat(path, cb),
        ).catch(() => undefined);
        if (!stats?.isDirectory()) throw error;
      }
    }
  }

  /**
   * Streams an in-process ustar of `localDir` into `tar -x` on the target:
   * one channel, no local `tar`, constant memory, symlinks never followed.
   */
  async upload(localDir: string, remoteDir: string, options: UploadOptions): Promise<void> {
    const archive = coalesce(
      tarDirectory(localDir, {
        exclude: options.exclude,
        onWarning: options.onWarning,
        signal: options.signal,
      }),
      256 * 1024,
    );
    const dir = shQuote(remoteDir);
    const result = await this.run(`mkdir -p -- ${dir} && tar -x -f - -C ${dir}`, {
      stdin: archive,
      signal: options.signal,
      maxOutputBytes: 64 * 1024,
      what: 'the upload',
    });
    if (result.code !== 0) {
      throw new ExecError(
        'io',
        `unpacking the upload into ${remoteDir} on ${this.where} failed (exit ${result.code ?? result.signal}): ${excerpt(result.stderr)}`,
      );
    }
  }

  async download(
    remoteDir: string,
    localDir: string,
    files: readonly string[],
    options: DownloadOptions = {},
  ): Promise<void> {
    const { conn, sftp } = await this.sftpSession(options.signal);
    const tuning = this.options.transfer ?? {};
    // 128 KiB reads: half the CPU of 64 KiB ones per GiB (bench/retrieval.bench.ts).
    const chunkBytes = tuning.chunkBytes ?? 128 * 1024;
    // The server caps open handles (OpenSSH tells it in its limits extension).
    const serverHandles = (sftp as { maxOpenHandles?: number }).maxOpenHandles ?? 64;
    const handles = Math.max(1, Math.min(tuning.files ?? 64, serverHandles - 4));
    await downloadFiles(
      new SftpSource(
        (what, call) => this.sftpCall(conn, what, call),
        conn,
        sftp,
        PREFETCH_BYTES,
        handles,
        tuning.streamMinBytes === null
          ? null
          : {
              minBytes: tuning.streamMinBytes ?? STREAM_MIN_BYTES,
              limiter: new Slots(tuning.streams ?? STREAMS_AT_ONCE),
              run: (path, position, length, write, signal) =>
                this.streamRange(path, position, length, write, signal ?? options.signal),
              batch: (dir, names, handler, signal) =>
                this.tarFiles(dir, names, handler, signal ?? options.signal),
            },
      ),
      remoteDir,
      localDir,
      files,
      options,
      {
        files: handles,
        chunkBytes,
        windowPerFile: tuning.windowPerFile ?? 16,
        readsInFlight: tuning.readsInFlight ?? 64,
      },
      (error, what) => this.sftpError(conn, error, what),
    );
  }

  /**
   * Streams `length` bytes of `path` from `position` through one exec channel (`tail -c +N |
   * head -c L`, POSIX, busybox too), handing each chunk to `write` with backpressure. Several
   * times the throughput of SFTP reads through ssh2 (each SFTP read is a request and a response
   * parsed in JS; a channel is one flow of data). Resolves with the bytes streamed: fewer than
   * `length` when the file shrank since it was opened (the hash then says it changed).
   */
  private async streamRange(
    path: string,
    position: number,
    length: number,
    write: (chunk: Buffer) => Promise<void>,
    signal?: AbortSignal,
  ): Promise<number> {
    let streamed = 0;
    const result = await this.run(
      `tail -c +${position + 1} -- ${shQuote(path)} | head -c ${length}`,
      {
        signal,
        maxOutputBytes: 64 * 1024,
        what: `reading ${path}`,
        onStdoutAsync: async (chunk) => {
          const room = length - streamed;
          const piece = chunk.length > room ? chunk.subarray(0, room) : chunk;
          if (piece.length === 0) return;
          streamed += piece.length;
          await write(piece);
        },
      },
    );
    if (streamed < length && result.stderr.length > 0) {
      throw new ExecError(
        'io',
        `reading ${path} on ${this.where} failed: ${excerpt(result.stderr)}`,
      );
    }
    return streamed;
  }

  /**
   * Sends `names` (relative to `dir`) as tar streams (`tar -cf - -- names…`, GNU or busybox),
   * a few thousand names per command, two commands at once, each entry handed to `handler` as
   * it arrives (the reader refuses a damaged stream; the caller refuses names it did not ask
   * for). Files tar could not send (gone, unreadable) are simply not handed over.
   */
  private async tarFiles(
    dir: string,
    names: readonly string[],
    handler: TarHandler,
    signal?: AbortSignal,
  ): Promise<void> {
    const groups: string[][] = [];
    let group: string[] = [];
    let bytes = 0;
    for (const name of names) {
      const quoted = shQuote(name).length + 1;
      if (group.length > 0 && bytes + quoted > TAR_COMMAND_BYTES) {
        groups.push(group);
        group = [];
        bytes = 0;
      }
      group.push(name);
      bytes += quoted;
    }
    if (group.length > 0) groups.push(group);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < groups.length) {
        const list = groups[next++]!;
        const reader = new TarReader(handler);
        const result = await this.run(
          `cd -- ${shQuote(dir)} && exec tar -cf - -- ${list.map(shQuote).join(' ')}`,
          {
            signal,
            maxOutputBytes: 64 * 1024,
            what: 'the results stream',
            onStdoutAsync: (chunk) => reader.push(chunk),
          },
        );
        if (!reader.atBoundary) {
          throw new ExecError(
            'io',
            `the results stream from ${this.where} ended inside a file (tar exit ${result.code ?? result.signal}): ${excerpt(result.stderr)}`,
          );
        }
      }
    };
    await Promise.all([worker(), worker()]);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    const conn = this.conn;
    this.conn = undefined;
    conn?.drop(disposedError());
    conn?.client.end();
  }
}

type SftpCall = <T>(
  what: string,
  call: (callback: (error: Error | undefined | null, value?: T) => void) => void,
) => Promise<T>;

/** Remote files over SFTP: open, then the size and the first chunk asked at once. */
class SftpSource implements ReadSource {
  private openHandles = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly call: SftpCall,
    private readonly conn: Connection,
    private readonly sftp: SFTPWrapper,
    private readonly prefetchBytes: number,
    private readonly maxHandles: number,
    /** Files this big or bigger are streamed through an exec channel; null: SFTP reads only. */
    private readonly streaming: {
      minBytes: number;
      limiter: Slots;
      run: (
        path: string,
        position: number,
        length: number,
        write: (chunk: Buffer) => Promise<void>,
        signal?: AbortSignal,
      ) => Promise<number>;
      batch: NonNullable<ReadSource['batch']>;
    } | null,
  ) {
    if (streaming) this.batch = streaming.batch;
  }

  readonly batch?: ReadSource['batch'];

  async open(path: string): Promise<SourceFile | undefined> {
    // Handles still being closed count too: the server caps open handles.
    if (this.openHandles >= this.maxHandles) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
    this.openHandles++;
    const { conn, sftp } = this;
    let handle: Buffer;
    try {
      handle = await this.call<Buffer>(`opening ${path}`, (cb) => sftp.open(path, 'r', cb));
    } catch (error) {
      this.release();
      if (error instanceof ExecError && error.kind === 'not_found') return undefined;
      throw error;
    }
    const read = (position: number, length: number, into?: Buffer): Promise<Buffer> => {
      const buffer = into && into.length >= length ? into : Buffer.allocUnsafe(length);
      return this.call<number>(`reading ${path}`, (cb) =>
        sftp.read(handle, buffer, 0, length, position, (error, bytesRead) => cb(error, bytesRead)),
      ).then((bytesRead) => buffer.subarray(0, bytesRead));
    };
    const first = read(0, this.prefetchBytes);
    first.catch(() => undefined);
    let closed = false;
    let released = false;
    const releaseOnce = (): void => {
      if (released) return;
      released = true;
      this.release();
    };
    const close = async (): Promise<void> => {
      if (closed) return;
      closed = true;
      // Not awaited: the next file need not wait for this round trip.
      if (conn.closed) releaseOnce();
      else sftp.close(handle, releaseOnce);
    };
    try {
      const stats = await this.call<{ size: number; isFile(): boolean }>(
        `looking at ${path}`,
        (cb) => sftp.fstat(handle, cb),
      );
      if (!stats.isFile()) {
        await close();
        return undefined;
      }
      const streaming = this.streaming;
      const stream =
        streaming === null || stats.size < streaming.minBytes
          ? undefined
          : async (
              position: number,
              length: number,
              write: (chunk: Buffer) => Promise<void>,
              signal?: AbortSignal,
            ): Promise<number> => {
              const release = await streaming.limiter.acquire(signal);
              try {
                return await streaming.run(path, position, length, write, signal);
              } finally {
                release();
              }
            };
      return { size: stats.size, first, read, close, ...(stream ? { stream } : {}) };
    } catch (error) {
      await close();
      throw error;
    }
  }

  private release(): void {
    this.openHandles--;
    this.waiting.shift()?.();
  }
}

function disposedError(): ExecError {
  return new ExecError('aborted', 'the SSH executor was disposed');
}

/** `promise`, or an `aborted` rejection as soon as `signal` fires. */
function raceAbort<T>(
  promise: Promise<T>,
  signal: AbortSignal | undefined,
  what: string,
): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortedError(what, signal.reason));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortedError(what, signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** Joins small chunks into pieces of about `bytes` (fewer, larger channel writes). */
async function* coalesce(source: AsyncIterable<Buffer>, bytes: number): AsyncGenerator<Buffer> {
  let parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of source) {
    parts.push(chunk);
    size += chunk.length;
    if (size >= bytes) {
      yield Buffer.concat(parts, size);
      parts = [];
      size = 0;
    }
  }
  if (size > 0) yield Buffer.concat(parts, size);
}
