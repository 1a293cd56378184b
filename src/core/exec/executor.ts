import type { Disposable } from '../disposable';
import { HintedError } from '../errors';
import type { TransferCallback } from '../transferProgress';

/** What an executed command gave back. `code` is null when it died of a signal. */
export interface ExecResult {
  code: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: Buffer;
  /** Set when output went beyond `maxOutputBytes` and the rest was dropped. */
  truncated?: boolean;
  /** Over SSH: whether the channel was slow to open, as on a link across the internet. */
  distant?: boolean;
}

/** Output kept per stream when `maxOutputBytes` is not given. */
export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

export interface ExecOptions {
  /** Written to the command's stdin, then stdin is closed (secrets travel this way, never in argv). */
  stdin?: string | Buffer;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** Output beyond this many bytes per stream is dropped (the result says so via `truncated`). */
  maxOutputBytes?: number;
}

export interface StreamOptions {
  /** Aborting kills the command (its whole process group) and rejects with `aborted`. */
  signal?: AbortSignal;
  /** Each chunk of stdout as it arrives. */
  onStdout: (chunk: Buffer) => void;
  onStderr?: (chunk: Buffer) => void;
}

/** One run of a command, as an exec or a stream is run: the exec's options, the stream's handlers. */
export interface CommandOptions extends ExecOptions {
  onStdout?: (chunk: Buffer) => void;
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

/** What a user can do about each kind of failure, where the caller that knows the target says no more. */
const EXEC_HINTS: Record<ExecErrorKind, string> = {
  connection:
    'Check that the target is up and reachable (a pod: `overbrainer pod ls`), then run the command again.',
  host_key:
    "Nothing was sent: the address answers with a host key other than the pod's own. Remove the run's pod (`overbrainer pod rm` with the run's ID) and train again.",
  auth: "The target refused the run's key: remove the run's pod (`overbrainer pod rm` with the run's ID) and train again.",
  timeout: 'Check the network and that the target still runs, then run the command again.',
  not_found: 'Check that the path exists on the target (the job may not have written it yet).',
  io: 'Check the space and the permissions where the message says, then run the command again.',
  aborted: 'It was stopped as asked; run the command again to go on.',
};

/** The message says what failed; the caller that knows the target may say what to do. */
export class ExecError extends HintedError<ExecErrorKind> {
  /** `hint` replaces the kind's own next action where the caller knows a better one. */
  constructor(kind: ExecErrorKind, message: string, options?: { cause?: unknown; hint?: string }) {
    super(kind, message, options?.hint ?? EXEC_HINTS[kind], options);
    this.name = 'ExecError';
  }
}

export interface UploadOptions {
  /** Top-level names of the local directory never uploaded (`ssh`, `pod.json`, `.pod`, …). */
  exclude: readonly string[];
  signal?: AbortSignal;
  /** Told about what was skipped (symlinks are never followed, sockets/devices never sent). */
  onWarning?: (message: string) => void;
  /**
   * The bytes and files sent so far of those to send (the ones the target already has are not
   * counted): once the totals are known, then as the bytes go. The local target copies without.
   */
  onProgress?: TransferCallback;
}

export interface DownloadProgress {
  file: string;
  bytesDone: number;
  bytesTotal: number;
}

/** One file of a download, reported as soon as it is complete on disk. */
export type DownloadedFile =
  | {
      file: string;
      missing?: false;
      /** Size of the local file. */
      bytes: number;
      /** SHA-256 (hex) of the local file's bytes, computed while they were written. */
      sha256: string;
      /** Bytes taken from an earlier partial download instead of the wire. */
      resumedBytes: number;
    }
  /** The file no longer exists on the target. */
  | { file: string; missing: true };

export interface DownloadOptions {
  signal?: AbortSignal;
  onProgress?: (p: DownloadProgress) => void;
  /**
   * Called once per file when it is complete (or found missing). When given,
   * missing files are reported here instead of rejecting the download.
   */
  onFile?: (file: DownloadedFile) => void;
  /**
   * Where unfinished files wait (`<partDir>/<file>`), so a later download of
   * the same file resumes from them. Default: the sibling `<localDir>.part`.
   */
  partDir?: string;
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
  /**
   * Runs `command` and hands its stdout over as it arrives (e.g. `tail -f`);
   * resolves when it ends (`stdout` empty: it was handed over). Aborting the
   * signal kills it on the target and rejects with `aborted`.
   */
  stream(command: string, options: StreamOptions): Promise<ExecResult>;
  /** Up to `maxBytes` of `path` from byte `offset`; empty at the end. `not_found` when missing. */
  readRange(path: string, offset: number, maxBytes: number): Promise<Buffer>;
  /** Writes `path` atomically (temp + rename), creating its directory. */
  writeFileAtomic(path: string, data: string | Buffer): Promise<void>;
  /** Copies the contents of `localDir` into `remoteDir` (created), minus `exclude`. */
  upload(localDir: string, remoteDir: string, options: UploadOptions): Promise<void>;
  /**
   * Copies `files` (relative paths, already checked safe) from `remoteDir` into
   * `localDir`, resuming a partial file where possible. Never follows or
   * creates a local symlink. A dropped connection rejects with `connection`
   * and keeps the partial files for the next call.
   */
  download(
    remoteDir: string,
    localDir: string,
    files: readonly string[],
    options?: DownloadOptions,
  ): Promise<void>;
}

/**
 * The two ways an executor runs a command, collected ({@link Executor.exec}) and streamed
 * ({@link Executor.stream}), as one run each: an executor says how it runs one command
 * (`runCommand`; `what` names it in errors, "the command" or "the streamed command").
 */
export abstract class CommandRunner {
  protected abstract runCommand(
    command: string,
    options: CommandOptions,
    what: string,
  ): Promise<ExecResult>;

  exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    return this.runCommand(command, options, 'the command');
  }

  stream(command: string, options: StreamOptions): Promise<ExecResult> {
    const { signal, onStdout, onStderr } = options;
    return this.runCommand(command, { signal, onStdout, onStderr }, 'the streamed command');
  }
}
