import type { Disposable } from '../disposable';

/** What an executed command gave back. `code` is null when it died of a signal. */
export interface ExecResult {
  code: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: Buffer;
}

export interface ExecOptions {
  /** Written to the command's stdin, then stdin is closed (secrets travel this way, never in argv). */
  stdin?: string | Buffer;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** Output beyond this many bytes per stream is dropped (the result says so via `truncated`). */
  maxOutputBytes?: number;
}

export interface StreamOptions {
  signal?: AbortSignal;
  /** Each chunk of stdout as it arrives. */
  onStdout: (chunk: Buffer) => void;
  onStderr?: (chunk: Buffer) => void;
}

export type ExecErrorKind =
  | 'connection' // could not connect, or the connection dropped
  | 'host_key' // the target's host key is not the pinned one: nothing was sent
  | 'auth' // the target refused our key
  | 'timeout'
  | 'not_found' // a remote path does not exist
  | 'io'
  | 'aborted';

export class ExecError extends Error {
  constructor(
    readonly kind: ExecErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ExecError';
  }
}

export interface UploadOptions {
  /** Top-level names of the local directory never uploaded (`ssh`, `pod.json`, `.pod`, …). */
  exclude: readonly string[];
  signal?: AbortSignal;
}

export interface DownloadProgress {
  file: string;
  bytesDone: number;
  bytesTotal: number;
}

/**
 * Where a run's job lives: this machine (local target) or a pod over SSH.
 * Paths are absolute paths on the target. Every method rejects with an
 * {@link ExecError}.
 */
export interface Executor extends Disposable {
  readonly kind: 'local' | 'ssh';
  /** Runs `command` under `sh -c` on the target and collects its output. */
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
  /** Runs `command` and hands its stdout over as it arrives (e.g. `tail -f`); resolves when it ends. */
  stream(command: string, options: StreamOptions): Promise<ExecResult>;
  /** Up to `maxBytes` of `path` from byte `offset`; empty at the end. `not_found` when missing. */
  readRange(path: string, offset: number, maxBytes: number): Promise<Buffer>;
  /** Writes `path` atomically (temp + rename), creating its directory. */
  writeFileAtomic(path: string, data: string | Buffer): Promise<void>;
  /** Copies the contents of `localDir` into `remoteDir` (created), minus `exclude`. */
  upload(localDir: string, remoteDir: string, options: UploadOptions): Promise<void>;
  /**
   * Copies `files` (relative paths, already checked safe) from `remoteDir` into
   * `localDir`, resuming a partial file where possible.
   */
  download(
    remoteDir: string,
    localDir: string,
    files: readonly string[],
    options?: { signal?: AbortSignal; onProgress?: (p: DownloadProgress) => void },
  ): Promise<void>;
}
