/**
 * A pod that restarted (Runpod publishes a restarted container's port anew): waited for while it
 * has no SSH endpoint, found at its new one and connected there, both when a followed pod moves
 * (the follow goes on without the user attaching) and when attach finds the pod restarting.
 */
import { describeError } from '../errors';
import { log, type PodCtx } from '../pod/context';
import { PodError } from '../pod/podError';
import { reconnect } from '../pod/reconnect';
import type { SshExecutor } from '../exec/ssh';
import { isDead, type Pod } from '../runpod/api';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';

/**
 * The pod as the API shows it once it has an SSH endpoint: while it restarts without one, looks
 * again every `podPollMs` for up to `readyTimeoutMs`, never past the pod's deadline (nothing
 * renews its lease meanwhile). Null when it is gone or stopped, or has no endpoint by then. One
 * look per turn: a 404 is for the caller to confirm, not for this to wait out.
 */
async function withEndpoint(
  ctx: PodCtx,
  pod: PodRecord,
  run: RunRecord,
  signal?: AbortSignal,
): Promise<Pod | null> {
  const id = pod.podId;
  if (id === null || pod.state === 'deleted') return null;
  const deadlineMs = pod.deadlineUnixS === null ? Infinity : pod.deadlineUnixS * 1000;
  const untilMs = Math.min(ctx.clock.nowMs() + ctx.timing.readyTimeoutMs, deadlineMs);
  for (;;) {
    const remote = await ctx.client.getPod(id, { signal });
    if (remote === null || isDead(remote)) return null;
    if (remote.sshDirect !== null) return remote;
    if (ctx.clock.nowMs() >= untilMs) return null;
    log(ctx, 'debug', `pod ${id} of run ${run.id} has no SSH endpoint (${remote.status}): waiting`);
    await ctx.clock.sleep(ctx.timing.podPollMs, signal);
  }
}

/**
 * After a failed watch: when the API shows the pod running at another SSH endpoint than the one
 * recorded (Runpod restarted its container, which publishes its port anew), connects there and
 * returns the executor, so the follow goes on without the user attaching. While the pod restarts
 * without an endpoint, waits for one ({@link withEndpoint}). Null when the pod did not move (gone,
 * stopped, still at its endpoint, or no endpoint by then): the failure stands and settleWatch
 * (./settle.ts) explains it.
 */
export async function followMoved(
  ctx: PodCtx,
  pod: PodRecord,
  run: RunRecord,
  signal?: AbortSignal,
): Promise<SshExecutor | null> {
  const remote = await withEndpoint(ctx, pod, run, signal);
  const direct = remote?.sshDirect ?? null;
  if (remote === null || direct === null) return null;
  if (direct.host === pod.ssh?.host && direct.port === pod.ssh.port) return null;
  log(
    ctx,
    'info',
    `pod ${remote.id} of run ${run.id} restarted and answers on ${direct.host}:${direct.port} now: following it there`,
  );
  return reconnect(ctx, pod, run, signal);
}

/**
 * Reaches the pod of a run followed again (attach, a sweep's trial resumed): as
 * {@link reconnect}, but a pod that is restarting (RUNNING or STARTING with no SSH endpoint yet)
 * is waited for as a followed pod's restart is ({@link withEndpoint}) and then reached; only a
 * pod still without an endpoint after that wait fails `no_endpoint`.
 */
export async function reconnectRestarting(
  ctx: PodCtx,
  pod: PodRecord,
  run: RunRecord,
  signal?: AbortSignal,
): Promise<SshExecutor | null> {
  try {
    return await reconnect(ctx, pod, run, signal);
  } catch (error) {
    if (!restarting(error) || signal?.aborted) throw error;
    log(
      ctx,
      'info',
      `pod ${pod.podId ?? ''} of run ${run.id} is restarting (${describeError(error)}): waiting for its SSH endpoint`,
    );
    await withEndpoint(ctx, pod, run, signal);
    // Looked up once more: reached at its endpoint, recorded gone, or its error said again.
    return reconnect(ctx, pod, run, signal);
  }
}

/** `no_endpoint` of a pod not being deleted (Runpod deletes a TERMINATED one). */
function restarting(error: unknown): boolean {
  return (
    error instanceof PodError && error.kind === 'no_endpoint' && error.podStatus !== 'TERMINATED'
  );
}
