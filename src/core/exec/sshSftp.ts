/**
 * SFTP on one SSH connection: the session (one per connection, reopened when
 * the server ends it), calls that fail at once when the connection drops,
 * range reads and atomic writes.
 */
import { randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import type { SFTPWrapper } from 'ssh2';
import { ExecError } from './executor';
import { raceAbort, type Connection } from './sshConnection';
import { describeError } from '../errors';

/** SFTP status codes (draft-ietf-secsh-filexfer-02). */
const SFTP_NO_SUCH_FILE = 2;

/** SFTP calls over the executor's current connection. */
export class Sftp {
  constructor(
    /** `user@host:port`, for messages. */
    private readonly where: string,
    /** The live connection (reconnecting when needed). */
    private readonly connection: (signal?: AbortSignal) => Promise<Connection>,
  ) {}

  async session(signal?: AbortSignal): Promise<{ conn: Connection; sftp: SFTPWrapper }> {
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
  error(conn: Connection, error: unknown, what: string): ExecError {
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
    const message = describeError(error);
    if (code === SFTP_NO_SUCH_FILE) {
      return new ExecError('not_found', `${what} failed: no such file on ${this.where}`, {
        cause: error,
      });
    }
    return new ExecError('io', `${what} failed on ${this.where} (${message})`, { cause: error });
  }

  /** Runs one SFTP call, failing at once when the connection drops. */
  call<T>(
    conn: Connection,
    what: string,
    call: (callback: (error: Error | undefined | null, value?: T) => void) => void,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const undo = conn.onDrop(reject);
      try {
        call((error, value) => {
          undo();
          if (error) reject(this.error(conn, error, what));
          else resolve(value as T);
        });
      } catch (error) {
        undo();
        reject(this.error(conn, error, what));
      }
    });
  }

  async readRange(path: string, offset: number, maxBytes: number): Promise<Buffer> {
    const { conn, sftp } = await this.session();
    const what = `reading ${path}`;
    const handle = await this.call<Buffer>(conn, what, (cb) => sftp.open(path, 'r', cb));
    try {
      const buffer = Buffer.allocUnsafe(Math.max(0, maxBytes));
      let done = 0;
      while (done < buffer.length) {
        const length = buffer.length - done;
        const read = await this.call<number>(conn, what, (cb) =>
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
    const { conn, sftp } = await this.session();
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    const dir = posix.dirname(path);
    const temp = posix.join(dir, `.${posix.basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
    const what = `writing ${path}`;
    const openTemp = (): Promise<Buffer> =>
      this.call<Buffer>(conn, what, (cb) => sftp.open(temp, 'wx', { mode: 0o644 }, cb));
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
        await this.call<void>(conn, what, (cb) =>
          sftp.write(handle, bytes, done, length, done, (error) => cb(error)),
        );
      }
      await this.call<void>(conn, what, (cb) => {
        try {
          sftp.ext_openssh_fsync(handle, (error) => cb(error));
        } catch {
          cb(undefined); // no fsync extension: the rename still makes it atomic
        }
      });
      await this.call<void>(conn, what, (cb) => sftp.close(handle, (error) => cb(error)));
      await this.call<void>(conn, what, (cb) => {
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
        const stats = await this.call<{ isDirectory(): boolean }>(conn, `creating ${dir}`, (cb) =>
          sftp.stat(current, cb),
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
        await this.call<void>(conn, `creating ${path}`, (cb) =>
          sftp.mkdir(path, (error) => cb(error)),
        );
      } catch (error) {
        // Someone else may have created it meanwhile.
        const stats = await this.call<{ isDirectory(): boolean }>(conn, `creating ${path}`, (cb) =>
          sftp.stat(path, cb),
        ).catch(() => undefined);
        if (!stats?.isDirectory()) throw error;
      }
    }
  }
}
