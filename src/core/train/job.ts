/**
 * The job on a target (local or a pod, through its executor): started detached so it survives the
 * client, its status read, cancelled by its process group. The scripts, and the files they keep in
 * the run directory, are ./jobScripts.ts.
 */
import { Redactor } from '../redact';
import { HintedError } from '../errors';
import type { Executor } from '../exec/executor';
import type { JobStatus } from '../events';
import {
  CANCEL_WAIT_S,
  cancelScript,
  checkName,
  JOB_LOG,
  launcherScript,
  remotePath,
  statusScript,
  type CancelWaits,
} from './jobScripts';

export * from './jobScripts';

export type JobErrorKind =
  /** The launcher failed (run directory missing, no setsid, …): the job did not start. */
  | 'start_failed'
  /** The launcher answered something that is not a usable PID (0, 1, text). */
  | 'bad_pid'
  /** The status script answered something that is not a status. */
  | 'bad_status'
  /** The group outlived SIGKILL, or the cancel script failed: `cancelling` is kept. */
  | 'cancel_failed';

const JOB_HINTS: Record<JobErrorKind, string> = {
  start_failed: 'Check the [training] command in overbrainer.toml, then train again.',
  bad_pid: 'Its job may not run: cancel it (`overbrainer train cancel`), then train again.',
  bad_status: 'Attach again (`overbrainer train attach`); if it stays so, cancel the run.',
  cancel_failed: 'Cancel it again, or delete its pod: `overbrainer pod rm RUN_ID --force`.',
};

export class JobError extends HintedError<JobErrorKind> {
  constructor(kind: JobErrorKind, message: string, options?: { cause?: unknown }) {
    super(kind, message, JOB_HINTS[kind], options);
    this.name = 'JobError';
  }
}

export interface StartJobOptions {
  runDir: string;
  script: string;
  env?: Record<string, string>;
  /** Secret values by variable name; sent on stdin, never in the command or an error text. */
  secrets?: Record<string, string>;
  signal?: AbortSignal;
  /** Limit for the launcher (it waits up to 10 s for the PID). Default 30 s. */
  timeoutMs?: number;
}

/**
 * Starts the job detached and returns its PID (= its process group). PIDs 0
 * and 1 are rejected: signalling them would hit every process or init.
 */
export async function startJob(
  executor: Executor,
  options: StartJobOptions,
): Promise<{ pid: number }> {
  const secrets = options.secrets ?? {};
  const names = Object.keys(secrets);
  for (const name of names) {
    checkName(name, 'secret');
    const value = secrets[name] ?? '';
    if (/[\r\n\0]/.test(value)) {
      throw new RangeError(
        `the value of secret ${name} contains a line break or NUL; it cannot be passed`,
      );
    }
  }
  const command = launcherScript({
    runDir: options.runDir,
    script: options.script,
    env: options.env ?? {},
    secretNames: names,
  });
  const stdin = names.map((name) => `${secrets[name] ?? ''}\n`).join('');
  const result = await executor.exec(command, {
    stdin,
    signal: options.signal,
    timeoutMs: options.timeoutMs ?? 30_000,
    maxOutputBytes: 64 * 1024,
  });
  const stderr = new Redactor(Object.values(secrets)).redact(result.stderr.toString('utf8')).trim();
  if (result.code !== 0) {
    throw new JobError(
      'start_failed',
      `the job did not start in ${options.runDir}: ${stderr || `launcher exited with ${result.code ?? result.signal}`}`,
    );
  }
  const out = result.stdout.toString('utf8').trim();
  const pid = /^\d{1,10}$/.test(out) ? Number(out) : NaN;
  if (!Number.isSafeInteger(pid) || pid <= 1) {
    throw new JobError(
      'bad_pid',
      `the job's launcher in ${options.runDir} answered ${JSON.stringify(out.slice(0, 40))} instead of a process ID; check ${remotePath(options.runDir, JOB_LOG)} on the target`,
    );
  }
  return { pid };
}

/** Parses the status script's answer. */
export function parseJobStatus(text: string): JobStatus | null {
  const word = text.trim();
  if (word === 'running') return { kind: 'running' };
  if (word === 'cancelled') return { kind: 'cancelled' };
  if (word === 'lost') return { kind: 'lost' };
  const exited = /^exited (\d{1,9})$/.exec(word);
  if (exited?.[1] !== undefined) return { kind: 'exited', code: Number(exited[1]) };
  return null;
}

/** The job's status from the status script (ExecError when the target cannot be reached). */
export async function jobStatus(
  executor: Executor,
  runDir: string,
  options: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<JobStatus> {
  const result = await executor.exec(statusScript(runDir), {
    signal: options.signal,
    timeoutMs: options.timeoutMs ?? 30_000,
    maxOutputBytes: 4096,
  });
  const text = result.stdout.toString('utf8');
  // The script prints its one line last, just before `exit 0`. A session that closed without an
  // exit status (seen from sshd with 20 runs followed on a loaded machine: every status look of a
  // run came back so, and its follow gave up) still answered when that whole line arrived.
  const answered =
    result.code === 0 ||
    (result.code === null && result.signal === null && !result.truncated && text.endsWith('\n'));
  const status = answered ? parseJobStatus(text) : null;
  if (status === null) {
    throw new JobError(
      'bad_status',
      `the job's status script in ${runDir} answered ${JSON.stringify(text.trim().slice(0, 60))} (exit ${result.code ?? result.signal}); is the target's /bin/sh POSIX?`,
    );
  }
  return status;
}

export type CancelResult =
  /** The group is gone and `cancelled` is written. */
  | 'cancelled'
  /** The job had already ended (exit_code or cancelled existed): nothing was signalled. */
  | 'already_ended';

/**
 * Cancels the job's process group (TERM, then KILL) and marks it cancelled.
 * Rejects with JobError `cancel_failed` when the group survives: the
 * `cancelling` marker stays, and the status keeps saying `running`.
 */
export async function cancelJob(
  executor: Executor,
  runDir: string,
  options: CancelWaits & { signal?: AbortSignal } = {},
): Promise<CancelResult> {
  const termS = options.termWaitS ?? CANCEL_WAIT_S;
  const killS = options.killWaitS ?? CANCEL_WAIT_S;
  const result = await executor.exec(cancelScript(runDir, { termWaitS: termS, killWaitS: killS }), {
    signal: options.signal,
    timeoutMs: (termS + killS + 30) * 1000,
    maxOutputBytes: 4096,
  });
  const out = result.stdout.toString('utf8').trim();
  if (result.code === 0 && out === 'cancelled') return 'cancelled';
  if (result.code === 0 && out === 'ended') return 'already_ended';
  const why = result.stderr.toString('utf8').trim().slice(0, 300);
  throw new JobError(
    'cancel_failed',
    `could not cancel the job in ${runDir}: ${why || `cancel script exited with ${result.code ?? result.signal}`}; it may still be running — cancel again, or remove its pod`,
  );
}
