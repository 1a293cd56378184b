/**
 * An interactive shell on a pod over Overbrainer's own SSH client (`ssh_client = "builtin"`):
 * the same pinned host key and run key as every other connection of the product, no `ssh`
 * binary, no configuration file. The VS Code terminal and `overbrainer runs ssh` drive it.
 */
import type { ClientChannel, PseudoTtyOptions } from 'ssh2';
import { ExecError } from './executor';
import { openConnection, type Connection, type SshTarget } from './sshConnection';

export interface ShellSize {
  columns: number;
  rows: number;
}

export interface OpenShellOptions extends SshTarget {
  /** Bounds the connect (TCP + handshake + auth). */
  connectTimeoutMs: number;
  /** A pseudo-terminal of this size and `TERM` (a terminal on this side), or null (a pipe). */
  pty: (ShellSize & { term: string }) | null;
  /** What the shell writes (its stdout and stderr, as a terminal shows both). */
  onOutput: (data: Buffer) => void;
  /** Diagnostics (never holds a key or what is typed). */
  onLog?: (line: string) => void;
}

export interface ShellSession {
  /** Sends what the user typed. */
  write(data: string | Buffer): void;
  /** Tells the shell its terminal's new size (nothing without a pty). */
  resize(size: ShellSize): void;
  /** Ends the input (a pipe's end of file). */
  end(): void;
  /** Closes the shell and its connection. */
  close(): void;
  /** The shell's exit code once it ended (null: killed by a signal, or the connection dropped). */
  readonly done: Promise<number | null>;
}

const KEEPALIVE_MS = 15_000;
const KEEPALIVE_COUNT = 3;

/**
 * Connects to `options` (pinned host key, run key) and starts a login shell. Rejects with an
 * ExecError (`host_key`, `auth`, `timeout`, `connection`) when it cannot.
 */
export async function openShell(options: OpenShellOptions): Promise<ShellSession> {
  const where = `${options.username}@${options.host}:${options.port}`;
  let closing = false;
  const conn: Connection = await openConnection({
    ...options,
    keepaliveIntervalMs: KEEPALIVE_MS,
    keepaliveCountMax: KEEPALIVE_COUNT,
    where,
    log: (line) => options.onLog?.(line),
    disposed: () => closing,
  });
  const pty: PseudoTtyOptions | false =
    options.pty === null
      ? false
      : { term: options.pty.term, cols: options.pty.columns, rows: options.pty.rows };
  let channel: ClientChannel;
  try {
    channel = await new Promise<ClientChannel>((resolve, reject) => {
      conn.client.shell(pty, (error, stream) => (error ? reject(error) : resolve(stream)));
    });
  } catch (error) {
    conn.client.end();
    throw new ExecError('connection', `${where} refused a shell: ${(error as Error).message}`, {
      cause: error,
    });
  }
  channel.on('data', (data: Buffer) => options.onOutput(data));
  channel.stderr.on('data', (data: Buffer) => options.onOutput(data));
  const done = new Promise<number | null>((resolve) => {
    let code: number | null = null;
    channel.on('exit', (exitCode: number | null) => {
      code = typeof exitCode === 'number' ? exitCode : null;
    });
    channel.on('close', () => {
      closing = true;
      conn.client.end();
      resolve(code);
    });
    conn.onDrop(() => resolve(code));
  });
  return {
    write: (data) => {
      if (!closing) channel.write(data);
    },
    resize: (size) => {
      if (!closing && options.pty !== null) channel.setWindow(size.rows, size.columns, 0, 0);
    },
    end: () => {
      if (!closing) channel.end();
    },
    close: () => {
      closing = true;
      channel.close();
      conn.client.end();
    },
    done,
  };
}
