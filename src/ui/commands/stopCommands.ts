import { cancel as cancelFlow, FlowError, requestStop } from '../../core/flow';
import { attach, waitUntracked } from '../runs/following';
import { cancelQuestion } from '../runs/notifyModel';
import { onRunpod, resumable } from '../runs/runsModel';
import { train } from './trainCommand';
import type { UiContext } from '../uiContext';

/** Cancel Run: after a confirmation, ends the run and deletes its pod (the core's cancel). */
export async function cancel(ctx: UiContext, arg: unknown): Promise<void> {
  if (!(await ctx.requireTrust('cancel a run'))) return;
  const run = await ctx.pickRun(
    arg,
    (r) => r.state === 'running' || r.state === 'preparing',
    'cancel',
  );
  if (!run) return;
  const question = cancelQuestion(run.id, run.pod, run.cluster ?? null);
  const ok = await ctx.window.showWarningMessage(
    question.message,
    { modal: question.modal },
    question.action,
  );
  if (ok !== question.action) return;
  // A follow of this window holds the lock: stop it first, the cancel takes over.
  const followed = ctx.followed.get(run.id);
  if (followed) {
    followed.quiet = true;
    followed.abort.abort(Object.assign(new Error('cancelling'), { name: 'AbortError' }));
    await waitUntracked(ctx, run.id);
  }
  const folder = ctx.folderOfRun(run);
  if (!folder) return;
  const session = await ctx.session(folder);
  try {
    const result = await ctx.window.withProgress(
      { location: ctx.host.progress.notification, title: `Overbrainer: cancelling ${run.id}` },
      () => cancelFlow(session.deps(onRunpod(run)), session.configOrNull(), run.id),
    );
    ctx.log.info(result.summary);
    ctx.notify({
      type: 'runState',
      runId: result.run.id,
      state: result.run.state,
      message: result.run.message,
      cause: result.run.end?.cause ?? null,
    });
  } catch (error) {
    if (followed && run.cluster && error instanceof FlowError && error.kind === 'already_ended') {
      // This window followed the cluster run and its members' watchdogs cannot delete it:
      // stopping its follow cancelled it (the whole cluster deleted), which the cancel found done.
      ctx.log.info(`run ${run.id} cancelled: the whole cluster was deleted`);
      ctx.notify({
        type: 'runState',
        runId: run.id,
        state: 'cancelled',
        message: 'cancelled: the whole cluster was deleted',
        cause: 'cancelled',
      });
    } else {
      await ctx.showError(`Cannot cancel ${run.id}`, error);
    }
  } finally {
    await session.close();
    ctx.refreshViews();
  }
}

/**
 * Stop and Snapshot: asks the running job for a snapshot (it saves a checkpoint at its next
 * step end and exits). The follow of this window, or one started now when nobody follows,
 * brings the checkpoint home and ends the pod; the run ends `stopped`.
 *
 * One notification lasts from the ask to the run's end (the job saving, then the checkpoint
 * coming home), so the end's own notification, with Resume Run, is the next toast: VS Code shows
 * no toast for a notification that comes within 800 ms after three others (the ask's progress,
 * a message that it saves, then the end did, on a quick machine), only the notification center.
 */
export async function stopRun(ctx: UiContext, arg: unknown): Promise<void> {
  if (!(await ctx.requireTrust('stop a run'))) return;
  const run = await ctx.pickRun(arg, (r) => r.state === 'running', 'stop with a snapshot');
  if (!run) return;
  const folder = ctx.folderOfRun(run);
  if (!folder) return;
  const session = await ctx.session(folder);
  const failure = await ctx.window.withProgress(
    {
      location: ctx.host.progress.notification,
      title: `Overbrainer: stopping ${run.id} with a snapshot`,
    },
    async (progress): Promise<{ error: unknown } | null> => {
      let text: string;
      let followedElsewhere: boolean;
      try {
        const request = await requestStop(
          session.deps(onRunpod(run)),
          run.id,
          undefined,
          session.configOrNull(),
        );
        const holder = session.store.lockHolder(run.id);
        followedElsewhere = !ctx.followed.has(run.id) && holder !== null && holder.stale === null;
        text =
          request.kind === 'ended'
            ? `Run ${run.id}: its job had already ended; its results are brought home.`
            : `Run ${run.id} saves a snapshot at its next step end and stops${followedElsewhere ? '; the client following it brings the checkpoint home' : ''}.`;
      } catch (error) {
        return { error };
      } finally {
        await session.close();
      }
      ctx.log.info(text);
      if (followedElsewhere) {
        void ctx.window.showInformationMessage(`Overbrainer: ${text}`);
        return null;
      }
      progress.report({ message: text });
      let subscription: { dispose(): void } | undefined;
      const ended = new Promise<void>((resolve) => {
        subscription = ctx.bus.on((event) => {
          if (event.type === 'runState' && event.runId === run.id && event.state !== 'running') {
            resolve();
          }
        });
      });
      try {
        // Nobody follows it: follow it here to its end, as Attach does.
        const following = ctx.followed.has(run.id)
          ? waitUntracked(ctx, run.id)
          : attach(ctx, run, true);
        await Promise.race([ended, following]);
      } finally {
        subscription?.dispose();
      }
      return null;
    },
  );
  if (failure !== null) await ctx.showError(`Cannot stop ${run.id}`, failure.error);
}

/** Resume Run: a new run on the same target that continues from this run's snapshot. */
export async function resume(ctx: UiContext, arg: unknown): Promise<void> {
  const run = await ctx.pickRun(arg, resumable, 'resume');
  if (!run) return;
  if (!resumable(run)) {
    void ctx.window.showErrorMessage(
      `Overbrainer: run ${run.id} has no snapshot to resume from (only a run stopped with a snapshot has one).`,
    );
    return;
  }
  await train(ctx, run);
}
