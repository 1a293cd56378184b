import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Clock } from '../core/clock';
import { CONFIG_FILE, configTemplate, setGpuTypes } from '../core/config';
import type { CoreEvent, EventBus } from '../core/events';
import type { GpuType } from '../core/runpod/api';
import { ApiError } from '../core/runpod/errors';
import { alias } from '../core/runpod/keys';
import { PodError } from '../core/runpod/podError';
import type { DeadlineView } from '../core/runpod/lease';
import {
  listPods,
  PodAdminError,
  removePodById,
  removePods,
  strayWarning,
  sweepHostKeySecrets,
  type PodAdminErrorKind,
} from '../core/runpod/podAdmin';
import {
  attach,
  cancel,
  FlowError,
  keepPod,
  requestStop,
  train,
  type FlowResult,
} from '../core/flow';
import { Pace } from '../core/train/pace';
import type { ApiKeyStore } from './apiKey';
import type { Log } from './log';
import {
  cancelQuestion,
  notificationFor,
  followLost,
  OnceFilter,
  runEnd,
  type Notification,
  type NotifyAction,
} from './notifyModel';
import { runsFolderName } from './runsFolders';
import { resumable, type RunsModel, type RunSummary } from './runsModel';
import { etaFromNow, statusForPod } from './statusModel';
import { runSpendLines } from '../core/runs/spend';
import { errorText } from './runsTree';
import { heldByEarlierRuns } from '../core/runs/quote';
import { trainConfirmation } from './trainConfirm';
import { SetupError, timingFromEnv, WorkspaceSession } from './workspace';

/** A run this window follows: aborting stops following (before the job starts it deletes the pod). */
interface Followed {
  runId: string;
  session: WorkspaceSession;
  abort: AbortController;
  pace: Pace;
  lastMetricMs: number;
  /** Set when this window stops following on purpose (Cancel takes over): nothing to say then. */
  quiet: boolean;
  /** Ends the retrieval progress once the flow returns. */
  retrieving: (() => void) | null;
}

/**
 * Runs the core's flows for the commands, follows runs in the background, and turns core events
 * into the status bar, notifications and view refreshes. Deactivation (dispose) aborts every
 * follow and deletes nothing.
 */
export class Controller implements vscode.Disposable {
  private readonly followed = new Map<string, Followed>();
  private readonly once = new OnceFilter();
  private readonly statusItem: vscode.StatusBarItem;
  private readonly ticker: ReturnType<typeof setInterval>;
  private readonly subs: { dispose(): void }[] = [];
  private current: string | null = null;
  /** Aborted when the window closes: ends the waits of resumeFollowing. */
  private readonly closing = new AbortController();

  constructor(
    private readonly bus: EventBus,
    private readonly clock: Clock,
    private readonly log: Log,
    private readonly apiKeys: ApiKeyStore,
    private readonly runs: RunsModel,
    private readonly pods: { refresh(): Promise<void>; isLoaded: boolean },
  ) {
    this.statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
    this.statusItem.command = 'overbrainer.showRun';
    this.subs.push(bus.on((event) => this.onEvent(event)));
    this.ticker = setInterval(() => this.updateStatus(), 1000);
  }

  // ----------------------------------------------------------------- sessions

  /** A fresh session per command: the key and settings are read each time. */
  async session(folder: vscode.WorkspaceFolder): Promise<WorkspaceSession> {
    const key = await this.apiKeys.get();
    const setting = vscode.workspace
      .getConfiguration('overbrainer', folder.uri)
      .inspect<string>('runpod.baseUrl');
    const baseUrl =
      setting?.workspaceFolderValue ?? setting?.workspaceValue ?? setting?.globalValue ?? null;
    return new WorkspaceSession({
      dir: folder.uri.fsPath,
      runsDir: path.join(folder.uri.fsPath, runsFolderName(folder)),
      env: process.env,
      apiKey: key?.key ?? null,
      baseUrl,
      bus: this.bus,
      clock: this.clock,
      timing: timingFromEnv(process.env),
    });
  }

  private async pickFolder(): Promise<vscode.WorkspaceFolder | undefined> {
    const folders = (vscode.workspace.workspaceFolders ?? []).filter(
      (f) => f.uri.scheme === 'file',
    );
    if (folders.length <= 1) return folders[0];
    return vscode.window.showWorkspaceFolderPick({ placeHolder: 'Workspace folder' });
  }

  private folderOfRun(run: RunSummary): vscode.WorkspaceFolder | undefined {
    const runsDir = path.dirname(run.dir);
    return (vscode.workspace.workspaceFolders ?? []).find(
      (f) => path.join(f.uri.fsPath, runsFolderName(f)) === runsDir,
    );
  }

  /** The run from a tree item (a run, or a pod with its run), else a QuickPick of the runs `applies` to. */
  async pickRun(
    arg: unknown,
    applies: (run: RunSummary) => boolean,
    what: string,
  ): Promise<RunSummary | undefined> {
    await this.runs.ensureLoaded().catch(() => undefined);
    const all = this.runs.all;
    if (typeof arg === 'object' && arg !== null) {
      const a = arg as { dir?: unknown; runDir?: unknown };
      const dir =
        typeof a.dir === 'string' ? a.dir : typeof a.runDir === 'string' ? a.runDir : null;
      const found = all.find((run) => run.dir === dir);
      if (found) return found;
    }
    const candidates = all.filter(applies);
    if (candidates.length === 0) {
      void vscode.window.showInformationMessage(`Overbrainer: no run to ${what}.`);
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      candidates.map((run) => ({
        label: run.id,
        description: [run.state, run.target, run.pod?.state].filter(Boolean).join(' · '),
        run,
      })),
      { placeHolder: `Run to ${what}` },
    );
    return pick?.run;
  }

  // ----------------------------------------------------------------- errors

  /** Shows an error with its hint; a missing or refused key offers "Set Runpod API Key". */
  async showError(prefix: string, error: unknown): Promise<void> {
    const hint =
      typeof error === 'object' && error !== null && 'hint' in error
        ? (error as { hint: unknown }).hint
        : null;
    const needsKey = keyProblem(error);
    const text = this.log.redact(
      `${prefix}: ${errorText(error)}${typeof hint === 'string' && hint !== '' ? ` — ${hint}` : ''}`,
    );
    this.log.error(text);
    const actions = needsKey ? ['Set Runpod API Key'] : ['Show Logs'];
    const choice = await vscode.window.showErrorMessage(text, ...actions);
    if (choice === 'Set Runpod API Key')
      await vscode.commands.executeCommand('overbrainer.setApiKey');
    if (choice === 'Show Logs') this.log.show();
  }

  // ----------------------------------------------------------------- commands

  /** Train (or, with `resume`, a new run that continues from that run's snapshot). */
  async train(resume?: RunSummary): Promise<void> {
    const folder = resume ? this.folderOfRun(resume) : await this.pickFolder();
    if (!folder) {
      void vscode.window.showErrorMessage(
        'Overbrainer: open a folder with an overbrainer.toml first.',
      );
      return;
    }
    const session = await this.session(folder);
    let config;
    try {
      config = session.config();
    } catch (error) {
      await this.showError('Cannot train', error);
      return;
    }
    const names = Object.keys(config.targets);
    let targetName = config.training?.target ?? (names.length === 1 ? names[0] : undefined);
    if (targetName === undefined) {
      targetName = await vscode.window.showQuickPick(names, { placeHolder: 'Target to train on' });
      if (targetName === undefined) return;
    }
    const target = config.targets[targetName];
    let keep = false;
    if (target?.kind === 'runpod') {
      // The live catalog gives the hourly rate; a missing or refused key stops here, with the
      // action that fixes it, before anything is created.
      let catalog: GpuType[] | null = null;
      try {
        catalog = await vscode.window.withProgress(
          { location: vscode.ProgressLocation.Window, title: 'Overbrainer: reading GPU prices' },
          () => session.api().listGpuTypes({ includeAvailability: false }),
        );
      } catch (error) {
        if (keyProblem(error)) {
          await this.showError('Cannot train', error);
          await session.close();
          return;
        }
        this.log.warn(`Cannot read the GPU catalog for the rate: ${errorText(error)}`);
      }
      const confirm = trainConfirmation(
        targetName,
        target,
        catalog,
        this.clock.nowMs(),
        heldByEarlierRuns(session.store, targetName),
      );
      if (resume?.snapshot) {
        confirm.message = `Resume ${resume.id} from step ${resume.snapshot.step} on "${targetName}"?`;
      }
      const choice = await vscode.window.showInformationMessage(
        confirm.message,
        { modal: true, detail: confirm.detail },
        'Train',
        'Train and Keep Pod',
      );
      if (choice === undefined) {
        await session.close();
        return;
      }
      keep = choice === 'Train and Keep Pod';
      try {
        const rows = await listPods(session.podCtx(), { lookUpUnlisted: false });
        const stray = strayWarning(rows);
        if (stray !== null)
          this.notify({ type: 'warning', runId: null, code: 'strays', message: stray });
        const swept = await sweepHostKeySecrets(session.podCtx(), rows).catch((error: unknown) => {
          this.log.warn(`Cannot sweep the host-key secrets of ended runs: ${errorText(error)}`);
          return [];
        });
        if (swept.length > 0)
          this.log.info(`Deleted the host-key secrets left by ended runs ${swept.join(', ')}`);
      } catch (error) {
        if (keyProblem(error)) {
          await this.showError('Cannot train', error);
          await session.close();
          return;
        }
        this.log.warn(`Cannot look for leftover pods: ${errorText(error)}`);
      }
    }
    let deps;
    try {
      deps = session.deps(target?.kind === 'runpod');
    } catch (error) {
      await this.showError('Cannot train', error);
      return;
    }
    const abort = new AbortController();
    let runId: string | null = null;
    let started: () => void = () => undefined;
    const jobStarted = new Promise<void>((resolve) => (started = resolve));
    const flow = train(deps, config, session.dir, {
      target: targetName,
      keepPod: keep,
      resumeFrom: resume?.id,
      signal: abort.signal,
      onRun: (run) => {
        runId = run.id;
        this.track(run.id, session, abort);
        this.log.info(`Run ${run.id} started on target ${run.target}.`);
        this.refreshViews();
      },
    });
    const watch = this.bus.on((event) => {
      if (event.type === 'runState' && event.runId === runId && event.state !== 'preparing')
        started();
    });
    // Provisioning under a cancellable progress: cancel before the job starts deletes the pod.
    await vscode.window.withProgress(
      {
        location: vscode.ProgressLocation.Notification,
        title: `Overbrainer: starting the run on ${targetName}`,
        cancellable: true,
      },
      async (progress, token) => {
        token.onCancellationRequested(() =>
          abort.abort(Object.assign(new Error('cancelled in VS Code'), { name: 'AbortError' })),
        );
        const sub = this.bus.on((event) => {
          if (event.type === 'pod' && event.runId === runId)
            progress.report({ message: podText(event) });
        });
        await Promise.race([
          jobStarted,
          flow.then(
            () => undefined,
            () => undefined,
          ),
        ]);
        sub.dispose();
      },
    );
    watch.dispose();
    await this.finish(flow, () => runId, session);
  }

  private track(runId: string, session: WorkspaceSession, abort: AbortController): void {
    this.followed.set(runId, {
      runId,
      session,
      abort,
      pace: new Pace(),
      lastMetricMs: this.clock.nowMs(),
      quiet: false,
      retrieving: null,
    });
    this.current = runId;
    this.updateStatus();
  }

  /**
   * The notification for a follow that stopped on `error` while its run is still `running` on a
   * pod (a lost connection, not a failed run); null when the run did end.
   */
  private followLost(session: WorkspaceSession, runId: string, error: unknown) {
    // The flow's own refusals (another client follows, already ended) lost nothing.
    if (error instanceof FlowError) return null;
    try {
      const run = session.store.loadRun(runId);
      const pod = session.store.loadPod(runId);
      if (run.state !== 'running' || pod === null || pod.state === 'deleted') return null;
      return followLost(
        runId,
        errorText(error),
        pod.keep ? null : pod.deadlineUnixS,
        this.clock.nowMs(),
      );
    } catch {
      return null;
    }
  }

  /** Waits for a flow to end; reports its end or its error, and stops tracking its run. */
  private async finish(
    flow: Promise<FlowResult>,
    runIdOf: () => string | null,
    session: WorkspaceSession,
  ): Promise<void> {
    try {
      const result = await flow;
      this.log.info(result.summary);
      this.show(runEnd(result.run.id, result.run.state, result.run.message, null));
      if (result.pod?.state === 'awaiting_retrieval') {
        this.notify({
          type: 'warning',
          runId: result.run.id,
          code: 'awaiting_retrieval',
          message: `Run ${result.run.id}: the job ended but its results are still on the pod; Attach to retrieve them.`,
        });
      }
    } catch (error) {
      const id = runIdOf();
      const followed = id !== null ? this.followed.get(id) : undefined;
      const kind = error instanceof PodError ? error.kind : null;
      const end =
        id === null ||
        (kind !== 'deadline_reached' && kind !== 'cost_cap_reached' && kind !== 'pod_gone')
          ? null
          : runEnd(id, 'failed', errorText(error), kind);
      if (end !== null) {
        // Deadline reached, pod gone: their own notification, once per run.
        this.log.error(this.log.redact(end.message));
        this.show(end);
      } else if (!(followed?.abort.signal.aborted ?? false)) {
        // A pod found EXITED or TERMINATED is named so (its error says which); the job no longer
        // runs there, so it is no lost connection either.
        const stopped = kind === 'pod_stopped';
        const lost = id === null || stopped ? null : this.followLost(session, id, error);
        if (stopped) {
          await this.showError(`The pod of ${id ?? 'the run'} stopped`, error);
        } else if (lost !== null) {
          this.log.warn(this.log.redact(lost.message));
          this.show(lost);
        } else {
          await this.showError('Run failed', error);
        }
      } else if (followed?.quiet === true) {
        this.log.info(`Stopped following ${id ?? ''}: ${errorText(error)}`);
      } else if (error instanceof PodError && error.kind === 'interrupted') {
        // Cancelled before the job started: the flow deleted the pod (never interrupted).
        const text = `Run ${runIdOf() ?? ''} stopped before its job started: ${errorText(error)}`;
        this.log.info(text);
        void vscode.window.showInformationMessage(this.log.redact(text));
      } else {
        // Once the job runs, stopping only stops following (spec §8): say what keeps running.
        const text = this.log.redact(`Overbrainer: ${errorText(error)}`);
        this.log.info(text);
        void vscode.window.showInformationMessage(text);
      }
    } finally {
      const id = runIdOf();
      if (id !== null) this.followed.get(id)?.retrieving?.();
      if (id !== null) this.untrack(id);
      await session.close();
      this.refreshViews();
    }
  }

  private untrack(runId: string): void {
    this.followed.delete(runId);
    if (this.current === runId) this.current = [...this.followed.keys()].pop() ?? null;
    this.updateStatus();
  }

  async attach(arg: unknown, quiet = false): Promise<void> {
    const run = await this.pickRun(
      arg,
      (r) =>
        r.state === 'running' || r.state === 'preparing' || r.pod?.state === 'awaiting_retrieval',
      'attach to',
    );
    if (!run) return;
    if (this.followed.has(run.id)) {
      if (!quiet)
        void vscode.window.showInformationMessage(`Overbrainer: already following ${run.id}.`);
      return;
    }
    const folder = this.folderOfRun(run);
    if (!folder) return;
    const session = await this.session(folder);
    let deps;
    try {
      deps = session.deps(run.pod !== null);
    } catch (error) {
      await this.showError(`Cannot attach to ${run.id}`, error);
      return;
    }
    const abort = new AbortController();
    this.track(run.id, session, abort);
    await this.finish(
      attach(deps, session.configOrNull(), run.id, abort.signal),
      () => run.id,
      session,
    );
  }

  async cancel(arg: unknown): Promise<void> {
    const run = await this.pickRun(
      arg,
      (r) => r.state === 'running' || r.state === 'preparing',
      'cancel',
    );
    if (!run) return;
    const question = cancelQuestion(run.id, run.pod);
    const ok = await vscode.window.showWarningMessage(
      question.message,
      { modal: question.modal },
      question.action,
    );
    if (ok !== question.action) return;
    // A follow of this window holds the lock: stop it first, the cancel takes over.
    const followed = this.followed.get(run.id);
    if (followed) {
      followed.quiet = true;
      followed.abort.abort(Object.assign(new Error('cancelling'), { name: 'AbortError' }));
      await this.waitUntracked(run.id);
    }
    const folder = this.folderOfRun(run);
    if (!folder) return;
    const session = await this.session(folder);
    try {
      const result = await vscode.window.withProgress(
        {
          location: vscode.ProgressLocation.Notification,
          title: `Overbrainer: cancelling ${run.id}`,
        },
        () => cancel(session.deps(run.pod !== null), session.configOrNull(), run.id),
      );
      this.log.info(result.summary);
      this.notify({
        type: 'runState',
        runId: result.run.id,
        state: result.run.state,
        message: result.run.message,
      });
    } catch (error) {
      await this.showError(`Cannot cancel ${run.id}`, error);
    } finally {
      await session.close();
      this.refreshViews();
    }
  }

  /**
   * Stop and Snapshot: asks the running job for a snapshot (it saves a checkpoint at its next
   * step end and exits). The follow of this window, or one started now when nobody follows,
   * brings the checkpoint home and ends the pod; the run ends `stopped`.
   */
  async stopRun(arg: unknown): Promise<void> {
    const run = await this.pickRun(arg, (r) => r.state === 'running', 'stop with a snapshot');
    if (!run) return;
    const folder = this.folderOfRun(run);
    if (!folder) return;
    const session = await this.session(folder);
    let followedElsewhere: boolean;
    try {
      const request = await vscode.window.withProgress(
        {
          location: vscode.ProgressLocation.Notification,
          title: `Overbrainer: asking ${run.id} for a snapshot`,
        },
        () => requestStop(session.deps(run.pod !== null), run.id),
      );
      const holder = session.store.lockHolder(run.id);
      followedElsewhere = !this.followed.has(run.id) && holder !== null && holder.stale === null;
      const text =
        request.kind === 'ended'
          ? `Run ${run.id}: its job had already ended; its results are brought home.`
          : `Run ${run.id} saves a snapshot at its next step end and stops${followedElsewhere ? '; the client following it brings the checkpoint home' : ''}.`;
      this.log.info(text);
      void vscode.window.showInformationMessage(`Overbrainer: ${text}`);
    } catch (error) {
      await this.showError(`Cannot stop ${run.id}`, error);
      await session.close();
      return;
    }
    await session.close();
    // Nobody follows it: follow it here to its end, as Attach does.
    if (!this.followed.has(run.id) && !followedElsewhere) await this.attach(run, true);
  }

  /** Resume Run: a new run on the same target that continues from this run's snapshot. */
  async resume(arg: unknown): Promise<void> {
    const run = await this.pickRun(arg, resumable, 'resume');
    if (!run) return;
    if (!resumable(run)) {
      void vscode.window.showErrorMessage(
        `Overbrainer: run ${run.id} has no snapshot to resume from (only a run stopped with a snapshot has one).`,
      );
      return;
    }
    await this.train(run);
  }

  private async waitUntracked(runId: string): Promise<void> {
    for (let i = 0; i < 600 && this.followed.has(runId); i++) await this.clock.sleep(100);
  }

  async keep(arg: unknown, keep: boolean): Promise<void> {
    const run = await this.pickRun(
      arg,
      (r) =>
        keep ? r.pod !== null && r.pod.state !== 'deleted' && !r.pod.keep : r.pod?.keep === true,
      keep ? 'keep the pod of' : 'release the pod of',
    );
    if (!run) return;
    const folder = this.folderOfRun(run);
    if (!folder) return;
    const session = await this.session(folder);
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
          : `Pod ${pod.podId ?? ''} of ${run.id} released: its deadline applies again.`;
      this.log.info(text);
      void vscode.window.showInformationMessage(text);
    } catch (error) {
      await this.showError(keep ? 'Cannot keep the pod' : 'Cannot release the pod', error);
    } finally {
      await session.close();
      this.refreshViews();
    }
  }

  async removePod(arg: unknown): Promise<void> {
    // A pod of the Pods view that no run here records (`{ podId }`, maybe with its marker's run).
    const orphan = await this.orphanOf(arg);
    if (orphan !== null) {
      await this.removeOrphan(orphan.podId, orphan.runId);
      return;
    }
    const run = await this.pickRun(
      arg,
      (r) => r.pod !== null && r.pod.state !== 'deleted',
      'remove the pods of',
    );
    if (!run) return;
    const ok = await vscode.window.showWarningMessage(
      `Remove the pods of run ${run.id}?`,
      {
        modal: true,
        detail: `Deletes its pod ${run.pod?.podId ?? ''} (even a kept one) and any stray pod of the run. Results not yet retrieved are lost.`,
      },
      'Remove Pod',
    );
    if (ok !== 'Remove Pod') return;
    const folder = this.folderOfRun(run);
    if (!folder) return;
    await this.removeRunPods(folder, run.id);
  }

  /** `{ podId, runId? }` of a tree item whose pod no run of this workspace records; else null. */
  private async orphanOf(arg: unknown): Promise<{ podId: string; runId: string | null } | null> {
    if (typeof arg !== 'object' || arg === null) return null;
    const a = arg as { podId?: unknown; runId?: unknown; runDir?: unknown; dir?: unknown };
    if (typeof a.podId !== 'string') return null;
    await this.runs.ensureLoaded().catch(() => undefined);
    const dir = typeof a.runDir === 'string' ? a.runDir : typeof a.dir === 'string' ? a.dir : null;
    const runId = typeof a.runId === 'string' ? a.runId : null;
    const known = this.runs.all.some((r) => r.dir === dir || (runId !== null && r.id === runId));
    return known ? null : { podId: a.podId, runId };
  }

  /**
   * Removes a pod no run here records, after a modal confirmation: by its run marker's `pod rm`
   * (which asks for the second, forcing choice: the run may belong to another checkout), or by
   * its ID when it carries no marker.
   */
  private async removeOrphan(podId: string, runId: string | null): Promise<void> {
    const ok = await vscode.window.showWarningMessage(
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
    const folder = await this.pickFolder();
    if (!folder) return;
    if (runId !== null) {
      await this.removeRunPods(folder, runId);
      return;
    }
    const session = await this.session(folder);
    try {
      await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Overbrainer: removing ${podId}` },
        () => removePodById(session.podCtx(), podId),
      );
      this.log.info(`Pod ${podId} deleted.`);
      void vscode.window.showInformationMessage(`Deleted ${podId}.`);
    } catch (error) {
      await this.showError(`Cannot remove pod ${podId}`, error);
    } finally {
      await session.close();
      this.refreshViews();
    }
  }

  /** `pod rm <run>`; a refusal offers force as a second, explicit choice saying what it deletes. */
  private async removeRunPods(folder: vscode.WorkspaceFolder, runId: string): Promise<void> {
    const session = await this.session(folder);
    try {
      let removal = await vscode.window.withProgress(
        {
          location: vscode.ProgressLocation.Notification,
          title: `Overbrainer: removing pods of ${runId}`,
        },
        async () => removePods(session.podCtx(), runId, { force: false }),
      );
      if (removal.error instanceof PodAdminError) {
        const force = await vscode.window.showWarningMessage(
          errorText(removal.error),
          { modal: true, detail: forceDetail(removal.error.kind, runId) },
          FORCE_CHOICE,
        );
        if (force !== FORCE_CHOICE) {
          for (const pod of removal.removed) this.log.info(`Pod ${pod.podId} of ${runId} deleted.`);
          return;
        }
        const first = removal.removed;
        removal = await vscode.window.withProgress(
          {
            location: vscode.ProgressLocation.Notification,
            title: `Overbrainer: removing pods of ${runId} (forced)`,
          },
          async () => removePods(session.podCtx(), runId, { force: true }),
        );
        removal = { ...removal, removed: [...first, ...removal.removed] };
      }
      for (const pod of removal.removed) this.log.info(`Pod ${pod.podId} of ${runId} deleted.`);
      if (removal.removed.length > 0) {
        void vscode.window.showInformationMessage(
          `Deleted ${removal.removed.map((p) => p.podId).join(', ')} of ${runId}.`,
        );
      }
      if (removal.error !== null) throw removal.error;
      if (removal.removed.length === 0) {
        void vscode.window.showInformationMessage(`No pod of ${runId} to remove.`);
      }
    } catch (error) {
      await this.showError(`Cannot remove the pods of ${runId}`, error);
    } finally {
      await session.close();
      this.refreshViews();
    }
  }

  async openSshTerminal(arg: unknown): Promise<void> {
    const run = await this.pickRun(
      arg,
      (r) =>
        r.pod !== null &&
        (r.pod.state === 'running' || r.pod.state === 'kept' || r.pod.state === 'ready'),
      'open a terminal on',
    );
    if (!run) return;
    const folder = this.folderOfRun(run);
    if (!folder) return;
    const config = path.join(path.dirname(run.dir), run.id, 'ssh', 'config');
    if (!fs.existsSync(config)) {
      void vscode.window.showErrorMessage(
        `Run ${run.id} has no ssh/config: its pod never became reachable, or its keys were removed with the pod.`,
      );
      return;
    }
    const rel = path.relative(folder.uri.fsPath, config);
    const terminal = vscode.window.createTerminal({
      name: `Overbrainer ${run.id}`,
      cwd: folder.uri,
      shellPath: 'ssh',
      shellArgs: ['-F', rel, alias(run.id)],
    });
    terminal.show();
  }

  async createConfig(): Promise<void> {
    const folder = await this.pickFolder();
    if (!folder) return;
    const file = path.join(folder.uri.fsPath, CONFIG_FILE);
    if (!fs.existsSync(file)) fs.writeFileSync(file, configTemplate(), { flag: 'wx' });
    await vscode.window.showTextDocument(vscode.Uri.file(file));
  }

  async pickGpuTypes(): Promise<void> {
    const folder = await this.pickFolder();
    if (!folder) return;
    const session = await this.session(folder);
    try {
      const config = session.config();
      const names = Object.keys(config.targets).filter((n) => config.targets[n]?.kind === 'runpod');
      const targetName =
        names.length === 1
          ? names[0]
          : await vscode.window.showQuickPick(names, { placeHolder: 'Target' });
      if (targetName === undefined) return;
      const gpus = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Window, title: 'Overbrainer: loading GPU types' },
        () => session.api().listGpuTypes({ count: 1, cloud: 'SECURE', includeAvailability: true }),
      );
      const current = config.targets[targetName];
      const chosen = new Set(
        current?.kind === 'runpod' && current.gpuTypes !== 'auto' ? current.gpuTypes : [],
      );
      const picks = await vscode.window.showQuickPick(
        gpus
          .filter((g) => g.secureCloud)
          .map((g) => ({
            label: g.id,
            description: `${g.memoryInGb} GB · ${g.securePricePerHourUsd === null ? 'price n/a' : `$${g.securePricePerHourUsd.toFixed(2)}/h`} · ${stockText(g)}`,
            picked: chosen.has(g.id),
          })),
        {
          canPickMany: true,
          placeHolder: `GPU types for target ${targetName}, in order of preference`,
        },
      );
      if (picks === undefined || picks.length === 0) return;
      const file = path.join(folder.uri.fsPath, CONFIG_FILE);
      const text = fs.readFileSync(file, 'utf8');
      fs.writeFileSync(
        file,
        setGpuTypes(
          text,
          targetName,
          picks.map((p) => p.label),
        ),
      );
      void vscode.window.showInformationMessage(
        `GPU types of ${targetName}: ${picks.map((p) => p.label).join(', ')}`,
      );
    } catch (error) {
      await this.showError('Cannot pick GPU types', error);
    } finally {
      await session.close();
    }
  }

  async showRun(arg: unknown): Promise<void> {
    const run =
      arg === undefined && this.current !== null
        ? this.runs.all.find((r) => r.id === this.current)
        : await this.pickRun(arg, () => true, 'show');
    if (!run) return;
    const output = path.join(run.dir, 'output');
    const target = fs.existsSync(output) ? output : path.join(run.dir, 'run.json');
    if (fs.statSync(target).isDirectory()) {
      await vscode.commands.executeCommand('revealInExplorer', vscode.Uri.file(target));
    } else {
      await vscode.window.showTextDocument(vscode.Uri.file(target));
    }
  }

  /** Reveals the run's retrieved output in the Explorer (its run.json when it has none). */
  async openOutput(run: RunSummary | undefined): Promise<void> {
    if (!run) return;
    const output = path.join(run.dir, 'output');
    if (fs.existsSync(output)) {
      await vscode.commands.executeCommand('revealInExplorer', vscode.Uri.file(output));
      await vscode.commands.executeCommand('workbench.view.explorer');
    } else {
      await vscode.window.showTextDocument(vscode.Uri.file(path.join(run.dir, 'run.json')));
    }
  }

  /**
   * Follows again the runs recorded `running` that no other process holds (activation). A lock
   * still held is looked at again a few times: after "Reload Window" the previous extension
   * host may still be letting go of it; a lock another window keeps holding is left alone.
   */
  async resumeFollowing(): Promise<void> {
    await this.runs.ensureLoaded().catch(() => undefined);
    // A run left `preparing` by a client that died before its job started is attached too:
    // attach deletes its pods and fails it (`interrupted before the job started`).
    let pending = this.runs.all.filter(
      (r) => (r.state === 'running' || r.state === 'preparing') && !this.followed.has(r.id),
    );
    const told = new Set<string>();
    for (let look = 0; look < RESUME_LOOKS && pending.length > 0; look++) {
      if (look > 0) {
        try {
          await this.clock.sleep(RESUME_LOOK_MS, this.closing.signal);
        } catch {
          return;
        }
      }
      const held: RunSummary[] = [];
      for (const run of pending) {
        if (this.followed.has(run.id)) continue;
        const folder = this.folderOfRun(run);
        if (!folder) continue;
        const session = await this.session(folder);
        // A stale lock (its holder died: a killed extension host, a crashed CLI) is no holder:
        // attach takes it over.
        const holder = session.store.lockHolder(run.id);
        if (holder !== null && holder.stale === null) {
          if (!told.has(run.id)) {
            this.log.info(`Run ${run.id} is followed by another process; not attaching for now.`);
            told.add(run.id);
          }
          held.push(run);
          continue;
        }
        this.log.info(`Following run ${run.id} again.`);
        void this.attach(run, true);
      }
      pending = held;
    }
  }

  // ----------------------------------------------------------------- events

  /** Runs whose pod answered SSH: their pod log no longer goes to the output channel. */
  private readonly booted = new Set<string>();

  private onEvent(event: CoreEvent): void {
    if (event.type === 'metric') {
      const f = this.followed.get(event.runId);
      if (f) {
        f.pace.add(event.metric);
        f.lastMetricMs = this.clock.nowMs();
      }
    }
    if (event.type === 'jobStatus' && event.status.kind !== 'running') {
      this.showRetrieval(event.runId);
    }
    if (event.type === 'pod') this.log.info(`${event.runId}: ${podText(event)}`);
    // The pod's boot log (already redacted by the core), until its pod answers SSH.
    if (event.type === 'pod' && event.status.kind === 'ready') this.booted.add(event.runId);
    if (event.type === 'podLog' && !this.booted.has(event.runId))
      this.log.info(`${event.runId} pod ${event.source}: ${event.line}`);
    if (event.type === 'runState') {
      this.log.info(
        `Run ${event.runId} ${event.state}${event.message ? `: ${event.message}` : ''}`,
      );
      this.refreshViews();
    }
    if (event.type === 'pod') this.refreshViews();
    if (event.type === 'warning') this.log.warn(event.message);
    this.log.coreEvent(event);
    // A run's end is notified once its flow returned (finish), with the flow's error and hint
    // when it failed: the runState event alone would say the same thing twice.
    if (event.type !== 'runState') this.notify(event);
  }

  private notify(event: CoreEvent): void {
    this.show(notificationFor(event));
  }

  /** Shows `n` unless its key was shown already (an overrun, a run's end: once per run). */
  private show(n: Notification | null): void {
    if (n === null || !this.once.first(n.key)) return;
    const show =
      n.severity === 'error'
        ? vscode.window.showErrorMessage
        : n.severity === 'warning'
          ? vscode.window.showWarningMessage
          : vscode.window.showInformationMessage;
    void show(this.log.redact(n.message), ...n.actions).then((choice) =>
      this.act(choice as NotifyAction | undefined, n.runId),
    );
  }

  private async act(action: NotifyAction | undefined, runId: string | null): Promise<void> {
    if (action === 'Show Pods') {
      await vscode.commands.executeCommand('overbrainer.showPods');
      return;
    }
    if (action === undefined || runId === null) return;
    await this.runs.refresh().catch(() => undefined);
    const run = this.runs.all.find((r) => r.id === runId);
    const arg = run ?? undefined;
    switch (action) {
      case 'Keep Pod':
        return this.keep(arg, true);
      case 'Open Run':
        // The command, so the run's panel (the webview) opens however it is registered.
        await vscode.commands.executeCommand('overbrainer.showRun', arg);
        return;
      case 'Attach':
        return this.attach(arg);
      case 'Remove Pod':
        return this.removePod(arg);
      case 'Open Output':
        return this.openOutput(run);
      case 'Resume Run':
        return this.resume(arg);
    }
  }

  /**
   * The job of a followed run ended: its results are retrieved and its pod ended under a
   * progress until the flow returns. Not cancellable: retrieval and the pod's end are shielded
   * (spec §8), and the watchdog deletes nothing of a job that ended while they run.
   */
  private showRetrieval(runId: string): void {
    const f = this.followed.get(runId);
    if (f === undefined || f.retrieving !== null) return;
    const done = new Promise<void>((resolve) => (f.retrieving = resolve));
    void vscode.window.withProgress(
      {
        location: vscode.ProgressLocation.Notification,
        title: `Overbrainer: retrieving the results of ${runId}`,
        cancellable: false,
      },
      () => done,
    );
  }

  private updateStatus(): void {
    const enabled = vscode.workspace
      .getConfiguration('overbrainer')
      .get<boolean>('statusBar.enabled', true);
    const f = this.current === null ? undefined : this.followed.get(this.current);
    if (!enabled || f === undefined) {
      this.statusItem.hide();
      return;
    }
    const now = this.clock.nowMs();
    let pod: DeadlineView | null = null;
    try {
      pod = f.session.store.loadPod(f.runId);
    } catch {
      // A pod record mid-write: keep the countdown without a deadline this second.
    }
    const etaMs = etaFromNow(f.pace.eta(), now - f.lastMetricMs);
    const spend = runSpendLines(f.session.store, f.runId, null, now, { etaMs });
    const view = statusForPod(f.runId, pod, now, etaMs, spend);
    this.statusItem.text = view.text;
    this.statusItem.tooltip = view.tooltip;
    this.statusItem.backgroundColor =
      view.background === 'none'
        ? undefined
        : new vscode.ThemeColor(
            view.background === 'error'
              ? 'statusBarItem.errorBackground'
              : 'statusBarItem.warningBackground',
          );
    this.statusItem.show();
  }

  /** Both views from the records (the Pods view only once shown: it loads lazily). */
  private refreshViews(): void {
    void this.runs.refresh().catch(() => undefined);
    if (this.pods.isLoaded) void this.pods.refresh().catch(() => undefined);
  }

  dispose(): void {
    this.closing.abort();
    clearInterval(this.ticker);
    for (const sub of this.subs) sub.dispose();
    // Stop following only: aborting after the job started never deletes a pod.
    for (const f of this.followed.values()) {
      f.abort.abort(Object.assign(new Error('VS Code window closing'), { name: 'AbortError' }));
    }
    this.statusItem.dispose();
  }
}

const FORCE_CHOICE = 'Force: Delete Anyway';
/** How often, and how long apart, activation looks again at a run whose lock is held. */
const RESUME_LOOKS = 12;
const RESUME_LOOK_MS = 5_000;

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

function stockText(gpu: GpuType): string {
  return gpu.availability === null ? 'stock unknown' : `stock ${gpu.availability.toLowerCase()}`;
}

function podText(event: Extract<CoreEvent, { type: 'pod' }>): string {
  const s = event.status;
  switch (s.kind) {
    case 'creating':
      return `creating a pod on ${s.gpuType}`;
    case 'unavailable':
      return `${s.gpuType} unavailable (${s.reason})`;
    case 'created':
      return `pod ${s.podId} created on ${s.gpuType}`;
    case 'ready':
      return `pod ${s.podId} ready`;
    case 'deleting':
      return `deleting pod ${s.podId} (${s.reason})`;
    case 'deleted':
      return `pod ${s.podId} deleted`;
    case 'kept':
      return `pod ${s.podId} kept`;
  }
}

/** A missing or refused (401) API key, anywhere in the error's cause chain. */
function keyProblem(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e !== null && e !== undefined && depth < 5; depth++) {
    if (e instanceof SetupError) return e.needsKey;
    if (e instanceof ApiError) return e.kind === 'unauthorized';
    e = e instanceof Error ? e.cause : undefined;
  }
  return false;
}
