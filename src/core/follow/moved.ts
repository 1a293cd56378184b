/**
 * A followed pod that restarted (Runpod publishes a restarted container's port anew): found at
 * its new SSH endpoint and connected there, so the follow goes on without the user attaching.
 */
import { log, type PodCtx } from '../pod/context';
import { reconnect } from '../pod/reconnect';
import type { SshExecutor } from '../exec/ssh';
import { isDead } from '../runpod/api';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';

/**
 * After a failed watch: when the API shows the pod running at another SSH endpoint than the one
 * recorded (Runpod restarted its container, which publishes its port anew), connects there and
 * returns the executor, so the follow goes on without the user attaching. While the pod restarts
 * without an endpoint, looks again every `podPollMs` for up to `readyTimeoutMs`. Null when the
 * pod did not move (gone, stopped, still at its endpoint, or no endpoint by then): the failure stands and
 * settleWatch (./settle.ts) explains it.
 */
export async function followMoved(
  ctx: PodCtx,
  pod: PodRecord,
  run: RunRecord,
  signal?: AbortSignal,
): Promise<SshExecutor | null> {
  const id = pod.podId;
  if (id === null || pod.state === 'deleted') return null;
  // Never past the pod's deadline: nothing renews its lease meanwhile.
  const deadlineMs = pod.deadlineUnixS === null ? Infinity : pod.deadlineUnixS * 1000;
  const untilMs = Math.min(ctx.clock.nowMs() + ctx.timing.readyTimeoutMs, deadlineMs);
  for (;;) {
    // One look: a 404 is for settleWatch to confirm, not for this to wait out.
    const remote = await ctx.client.getPod(id, { signal });
    if (remote === null || isDead(remote)) return null;
    const direct = remote.sshDirect;
    if (direct !== null) {
      if (direct.host === pod.ssh?.host && direct.port === pod.ssh.port) return null;
      log(
        ctx,
        'info',
        `pod ${id} of run ${run.id} restarted and answers on ${direct.host}:${direct.port} now: following it there`,
      );
      return reconnect(ctx, pod, run, signal);
    }
    if (ctx.clock.nowMs() >= untilMs) return null;
    log(ctx, 'debug', `pod ${id} of run ${run.id} has no SSH endpoint (${remote.status}): waiting`);
    await ctx.clock.sleep(ctx.timing.podPollMs, signal);
  }
}
