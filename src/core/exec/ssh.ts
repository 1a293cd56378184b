/**
 * A pod over SSH (ssh2): one connection multiplexing exec channels and one
 * SFTP session, with the run's host key pinned (sshConnection.ts). A dropped
 * connection fails what was in flight with `connection`; the next call
 * reconnects. Secrets travel on stdin only, never in a command line. The
 * parts: the connection (sshConnection.ts), commands on channels
 * (sshChannel.ts), SFTP (sshSftp.ts), file transfer (sshTransfer.ts).
 */
import type { Clock } from '../clock';
import type { Timing } from '../timing';
import {
  CommandRunner,
  ExecError,
  type CommandOptions,
  type DownloadOptions,
  type ExecResult,
  type Executor,
  type UploadOptions,
} from './executor';
import { throwIfAborted } from './failures';
import { Channels, withPgidMarker, type RunOptions } from './sshChannel';
import {
  disposedError,
  openConnection,
  parseHostPublicKey,
  raceAbort,
  Slots,
  type Connection,
  type SshTarget,
} from './sshConnection';
import { Sftp } from './sshSftp';
import { downloadTree, type TransferLink, type TransferTuning } from './sshTransfer';
import { uploadVerified } from './sshUpload';

export { fingerprint, parseHostPublicKey, type SshTarget } from './sshConnection';

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
  transfer?: TransferTuning;
}

const DEFAULT_KEEPALIVE_MS = 5_000;
const DEFAULT_KEEPALIVE_COUNT = 2;
const DEFAULT_MAX_CHANNELS = 6;
/** An upload is tried this many times in all when the connection drops during it. */
const UPLOAD_ATTEMPTS = 3;
/** The wait before an upload is sent again (the connection is made again first). */
const UPLOAD_RETRY_DELAY_MS = 1_000;
/** A command that waited this long for one of the channels is said in the diagnostics. */
const SLOW_SLOT_MS = 10_000;

export class SshExecutor extends CommandRunner implements Executor, TransferLink {
  readonly kind = 'ssh' as const;
  readonly where: string;
  readonly sftp: Sftp;
  private readonly slots: Slots;
  private readonly channels: Channels;
  private conn: Connection | undefined;
  private connecting: Promise<Connection> | undefined;
  private disposed = false;
  /** Process groups of commands cut off by a drop, killed after the next connect. */
  private readonly orphans = new Set<number>();

  private constructor(private readonly options: SshExecutorOptions) {
    super();
    // A damaged record fails before anything runs (the user's own machine: its known_hosts keys).
    if (options.userHost === undefined) parseHostPublicKey(options.hostPublicKey ?? '');
    this.where = `${options.username}@${options.host}:${options.port}`;
    this.slots = new Slots(options.maxChannels ?? DEFAULT_MAX_CHANNELS);
    this.channels = new Channels(this.where, options.clock, this.orphans);
    this.sftp = new Sftp(this.where, (signal) => this.connection(signal));
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

  /**
   * Tells `listener` once if the connection up now drops (nothing when none is up: the next call
   * connects); returns its removal. A follower's pause ends at a node's drop.
   */
  onDrop(listener: () => void): () => void {
    const conn = this.conn;
    if (conn === undefined || conn.closed) return () => undefined;
    return conn.onDrop(() => listener());
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
    return openConnection({
      host: options.host,
      port: options.port,
      username: options.username,
      privateKey: options.privateKey,
      hostPublicKey: options.hostPublicKey,
      userHost: options.userHost,
      connectTimeoutMs: options.timing.connectTimeoutMs,
      keepaliveIntervalMs: options.keepaliveIntervalMs ?? DEFAULT_KEEPALIVE_MS,
      keepaliveCountMax: options.keepaliveCountMax ?? DEFAULT_KEEPALIVE_COUNT,
      where: this.where,
      log: (line) => this.log(line),
      disposed: () => this.disposed,
    });
  }

  /** Kills the process groups of commands a drop cut off (they would linger on the pod). */
  private killOrphans(conn: Connection): void {
    for (const pgid of [...this.orphans]) {
      this.orphans.delete(pgid);
      void this.channels.killGroup(conn, pgid).catch(() => undefined);
    }
  }

  protected runCommand(
    command: string,
    options: CommandOptions,
    what: string,
  ): Promise<ExecResult> {
    return this.run(command, { ...options, what });
  }

  /**
   * Runs `command` as `exec sh -c <command>` after printing the session's
   * process group id (sshd makes every session its own group), so an abort
   * or a timeout can kill the whole group from a second channel: closing a
   * pty-less channel alone would leave e.g. a `tail -f` running.
   */
  async run(command: string, options: RunOptions): Promise<ExecResult> {
    throwIfAborted(options.signal, options.what);
    const askedMs = this.options.clock.nowMs();
    const release = await this.slots.acquire(options.signal);
    const waitedMs = this.options.clock.nowMs() - askedMs;
    if (waitedMs >= SLOW_SLOT_MS) {
      this.log(`${options.what} waited ${Math.round(waitedMs / 1000)} s for a free channel`);
    }
    try {
      const conn = await this.connection(options.signal);
      throwIfAborted(options.signal, options.what);
      const channel = await this.channels.openExec(conn, withPgidMarker(command));
      return await this.channels.drive(conn, channel, options);
    } finally {
      release();
    }
  }

  readRange(path: string, offset: number, maxBytes: number): Promise<Buffer> {
    return this.sftp.readRange(path, offset, maxBytes);
  }

  writeFileAtomic(path: string, data: string | Buffer): Promise<void> {
    return this.sftp.writeFileAtomic(path, data);
  }

  /**
   * The verified upload, sent again when the connection drops (up to {@link UPLOAD_ATTEMPTS} in
   * all): the next attempt asks the pod what it already has, so the files that arrived whole are
   * not sent twice, and everything is checked on the pod as on a first attempt.
   */
  async upload(localDir: string, remoteDir: string, options: UploadOptions): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await uploadVerified(this, localDir, remoteDir, options);
        return;
      } catch (error) {
        if (!(error instanceof ExecError && error.kind === 'connection')) throw error;
        if (attempt >= UPLOAD_ATTEMPTS) throw error;
        options.onWarning?.(
          `the connection dropped during the upload (${error.message}); sending what the pod does not have yet (attempt ${attempt + 1} of ${UPLOAD_ATTEMPTS})`,
        );
        await this.options.clock
          .sleep(UPLOAD_RETRY_DELAY_MS, options.signal)
          .catch(() => throwIfAborted(options.signal, 'the upload'));
        throwIfAborted(options.signal, 'the upload');
      }
    }
  }

  download(
    remoteDir: string,
    localDir: string,
    files: readonly string[],
    options: DownloadOptions = {},
  ): Promise<void> {
    return downloadTree(this, this.options.transfer ?? {}, remoteDir, localDir, files, options);
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
