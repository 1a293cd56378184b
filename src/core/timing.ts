/**
 * The one timing object. It holds the production constants (those of the overbrainer CLI
 * 0.4.1, which this reproduces); tests scale it down with {@link scaleTiming}, never by
 * editing logic.
 * Everything is in milliseconds except where the name says seconds: those go
 * to the pod's shell scripts, which count whole seconds.
 */
export interface Timing {
  /** Client guard fires this long after the watchdog's deadline. */
  deadlineMarginMs: number;
  /** How long a renewed lease holds max_hours off (the watchdog's OVERBRAINER_LEASE_TTL). */
  leaseTtlMs: number;
  /** How often the following client renews the lease. */
  leaseRenewMs: number;
  /** A job with no new metric for this long is stalled: no more renewals. */
  stallMs: number;
  /** How often the lease holder looks at the time. */
  leaseTickMs: number;
  /** Looks in a row that must answer Runpod's 404 before a pod is gone. */
  goneLooks: number;
  /** Time between those looks (Timing::gone_interval). */
  goneIntervalMs: number;
  /** Poll of the pod while waiting for it to be reachable. */
  podPollMs: number;
  /** Limit for the pod to answer SSH with the pinned key. */
  readyTimeoutMs: number;
  /** Limit for the watchdog's verdict once SSH answers. */
  preflightTimeoutMs: number;
  /** Waits before the two pod-list looks that reconcile an ambiguous create. */
  reconcileFirstWaitMs: number;
  reconcileSecondWaitMs: number;
  /**
   * How long a reconcile keeps retrying a pod list that fails (never sending the create again
   * meanwhile) before it gives the run up as unconfirmed.
   */
  reconcileListLimitMs: number;
  /** How long a delete is confirmed for (GET until 404), and how often. */
  deleteConfirmMs: number;
  deletePollMs: number;
  /**
   * Job status poll while streaming does not work on the target; while the metrics stream speaks
   * the pod pushes the status on it instead, with a sign of life every ten of these.
   */
  statusPollMs: number;
  /** Consecutive failed follow polls tolerated; the next one gives up (the job keeps running). */
  watchFailuresTolerated: number;
  /** HTTP client. */
  connectTimeoutMs: number;
  requestTimeoutMs: number;
  createTimeoutMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  retryAfterCapMs: number;
  retries: number;
  /**
   * The whole of a read-only command's API calls (`pod ls`, `pod gpus`, `spend`'s bills, a pod
   * log's replay), retries included, the waits Runpod's rate limit asks for not counted: past it
   * the command fails naming the base URL (within 10 s of its start). Nothing depends on a
   * listing, so it never waits out the retries that the lifecycle's calls get.
   */
  readOnlyLimitMs: number;
  /**
   * The most a read-only command waits, in all, for Runpod's rate limit (429 `Retry-After`, a
   * spent quota): each wait is waited out and the call sent again; a longer one fails at once.
   */
  readOnlyRateLimitWaitMs: number;
  /**
   * How long a train waits for the project's budget lock (another train reading the spend and
   * the catalog) before it gives up saying so.
   */
  budgetLockWaitMs: number;
  /** The pod's watchdog (whole seconds: passed in its env). */
  watchdogIntervalS: number;
  watchdogProbeTries: number;
  watchdogProbeWaitS: number;
  /**
   * Snapshots (whole seconds, passed to the watchdog too). The deadline's snapshot request is
   * written this long before the deadline when nobody holds the lease (watchdog
   * OVERBRAINER_SNAPSHOT_LEAD), and the cost cap's `snapshot_at` is at least this long before
   * `cost_cap_at`.
   */
  snapshotLeadS: number;
  /** How long the watchdog waits for a snapshot it requested before its deadline delete (OVERBRAINER_SNAPSHOT_WAIT). */
  snapshotWaitS: number;
  /**
   * How often the disk policy gets a sample of the run's disk use: pushed by the pod's watcher on
   * the metrics stream; the client samples over SSH itself at this interval only while that
   * stream is down.
   */
  diskPollMs: number;
  /**
   * How often a following client looks for new checkpoints on the pod itself, only while the
   * metrics stream is down (the pod's watcher pushes them while it is up).
   */
  checkpointPollMs: number;
  /** How often the pod's watcher looks whether a checkpoint was saved (it pushes what changed). */
  checkpointLookMs: number;
  /**
   * How often the pod's watcher of a followed job samples its GPUs (`nvidia-smi`) and pushes the
   * figures on the metrics stream: at most once per 10 s, no SSH session of its own.
   */
  gpuSampleMs: number;
  /**
   * How long a GPU must stay under 5 % (or the job's memory under a quarter of the card) before
   * the run is told the GPU is wasted while the pod bills.
   */
  gpuIdleWindowMs: number;
  /**
   * Least of max_hours a run must have left to go on on a new pod after its pod died (the new
   * pod must boot, take the checkpoint and train a while); with less, recovery is refused.
   */
  recoveryMinLeftMs: number;
  /** The pod log stream's reconnect delay: the first, doubled up to the max, reset by a line. */
  podLogRetryBaseMs: number;
  podLogRetryMaxMs: number;
  /** A longer `Retry-After` on the log stream is honoured up to this. */
  podLogRetryAfterCapMs: number;
  /** Before a pod is deleted, its log stream is drained for at most this long. */
  podLogDrainMs: number;
  /** The size `runs/<id>/.pod/pod.log` is capped at (bytes; never scaled). */
  podLogCapBytes: number;
  /**
   * Not a time: bytes in one GB of a network volume's size (Runpod counts decimal GB), so the
   * disk policy turns the API's size into the bytes `du` counts. Never scaled; tests shrink it
   * to fill a small volume.
   */
  volumeGbBytes: number;
}

const MINUTE_MS = 60_000;

export const PRODUCTION_TIMING: Readonly<Timing> = Object.freeze({
  deadlineMarginMs: 5 * MINUTE_MS,
  leaseTtlMs: 15 * MINUTE_MS,
  leaseRenewMs: 5 * MINUTE_MS,
  stallMs: 30 * MINUTE_MS,
  leaseTickMs: 60_000,
  goneLooks: 3,
  goneIntervalMs: 10_000,
  podPollMs: 5_000,
  readyTimeoutMs: 15 * MINUTE_MS,
  preflightTimeoutMs: 3 * MINUTE_MS,
  reconcileFirstWaitMs: 5_000,
  reconcileSecondWaitMs: 15_000,
  reconcileListLimitMs: 10 * MINUTE_MS,
  deleteConfirmMs: 60_000,
  deletePollMs: 5_000,
  statusPollMs: 2_000,
  watchFailuresTolerated: 5,
  connectTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  createTimeoutMs: 60_000,
  retryBaseMs: 1_000,
  retryMaxMs: 60_000,
  retryAfterCapMs: 600_000,
  retries: 5,
  readOnlyLimitMs: 8_000,
  readOnlyRateLimitWaitMs: 30_000,
  budgetLockWaitMs: 2 * MINUTE_MS,
  watchdogIntervalS: 60,
  watchdogProbeTries: 5,
  watchdogProbeWaitS: 10,
  snapshotLeadS: 900,
  snapshotWaitS: 900,
  diskPollMs: 60_000,
  checkpointPollMs: 60_000,
  checkpointLookMs: 5_000,
  gpuSampleMs: 10_000,
  gpuIdleWindowMs: 10 * MINUTE_MS,
  recoveryMinLeftMs: 10 * MINUTE_MS,
  podLogRetryBaseMs: 500,
  podLogRetryMaxMs: 15_000,
  podLogRetryAfterCapMs: 60_000,
  podLogDrainMs: 5_000,
  podLogCapBytes: 20 * 1024 * 1024,
  volumeGbBytes: 1_000_000_000,
});

/**
 * Keys never scaled: counts and sizes, which are not durations; and the read-only commands'
 * limits, which only bound the API's real answer time and the real waits Runpod asks for (a
 * machine's load does not scale with the test: 10 s / 8 once failed a dry run whose catalog took
 * over 1.25 s on a loaded CI machine; a 429's `Retry-After` is in real seconds).
 */
const COUNTS = new Set<keyof Timing>([
  'goneLooks',
  'watchFailuresTolerated',
  'retries',
  'watchdogProbeTries',
  'volumeGbBytes',
  'podLogCapBytes',
  'readOnlyLimitMs',
  'readOnlyRateLimitWaitMs',
]);

/**
 * The production timing with every duration divided by `factor` (counts and the read-only
 * limit stay),
 * durations in seconds kept at least 1 s since the pod's scripts count whole
 * seconds. `overrides` then set single values.
 */
export function scaleTiming(factor: number, overrides: Partial<Timing> = {}): Timing {
  if (!(factor >= 1)) throw new RangeError(`timing factor must be >= 1, got ${factor}`);
  const scaled = { ...PRODUCTION_TIMING } as Timing;
  for (const key of Object.keys(scaled) as (keyof Timing)[]) {
    if (COUNTS.has(key)) continue;
    const value = PRODUCTION_TIMING[key] / factor;
    scaled[key] = Math.max(1, Math.round(value));
  }
  return { ...scaled, ...overrides };
}

/** The hidden test hook: every production duration divided by this variable's value (≥ 1). */
export const TIMING_SCALE_VARIABLE = 'OVERBRAINER_TIMING_SCALE';

/**
 * The timing the environment asks for: production, or scaled by {@link TIMING_SCALE_VARIABLE}.
 * A value that is not a number of at least 1 gives production timing and a `problem` to show
 * (the CLI refuses it; the extension ignores it rather than fail its activation).
 */
export function timingFromEnv(env: Readonly<Record<string, string | undefined>>): {
  timing: Timing;
  problem: string | null;
} {
  const raw = env[TIMING_SCALE_VARIABLE]?.trim();
  if (raw === undefined || raw === '') return { timing: { ...PRODUCTION_TIMING }, problem: null };
  const factor = Number(raw);
  if (!Number.isFinite(factor) || factor < 1) {
    return {
      timing: { ...PRODUCTION_TIMING },
      problem: `${TIMING_SCALE_VARIABLE}: must be a number of at least 1 (a test hook), not ${JSON.stringify(raw.slice(0, 20))}. Unset it.`,
    };
  }
  return { timing: scaleTiming(factor), problem: null };
}

/**
 * Least time between two `transfer` progress events of one transfer (its first and last always
 * go): four a second at most, so a GiB in 64 KiB chunks does not flood the bus. Never scaled.
 */
export const TRANSFER_REPORT_MS = 250;

/**
 * A transfer is shown live (the CLI's redrawn line) only once it has lasted this long: a
 * shorter one shows its final line alone. Never scaled.
 */
export const TRANSFER_LIVE_AFTER_MS = 1_000;
