/**
 * What the pod's watchdog does with a running job's pod while no client follows it, in the one
 * wording every message uses (stopping the follow, a lost connection, the API unreachable while
 * the pod cannot be looked up): a kept pod stays; otherwise the watchdog deletes it at its
 * deadline, or when the lease renewed last runs out if that is later, or once its retrieve grace
 * passes after the job ends, unless a client renews the lease.
 */
import { rfc3339 } from '../clock';
import { PRODUCTION_TIMING } from '../timing';

/** What the words need of a pod record. */
export interface FollowlessView {
  keep: boolean;
  /** The watchdog's deadline (seconds since the epoch); null when kept. */
  deadlineUnixS: number | null;
}

/**
 * The watchdog's part while nobody follows; `leaseEndMs`: when the lease renewed last runs out
 * at the latest.
 */
export function watchdogWhileNobodyFollows(pod: FollowlessView, leaseEndMs: number): string {
  if (pod.keep || pod.deadlineUnixS === null) {
    return 'its pod is kept: nothing deletes it until you remove it';
  }
  const deadlineMs = pod.deadlineUnixS * 1000;
  const when =
    leaseEndMs > deadlineMs
      ? `${rfc3339(leaseEndMs)}, when the lease renewed last runs out (its deadline has passed)`
      : `its deadline, ${rfc3339(deadlineMs)}`;
  return `if nobody follows, the pod's watchdog deletes it at ${when}, or once its retrieve grace passes after the job ends, unless a client renews its lease`;
}

/** The same, said of a job whose connection this client lost (the API could not be asked). */
export function whileNobodyFollows(
  pod: FollowlessView,
  run: { id: string },
  leaseEndMs: number,
): string {
  return `the job keeps running; ${watchdogWhileNobodyFollows(pod, leaseEndMs)} ("overbrainer train attach ${run.id}" follows it again)`;
}

/**
 * The words VS Code and the CLI both say when following a run stopped on an error while the run
 * is still `running` on its pod (a lost connection, not a failed run): the job goes on, `attach`
 * says how to follow it again, and what the pod's watchdog does while nobody follows
 * (`deadlineUnixS`: the pod's max_hours deadline, null for a kept pod; the lease renewed last
 * runs out `leaseTtlMs` after `nowMs` at the latest).
 */
export function followLostWords(
  runId: string,
  reason: string,
  deadlineUnixS: number | null,
  nowMs: number,
  attach: string,
  leaseTtlMs = PRODUCTION_TIMING.leaseTtlMs,
): string {
  const watchdog = watchdogWhileNobodyFollows(
    { keep: deadlineUnixS === null, deadlineUnixS },
    nowMs + leaseTtlMs,
  );
  return `Lost the connection to run ${runId} (${reason}). The run goes on on its pod: ${attach}; ${watchdog}.`;
}
