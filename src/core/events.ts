import type { Disposable } from './disposable';

/** One training metric line of the trainer protocol (`event: "log"`). */
export interface TrainMetric {
  /** The trainer's clock, seconds (Unix time from the plugin). */
  time: number;
  step: number;
  epoch?: number | null;
  maxSteps?: number | null;
  loss?: number | null;
  evalLoss?: number | null;
  learningRate?: number | null;
  gradNorm?: number | null;
  /** Seconds of work the job does after its last step (a LoRA merge), when it says (`after_s`). */
  afterS?: number | null;
  /**
   * Every other finite number of the line, by its key as the job wrote it (`accuracy`, `bleu`):
   * what a sweep may name as its objective. Absent when the line has none.
   */
  values?: Readonly<Record<string, number>>;
}

/** One GPU at one moment (`nvidia-smi`). A figure the card does not report (`[N/A]`) is null. */
export interface GpuReading {
  index: number;
  name: string;
  utilizationPct: number | null;
  memoryUsedMiB: number | null;
  memoryTotalMiB: number | null;
  temperatureC: number | null;
  powerW: number | null;
  powerLimitW: number | null;
}

/** All GPUs of a run's target at one moment. */
export interface GpuSample {
  /** The client's clock when the sample arrived (ms since the epoch). */
  timeMs: number;
  gpus: GpuReading[];
}

/** Why a pod is deleted. Appears in events and logs only, never in pod.json. */
export type DeleteReason =
  | 'retrieved'
  | 'not_ready'
  | 'refused'
  | 'bootstrap_failed'
  | 'interrupted'
  | 'deadline'
  | 'requested'
  | 'duplicate'
  | 'local_ssh'
  | 'cost_cap'
  | 'cost_cap_unset'
  /** It died under a running job (EXITED): deleted before the run goes on on a new pod. */
  | 'died';

/** What happens to a run's pod, step by step, rendered as `pod: …` lines. */
export type PodStatusEvent =
  | { kind: 'creating'; name: string; gpuType: string }
  | { kind: 'unavailable'; gpuType: string; reason: string }
  | {
      kind: 'created';
      podId: string;
      gpuType: string;
      dataCenter: string | null;
      costPerHourUsd: number | null;
    }
  | { kind: 'ready'; podId: string; afterMs: number; deadline: string | null }
  | { kind: 'deleting'; podId: string; reason: DeleteReason }
  | { kind: 'deleted'; podId: string; uptimeMs: number | null; estimatedSpendUsd: number | null }
  | { kind: 'kept'; podId: string };

/** The job's status as the status script reports it. */
export type JobStatus =
  { kind: 'running' } | { kind: 'exited'; code: number } | { kind: 'cancelled' } | { kind: 'lost' };

/** Which way a transfer goes: the run directory to the pod, the results home, a checkpoint home. */
export type TransferDirection = 'upload' | 'retrieve' | 'checkpoint';

/**
 * Where a transfer stands. `start` and the last (`done` or `failed`) always come; `progress`
 * at most a few times a second in between (core/transferProgress.ts); `checking` once every byte
 * went, while the other side's hashes are awaited (the pod's check of an upload, its manifest
 * for a retrieval), which can take seconds for a GiB.
 */
export interface TransferProgress {
  direction: TransferDirection;
  phase: 'start' | 'progress' | 'checking' | 'done' | 'failed';
  bytesDone: number;
  /** Null while unknown (the pod's listing of sizes has not come yet, or could not be made). */
  bytesTotal: number | null;
  filesDone: number;
  filesTotal: number | null;
  /** Smoothed rate while it runs; the average over the whole transfer in `done`. */
  rateBytesPerS: number | null;
  etaMs: number | null;
  elapsedMs: number;
}

export type RunState = 'preparing' | 'running' | 'succeeded' | 'failed' | 'cancelled' | 'stopped';

/**
 * Why a run ended (`end.cause` in run.json), each with where a run ends so: what a front end
 * decides on; the run's message is only shown (runs/runEnd.ts reads and writes it).
 */
export const RUN_END_CAUSES = [
  /** The job succeeded and its results came home (`succeeded`). */
  'completed',
  /** The job saved a snapshot and stopped (asked, or before a limit); it came home (`stopped`). */
  'snapshotted',
  /** The user cancelled the job; what it wrote came home (`cancelled`). */
  'cancelled',
  /** The job failed: a non-zero exit, no exit code, no metric line, nothing under output/. */
  'job_failed',
  /** The job ended but its results did not come home (the state says how the job ended). */
  'not_retrieved',
  /** The pod was deleted at `max_hours` before the job ended. */
  'deadline',
  /** The pod was deleted once `max_cost_usd` was spent, before the job ended. */
  'cost_cap',
  /** The pod vanished under the job (not by our hand) and the run was not recovered. */
  'pod_gone',
  /**
   * The pod's host stopped answering under the job (listed RUNNING, no SSH answer however often
   * asked): the client deleted it, its own watchdog being as silent, and the run was not recovered.
   */
  'host_lost',
  /** `pod rm --force` (or a sweep ending the trial) deleted the pod before its results were retrieved. */
  'pod_removed',
  /** The pod died mid-job and no new pod could take the job up. */
  'recovery_failed',
  /** No pod could be had or made ready. */
  'provision_failed',
  /** The run failed before its job started (its files, the upload, the launch). */
  'start_failed',
  /** Stopped by the user (or its client gone) before the job started. */
  'interrupted',
  /** An older record whose words say no known cause. */
  'unknown',
] as const;

export type RunEndCause = (typeof RUN_END_CAUSES)[number];

/** Everything the core tells its listeners (the extension, the CLI, tests). */
export type CoreEvent =
  | { type: 'pod'; runId: string; status: PodStatusEvent }
  /** A line of the run's pod log (redacted), as it is captured. */
  | { type: 'podLog'; runId: string; podId: string; source: 'container' | 'system'; line: string }
  | { type: 'metric'; runId: string; metric: TrainMetric }
  /** A sample of the GPUs of a followed run's pod (kept in its `.pod/gpu.json`). */
  | { type: 'gpu'; runId: string; sample: GpuSample }
  | ({ type: 'transfer'; runId: string } & TransferProgress)
  | { type: 'jobStatus'; runId: string; status: JobStatus }
  | {
      type: 'runState';
      runId: string;
      state: RunState;
      message: string | null;
      /** Why the run ended; null while it goes on. */
      cause: RunEndCause | null;
    }
  | { type: 'runWatched'; runId: string }
  /** What Runpod billed the run's ended pod was read and saved in its pod.json. */
  | { type: 'billed'; runId: string; podId: string; billedUsd: number }
  | {
      type: 'warning';
      runId: string | null;
      /** Stable code the UI keys notifications on (e.g. `overrun`, `strays`, `awaiting_retrieval`). */
      code: string;
      message: string;
    }
  | { type: 'log'; level: 'trace' | 'debug' | 'info' | 'warn' | 'error'; message: string };

export type Listener = (event: CoreEvent) => void;

/**
 * A synchronous typed bus. A listener that throws is isolated: the others
 * still receive the event and the publisher never sees the error.
 */
export class EventBus {
  private listeners = new Set<Listener>();

  on(listener: Listener): Disposable {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  publish(event: CoreEvent): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(event);
      } catch {
        // Listeners render; they must never break the lifecycle.
      }
    }
  }
}
