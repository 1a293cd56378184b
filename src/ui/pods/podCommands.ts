import type * as vscode from 'vscode';
import { keepPod } from '../../core/flow';
import {
  PodAdminError,
  removePodById,
  removePods,
  type PodAdminErrorKind,
  type RemovedPod,
} from '../../core/flow/pods';
import type { UiContext } from '../uiContext';
import type { RunSummary } from '../runs/runsModel';
import { describeError } from '../../core/errors';

export { openSshTerminal } from './sshTerminal';

const FORCE_CHOICE = 'Force: Delete Anyway';

/** Keep Pod (`keep`) or Release Pod: a kept pod outlives its job until it is removed. */
export async function keep(ctx: UiContext, arg: unknown, keep: boolean): Promise<void> {
  if (!(await ctx.requireTrust(keep ? 'keep a pod' : 'release a pod'))) return;
  const run = await ctx.pickRun(
    arg,
    (r) =>
      keep ? r.pod !== null && r.pod.state !== 'deleted' && !r.pod.keep : r.pod?.keep === true,
    keep ? 'keep the pod of' : 'release the pod of',
  );
  if (!run) return;
  const folder = ctx.folderOfRun(run);
  if (!folder) return;
  const session = await ctx.session(folder);
  try {
    const pod = await keepPod(
      session.deps(true),
      run.id,
      keep,
      keep ? null : session.configOrNull(),
    );
    const text = keep
      ? `Pod ${pod.podId ?? ''} of ${run.id} kept: nothing deletes it automatically. Remove it with "Overbrainer: Remove Pod".`
      : pod.state === 'deleted'
        ? `Pod ${pod.podId ?? ''} of ${run.id} released and deleted: its results are retrieved.`
        : `Pod ${pod.podId ?? ''} of ${run.id} released: its deadline (${pod.deadline ?? 'none'}) applies again.`;
    ctx.log.info(text);
    void ctx.window.showInformationMessage(text);
  } catch (error) {
    await ctx.showError(keep ? 'Cannot keep the pod' : 'Cannot release the pod', error);
  } finally {
    await session.close();
    ctx.refreshViews();
  }
}

/** Remove Pod: the pods of a run (its `pod rm`), or a pod of the Pods view no run records. */
export async function removePod(ctx: UiContext, arg: unknown): Promise<void> {
  if (!(await ctx.requireTrust('remove a pod'))) return;
  // A pod of the Pods view that no run here records (`{ podId }`, maybe with its marker's run).
  const orphan = await orphanOf(ctx, arg);
  if (orphan !== null) {
    await removeOrphan(ctx, orphan.podId, orphan.runId);
    return;
  }
  const run = await ctx.pickRun(
    arg,
    (r) => (r.pod !== null && r.pod.state !== 'deleted') || liveCluster(r) !== null,
    'remove the pods of',
  );
  if (!run) return;
  const cluster = run.pod === null ? liveCluster(run) : null;
  const ok = await ctx.window.showWarningMessage(
    `Remove the pods of run ${run.id}?`,
    {
      modal: true,
      // A member row of a cluster run: Runpod deletes a member only with its whole cluster.
      detail:
        cluster !== null
          ? `Deletes its cluster ${cluster.id} with all ${cluster.nodes.length} nodes (Runpod deletes a cluster's member only with its whole cluster) and any stray cluster of the run. Results not yet retrieved are lost.`
          : `Deletes its pod ${run.pod?.podId ?? ''} (even a kept one) and any stray pod of the run. Results not yet retrieved are lost.`,
    },
    'Remove Pod',
  );
  if (ok !== 'Remove Pod') return;
  const folder = ctx.folderOfRun(run);
  if (!folder) return;
  await removeRunPods(ctx, folder, run.id);
}

/** The run's cluster while it may bill (not confirmed deleted), or null. */
function liveCluster(run: RunSummary): { id: string; nodes: readonly unknown[] } | null {
  const cluster = run.cluster ?? null;
  return cluster !== null && cluster.deletedAt === null ? cluster : null;
}

/** `{ podId, runId? }` of a tree item whose pod no run of this workspace records; else null. */
async function orphanOf(
  ctx: UiContext,
  arg: unknown,
): Promise<{ podId: string; runId: string | null } | null> {
  if (typeof arg !== 'object' || arg === null) return null;
  const a = arg as { podId?: unknown; runId?: unknown; runDir?: unknown; dir?: unknown };
  if (typeof a.podId !== 'string') return null;
  await ctx.runs.ensureLoaded().catch(() => undefined);
  const dir = typeof a.runDir === 'string' ? a.runDir : typeof a.dir === 'string' ? a.dir : null;
  const runId = typeof a.runId === 'string' ? a.runId : null;
  const known = ctx.runs.all.some((r) => r.dir === dir || (runId !== null && r.id === runId));
  return known ? null : { podId: a.podId, runId };
}

/**
 * Removes a pod no run here records, after a modal confirmation: by its run marker's `pod rm`
 * (which asks for the second, forcing choice: the run may belong to another checkout), or by
 * its ID when it carries no marker.
 */
async function removeOrphan(ctx: UiContext, podId: string, runId: string | null): Promise<void> {
  const ok = await ctx.window.showWarningMessage(
    `Remove pod ${podId}?`,
    {
      modal: true,
      detail:
        runId === null
          ? `Pod ${podId} carries no run marker and no run in this workspace records it. Deletes it; whatever is on it is lost.`
          : `Pod ${podId} belongs to run ${runId}, which is not in this workspace's runs folder (another checkout may own it). Deletes every pod of run ${runId}; whatever is on them is lost.`,
    },
    'Remove Pod',
  );
  if (ok !== 'Remove Pod') return;
  const folder = await ctx.pickFolder();
  if (!folder) return;
  if (runId !== null) {
    await removeRunPods(ctx, folder, runId);
    return;
  }
  const session = await ctx.session(folder);
  try {
    const removed = await ctx.window.withProgress(
      { location: ctx.host.progress.notification, title: `Overbrainer: removing ${podId}` },
      () => removePodById(session.workspace, podId),
    );
    const text = removed.alreadyGone
      ? `Pod ${podId} was already gone from the account; nothing deleted.`
      : `Deleted ${podId}.`;
    ctx.log.info(text);
    void ctx.window.showInformationMessage(text);
  } catch (error) {
    await ctx.showError(`Cannot remove pod ${podId}`, error);
  } finally {
    await session.close();
    ctx.refreshViews();
  }
}

/** `pod rm <run>`; a refusal offers force as a second, explicit choice saying what it deletes. */
async function removeRunPods(
  ctx: UiContext,
  folder: vscode.WorkspaceFolder,
  runId: string,
): Promise<void> {
  const { window, log } = ctx;
  const session = await ctx.session(folder);
  try {
    let removal = await window.withProgress(
      { location: ctx.host.progress.notification, title: `Overbrainer: removing pods of ${runId}` },
      async () => removePods(session.workspace, runId, { force: false }),
    );
    if (removal.error instanceof PodAdminError) {
      const force = await window.showWarningMessage(
        describeError(removal.error),
        { modal: true, detail: forceDetail(removal.error.kind, runId) },
        FORCE_CHOICE,
      );
      if (force !== FORCE_CHOICE) {
        for (const pod of removal.removed) log.info(removedText(pod, runId));
        return;
      }
      const first = removal.removed;
      removal = await window.withProgress(
        {
          location: ctx.host.progress.notification,
          title: `Overbrainer: removing pods of ${runId} (forced)`,
        },
        async () => removePods(session.workspace, runId, { force: true }),
      );
      removal = { ...removal, removed: [...first, ...removal.removed] };
    }
    for (const pod of removal.removed) log.info(removedText(pod, runId));
    const deleted = removal.removed.filter((p) => !p.alreadyGone).map((p) => p.podId);
    const gone = removal.removed.filter((p) => p.alreadyGone).map((p) => p.podId);
    if (removal.removed.length > 0) {
      void window.showInformationMessage(
        [
          deleted.length > 0 ? `Deleted ${deleted.join(', ')} of ${runId}.` : '',
          gone.length > 0
            ? `${gone.join(', ')} of ${runId} ${gone.length === 1 ? 'was' : 'were'} already gone from the account; nothing deleted.`
            : '',
        ]
          .filter((t) => t !== '')
          .join(' '),
      );
    }
    if (removal.error !== null) throw removal.error;
    if (removal.removed.length === 0) {
      void window.showInformationMessage(`No pod of ${runId} to remove.`);
    }
  } catch (error) {
    await ctx.showError(`Cannot remove the pods of ${runId}`, error);
  } finally {
    await session.close();
    ctx.refreshViews();
  }
}

/** One pod `pod rm` dealt with, for the log: deleted, or found already gone (never "deleted"). */
function removedText(pod: RemovedPod, runId: string): string {
  return pod.alreadyGone
    ? `Pod ${pod.podId} of ${runId} was already gone from the account; nothing deleted.`
    : `Pod ${pod.podId} of ${runId} deleted.`;
}

/** What the forced `pod rm` deletes, for the second confirmation of a refusal of `kind`. */
function forceDetail(kind: PodAdminErrorKind, runId: string): string {
  switch (kind) {
    case 'not_in_runs':
      return `Force deletes every pod carrying run ${runId}'s marker, though no run of this workspace records it: if another checkout is training on it, its job stops and its results are lost.`;
    case 'still_starting':
      return `Force deletes the pod run ${runId} is starting: the run fails, and a pod created after this may be left (check the Pods view).`;
    case 'pod_not_recorded':
    case 'run_still_running':
      return `Force deletes the training pod of run ${runId} while its job may still run: the job stops, its results not yet retrieved are lost, and the run is marked failed.`;
  }
}
