import {
  attach as attachFlow,
  FlowError,
  type FlowResult,
  followAgainNow,
  takenUpAgain,
} from '../../core/flow';
import { PodError } from '../../core/flow/records';
import { endCauseOf, followLost as followLostNotice, runEnd } from './notifyModel';
import { onRunpod, type RunSummary } from './runsModel';
import type { UiContext } from '../uiContext';
import type { WorkspaceSession } from '../workspace';
import { describeError } from '../../core/errors';

/** How often, and how long apart, activation looks again at a run whose lock is held. */
export const RESUME_LOOKS = 12;
export const RESUME_LOOK_MS = 5_000;

/**
 * The notification for a follow that stopped on `error` while its run is still `running` on a
 * pod (a lost connection, not a failed run); null when the run did end.
 */
function followLost(ctx: UiContext, session: WorkspaceSession, runId: string, error: unknown) {
  // The flow's own refusals (another client follows, already ended) lost nothing.
  if (error instanceof FlowError) return null;
  try {
    const run = session.store.loadRun(runId);
    const pod = session.store.loadPod(runId);
    if (run.state !== 'running' || pod === null || pod.state === 'deleted') return null;
    return followLostNotice(
      runId,
      describeError(error),
      pod.keep ? null : pod.deadlineUnixS,
      ctx.clock.nowMs(),
    );
  } catch {
    return null;
  }
}

/** Waits for a flow to end; reports its end or its error, and stops tracking its run. */
export async function finish(
  ctx: UiContext,
  flow: Promise<FlowResult>,
  runIdOf: () => string | null,
  session: WorkspaceSession,
): Promise<void> {
  const { window, log } = ctx;
  try {
    const result = await flow;
    log.info(result.summary);
    ctx.show(
      runEnd(result.run.id, result.run.state, result.run.message, result.run.end?.cause ?? null),
    );
    if (result.pod?.state === 'awaiting_retrieval') {
      ctx.notify({
        type: 'warning',
        runId: result.run.id,
        code: 'awaiting_retrieval',
        message: `Run ${result.run.id}: the job ended but its results are still on the pod; Attach to retrieve them.`,
      });
    }
  } catch (error) {
    const id = runIdOf();
    const followed = id !== null ? ctx.followed.get(id) : undefined;
    const kind = error instanceof PodError ? error.kind : null;
    const cause = endCauseOf(error);
    const end =
      id === null || cause === null ? null : runEnd(id, 'failed', describeError(error), cause);
    if (end !== null) {
      // Deadline reached, pod gone: their own notification, once per run.
      log.error(log.redact(end.message));
      ctx.show(end);
    } else if (!(followed?.abort.signal.aborted ?? false)) {
      // A pod found EXITED or TERMINATED is named so (its error says which); the job no longer
      // runs there, so it is no lost connection either.
      const stopped = kind === 'pod_stopped';
      const lost = id === null || stopped ? null : followLost(ctx, session, id, error);
      if (stopped) {
        await ctx.showError(`The pod of ${id ?? 'the run'} stopped`, error);
      } else if (lost !== null) {
        log.warn(log.redact(lost.message));
        ctx.show(lost);
      } else {
        await ctx.showError('Run failed', error);
      }
    } else if (followed?.quiet === true) {
      log.info(`Stopped following ${id ?? ''}: ${describeError(error)}`);
    } else if (error instanceof PodError && error.kind === 'interrupted') {
      // Cancelled before the job started: the flow deleted the pod (never interrupted).
      const text = `Run ${runIdOf() ?? ''} stopped before its job started: ${describeError(error)}`;
      log.info(text);
      void window.showInformationMessage(log.redact(text));
    } else {
      // Once the job runs, stopping only stops following (job and pod go on): say what runs on.
      const text = log.redact(`Overbrainer: ${describeError(error)}`);
      log.info(text);
      void window.showInformationMessage(text);
    }
  } finally {
    const id = runIdOf();
    if (id !== null) ctx.followed.get(id)?.retrieving?.();
    if (id !== null) ctx.untrack(id);
    await session.close();
    ctx.refreshViews();
  }
}

/** Attach: follows a run again (its job, its retrieval), or takes a pending retrieval up. */
export async function attach(ctx: UiContext, arg: unknown, quiet = false): Promise<void> {
  if (!(await ctx.requireTrust('attach to a run'))) return;
  const run = await ctx.pickRun(
    arg,
    (r) =>
      r.state === 'running' || r.state === 'preparing' || r.pod?.state === 'awaiting_retrieval',
    'attach to',
  );
  if (!run) return;
  if (ctx.followed.has(run.id)) {
    if (!quiet) void ctx.window.showInformationMessage(`Overbrainer: already following ${run.id}.`);
    return;
  }
  const folder = ctx.folderOfRun(run);
  if (!folder) return;
  const session = await ctx.session(folder);
  let deps;
  try {
    deps = session.deps(onRunpod(run));
  } catch (error) {
    await ctx.showError(`Cannot attach to ${run.id}`, error);
    return;
  }
  const abort = new AbortController();
  ctx.track(run.id, session, abort);
  await finish(
    ctx,
    attachFlow(deps, session.configOrNull(), run.id, abort.signal),
    () => run.id,
    session,
  );
}

/** Waits until this window no longer follows `runId` (its flow returned). */
export async function waitUntracked(ctx: UiContext, runId: string): Promise<void> {
  for (let i = 0; i < 600 && ctx.followed.has(runId); i++) await ctx.clock.sleep(100);
}

/**
 * Follows again the runs recorded `running` that no other process holds (activation). A lock
 * still held is looked at again a few times: after "Reload Window" the previous extension
 * host may still be letting go of it; a lock another window keeps holding is left alone.
 */
export async function resumeFollowing(ctx: UiContext): Promise<void> {
  // Not trusted: the runs show from their records; following waits until the folder is trusted
  // (the extension calls this again then).
  if (!ctx.trusted) {
    ctx.log.info(
      'This folder is not trusted: its runs are shown from their records, and none is followed (no API call, no SSH connection) until you trust it.',
    );
    return;
  }
  await ctx.runs.ensureLoaded().catch(() => undefined);
  // A run left `preparing` by a client that died before its job started is attached too:
  // attach deletes its pods and fails it (`interrupted before the job started`).
  let pending = ctx.runs.all.filter((r) => takenUpAgain(r.state) && !ctx.followed.has(r.id));
  const told = new Set<string>();
  for (let look = 0; look < RESUME_LOOKS && pending.length > 0; look++) {
    if (look > 0) {
      try {
        await ctx.clock.sleep(RESUME_LOOK_MS, ctx.closing.signal);
      } catch {
        return;
      }
    }
    const held: RunSummary[] = [];
    for (const run of pending) {
      if (ctx.followed.has(run.id)) continue;
      const folder = ctx.folderOfRun(run);
      if (!folder) continue;
      const session = await ctx.session(folder);
      // A stale lock (its holder died: a killed extension host, a crashed CLI) is no holder:
      // attach takes it over.
      const now = followAgainNow(session.store, run);
      if (now === null) continue;
      if (now === 'held') {
        if (!told.has(run.id)) {
          ctx.log.info(`Run ${run.id} is followed by another process; not attaching for now.`);
          told.add(run.id);
        }
        held.push(run);
        continue;
      }
      ctx.log.info(`Following run ${run.id} again.`);
      void attach(ctx, run, true);
    }
    pending = held;
  }
}
