/**
 * A pod's end once its job ended: the pod's own logs copied home, the retrieved
 * marker written before the delete (so its watchdog deletes it even if ours fails), or the pod
 * left to its retrieve grace when the results did not come home; and keeping or releasing a pod
 * at runtime (the keep marker its watchdog honours).
 */
import { type Executor } from '../exec/executor';
import { shQuote } from '../exec/shell';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import { log, warn, type PodCtx } from './context';
import { sshCommand } from './keys';
import { rfc3339 } from '../clock';
import { copyPodLogs } from './podLogFiles';
import { DEADLINE_FILE, KEEP_MARKER, LEASE_FILE, RETRIEVED_MARKER } from './podScripts';
import { forgetKeys, noteStrays, remove, sweep } from './remove';
import { describeError } from '../errors';

/** Reads the keep flag (and a release's deadline) another process (the CLI, another window) may have changed. */
export function syncKeep(ctx: PodCtx, pod: PodRecord): void {
  try {
    const fresh = ctx.store.loadPod(pod.runId);
    if (fresh) {
      pod.keep = fresh.keep;
      // A release gave the pod, kept at its creation, a deadline (armReleaseDeadline).
      if (pod.deadlineUnixS === null && fresh.podId === pod.podId && fresh.deadlineUnixS !== null) {
        pod.deadlineUnixS = fresh.deadlineUnixS;
        pod.deadline = fresh.deadline;
      }
    }
  } catch {
    // A damaged pod.json is reported elsewhere; keep what we know.
  }
}

/** What became of a pod once its job ended. */
export type Ending = 'deleted' | 'kept' | 'awaiting_retrieval';

/**
 * Ends the pod once its job ended, after copying the watchdog's and bootstrap's
 * logs. Only when the results were `retrieved` (every file downloaded and
 * verified) is the retrieved marker written on the pod, first (so its
 * watchdog deletes it even if our delete fails), then the pod is deleted
 * unless kept, strays swept, keys forgotten. Otherwise the pod is left to its
 * watchdog's retrieve grace (a kept pod stays kept), with a warning.
 */
export async function endPod(
  ctx: PodCtx,
  pod: PodRecord,
  executor: Executor,
  run: RunRecord,
  retrieved: boolean,
): Promise<Ending> {
  await copyPodLogs(ctx, executor, run);
  syncKeep(ctx, pod);
  if (!retrieved) return unretrieved(ctx, pod, run.id);
  try {
    await executor.writeFileAtomic(`${run.remoteDir}/${RETRIEVED_MARKER}`, '');
  } catch (error) {
    log(
      ctx,
      'warn',
      `cannot mark the results of run ${run.id} retrieved on the pod: ${describeError(error)}`,
    );
  }
  if (pod.keep) {
    pod.state = 'kept';
    ctx.store.savePod(pod);
    if (pod.podId !== null) {
      ctx.bus.publish({ type: 'pod', runId: run.id, status: { kind: 'kept', podId: pod.podId } });
    }
    log(ctx, 'info', `pod ${pod.podId ?? ''} kept: ${sshCommand(run.id)}`);
    return 'kept';
  }
  await remove(ctx, pod, 'retrieved', 'client');
  noteStrays(ctx, pod, await sweep(ctx, run.id, null, undefined, pod));
  if (!pod.mayHaveOtherPods()) await forgetKeys(ctx, run.id);
  return 'deleted';
}

function unretrieved(ctx: PodCtx, pod: PodRecord, runId: string): Ending {
  const name = pod.podId ?? '(none)';
  let stays: string;
  let ending: Ending;
  if (pod.keep) {
    pod.state = 'kept';
    stays = 'stays (kept), nothing deletes it automatically';
    ending = 'kept';
  } else {
    pod.state = 'awaiting_retrieval';
    stays = "stays until its watchdog's retrieve grace ends";
    ending = 'awaiting_retrieval';
  }
  ctx.store.savePod(pod);
  warn(
    ctx,
    runId,
    'awaiting_retrieval',
    `the results of run ${runId} were not retrieved: pod ${name} ${stays}; retrieve them with \`overbrainer train attach ${runId}\`, or remove the pod with \`overbrainer pod rm ${runId}\``,
  );
  return ending;
}

/**
 * Keeps the running (or awaiting) pod of a run at runtime, or releases it: a
 * keep marker on the pod that its watchdog honours, and `keep` in pod.json.
 * Released, the pod's original deadline and graces apply again.
 */
export async function setKeep(
  ctx: PodCtx,
  pod: PodRecord,
  run: RunRecord,
  executor: Executor,
  keep: boolean,
): Promise<void> {
  const marker = `${run.remoteDir}/${KEEP_MARKER}`;
  let retrieved = false;
  if (keep) {
    await executor.writeFileAtomic(marker, '');
  } else {
    // A fresh lease first: once the marker is gone the watchdog applies max_hours at its next
    // tick, and past the deadline a stale lease would have it delete a followed job (or ended
    // results nobody has retrieved) before anyone could renew it.
    if (pod.deadlineUnixS !== null)
      await executor.writeFileAtomic(`${run.remoteDir}/${LEASE_FILE}`, '');
    // Looked at while the pod is still kept: once the marker is gone its watchdog deletes a pod
    // whose results were retrieved at its next tick, and a look after that meets a closed
    // connection (a loaded CI's release did).
    if (pod.state === 'kept') retrieved = await retrievedMarked(executor, run);
    await executor.exec(`rm -f ${shQuote(marker)}`);
  }
  pod.keep = keep;
  if (keep && pod.state === 'awaiting_retrieval') pod.state = 'kept';
  if (!keep && pod.state === 'kept') {
    // The job ended. With its results retrieved (the marker is on the pod) nothing waits for
    // the pod: it is deleted now, as after a retrieval without keep, rather
    // than recorded awaiting a retrieval that already happened.
    if (retrieved) {
      ctx.store.savePod(pod);
      log(
        ctx,
        'info',
        `pod ${pod.podId ?? ''} of run ${run.id} released: its results were retrieved, so it is deleted now`,
      );
      await remove(ctx, pod, 'retrieved', 'client');
      noteStrays(ctx, pod, await sweep(ctx, run.id, null, undefined, pod));
      if (!pod.mayHaveOtherPods()) await forgetKeys(ctx, run.id);
      return;
    }
    pod.state = 'awaiting_retrieval';
  }
  ctx.store.savePod(pod);
  if (keep && pod.podId !== null) {
    ctx.bus.publish({ type: 'pod', runId: run.id, status: { kind: 'kept', podId: pod.podId } });
  }
  log(
    ctx,
    'info',
    keep
      ? `pod ${pod.podId ?? ''} of run ${run.id} kept: nothing deletes it until you remove it (${sshCommand(run.id)})`
      : `pod ${pod.podId ?? ''} of run ${run.id} released: its watchdog's deadline (${pod.deadline ?? 'none'}) and graces apply again`,
  );
}

/**
 * Gives a pod kept at its creation (its watchdog's env says keep, with no deadline) the deadline
 * `deadlineUnixS`, before {@link setKeep} releases it: with `leaseFirst` (a followed job still
 * runs) a fresh lease first, so a deadline already passed does not have the watchdog delete the
 * pod under its follower; then `.pod/deadline`, which the watchdog reads at every tick in place
 * of its env's (no longer keeping the pod for its env, and counting a job that ended before as
 * ended now); then pod.json.
 */
export async function armReleaseDeadline(
  ctx: PodCtx,
  pod: PodRecord,
  run: RunRecord,
  executor: Executor,
  deadlineUnixS: number,
  leaseFirst: boolean,
): Promise<void> {
  if (leaseFirst) await executor.writeFileAtomic(`${run.remoteDir}/${LEASE_FILE}`, '');
  await executor.writeFileAtomic(`${run.remoteDir}/${DEADLINE_FILE}`, `${deadlineUnixS}\n`);
  pod.deadlineUnixS = deadlineUnixS;
  pod.deadline = rfc3339(deadlineUnixS * 1000);
  ctx.store.savePod(pod);
}

/** Whether the retrieved marker is on the pod (the client verified the run's results). */
async function retrievedMarked(executor: Executor, run: RunRecord): Promise<boolean> {
  const marker = `${run.remoteDir}/${RETRIEVED_MARKER}`;
  const result = await executor.exec(`test -e ${shQuote(marker)}`);
  return result.code === 0;
}
