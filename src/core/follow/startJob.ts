/**
 * The start of a run's job on a pod that just became ready (a new run's, or a recovery's new
 * pod): the run directory uploaded, the job started, the run recorded `running`. One path for
 * both, so that what a started job guarantees is the same wherever it starts.
 */
import type { Executor } from '../exec/executor';
import type { PodCtx } from '../pod/context';
import { PodError } from '../pod/podError';
import { LEASE_FILE } from '../pod/podScripts';
import type { JobRef, RunRecord } from '../runs/runRecord';
import { LOCAL_ONLY } from '../runs/store';
import { cancelJob, jobScript, POD_JOB_ENV, startJob, type TrainerJob } from '../train/job';
import { TransferReporter } from '../transferProgress';

/** What starting a job works with: the runs store, the bus, the clock. */
export type JobCtx = Pick<PodCtx, 'store' | 'bus' | 'clock'>;

export interface StartJobOptions {
  /**
   * An abort before the job is recorded throws `interrupted` (a job started meanwhile is
   * cancelled first); without a signal the start runs to its end.
   */
  signal?: AbortSignal;
  /** The upload already under way on this executor (sent while the pod finished its boot). */
  uploaded?: Promise<void> | null;
  /** Told when this start's own upload is done. */
  onUploaded?: () => void;
  /** The job's secrets by variable name: on the launcher's stdin, never in a file or argument. */
  secrets?: Record<string, string>;
}

/**
 * Sends the run directory (minus what stays local) to the run's directory on the pod, its
 * progress published as `transfer` events (`upload`).
 */
export function uploadRunDir(deps: JobCtx, executor: Executor, run: RunRecord): Promise<void> {
  const reporter = new TransferReporter(deps.bus, deps.clock, run.id, 'upload');
  return reporter.around((onProgress) =>
    executor.upload(deps.store.runDir(run.id), run.remoteDir, {
      exclude: LOCAL_ONLY,
      onProgress,
      // What was left out (a link, a socket) and a drop sent again: said, never silent.
      onWarning: (message) => deps.bus.publish({ type: 'log', level: 'warn', message }),
    }),
  );
}

/**
 * The run directory sent as soon as a pod answers SSH (its watchdog's verdict and cost cap still
 * to come), once `filesReady` says the files are in place: hand `onReachable` to `startPod`, then
 * `uploadOn(executor)` to the job's start. A pod the walk gave up on takes its upload with it (its
 * executor is disposed); the next pod gets its own.
 */
export class UploadAhead {
  private executor: Executor | null = null;
  private upload: Promise<void> | null = null;

  constructor(
    private readonly deps: JobCtx,
    private readonly run: RunRecord,
    private readonly filesReady: Promise<unknown>,
    private readonly onUploaded?: () => void,
  ) {}

  readonly onReachable = (executor: Executor): void => {
    const upload = this.filesReady.then(() =>
      uploadRunDir(this.deps, executor, this.run).then(() => this.onUploaded?.()),
    );
    upload.catch(() => undefined);
    this.executor = executor;
    this.upload = upload;
  };

  /** The upload under way on `executor`, or null when none was sent on it. */
  uploadOn(executor: Executor): Promise<void> | null {
    return this.executor === executor ? this.upload : null;
  }

  /** Resolves once the last upload sent has ended, however it ended. */
  async settled(): Promise<void> {
    await Promise.allSettled([this.upload]);
  }
}

/**
 * Uploads the run directory to the run's remote directory (or waits for the upload already
 * sent), starts `job` with `env` and saves the run `running` with its job, which it returns. A
 * job that started but could not be recorded is cancelled (never a job nobody follows). The caller
 * deletes the pod when this throws.
 */
export async function startJobOnPod(
  deps: JobCtx,
  executor: Executor,
  run: RunRecord,
  job: TrainerJob,
  env: Record<string, string>,
  options: StartJobOptions = {},
): Promise<JobRef> {
  const signal = options.signal;
  throwIfInterrupted(signal);
  if (options.uploaded) {
    await options.uploaded;
  } else {
    await uploadRunDir(deps, executor, run);
    options.onUploaded?.();
  }
  throwIfInterrupted(signal);
  // The lease before the job: the watchdog reads a started job without a fresh lease as
  // abandoned, and past the deadline's snapshot lead (a short max_hours) its next tick would ask
  // the job for a snapshot before the follower's first renewal.
  await executor.writeFileAtomic(`${run.remoteDir}/${LEASE_FILE}`, '');
  const script = jobScript(job, { runDir: run.remoteDir, jobEnvFile: POD_JOB_ENV });
  const { pid } = await startJob(executor, {
    runDir: run.remoteDir,
    script,
    env,
    secrets: options.secrets,
  });
  if (signal?.aborted) {
    await cancelJob(executor, run.remoteDir).catch(() => undefined);
    throwIfInterrupted(signal);
  }
  const started: JobRef = { dir: run.remoteDir, pid, container: null };
  run.job = started;
  run.state = 'running';
  try {
    deps.store.saveRun(run);
  } catch (error) {
    await cancelJob(executor, run.remoteDir).catch(() => undefined);
    throw error;
  }
  return started;
}

function throwIfInterrupted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) {
    throw new PodError(
      'interrupted',
      'interrupted before the job started',
      'Start the run again when you are ready.',
    );
  }
}
