import * as path from 'node:path';
import type * as vscode from 'vscode';
import type { Clock } from '../core/clock';
import type { CoreEvent, EventBus } from '../core/events';
import { Pace } from '../core/flow/records';
import { describeError, hintOf } from '../core/errors';
import { timingFromEnv } from '../core/timing';
import type { ApiKeyStore } from './apiKey';
import type { JobSecretStore } from './jobSecrets';
import { Emitter } from './emitter';
import type { LogPort, UiHost } from './host';
import {
  notificationFor,
  OnceFilter,
  type Notification,
  type NotifyAction,
} from './runs/notifyModel';
import type { RunsModel, RunSummary } from './runs/runsModel';
import { WorkspaceSession } from './workspace';
import { keyProblem, trustProblem, untrustedError } from '../core/flow';

/** VS Code's command that opens the Workspace Trust editor. */
export const MANAGE_TRUST_COMMAND = 'workbench.trust.manage';
/** The button that runs it. */
export const MANAGE_TRUST_CHOICE = 'Manage Workspace Trust';

/** A run this window follows: aborting stops following (before the job starts it deletes the pod). */
export interface Followed {
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

/** What a notification's button does, given the context it was shown in. */
export type NotifyActionHandler = (
  ctx: UiContext,
  action: NotifyAction,
  runId: string | null,
) => Promise<void>;

export interface UiContextDeps {
  host: UiHost;
  bus: EventBus;
  clock: Clock;
  log: LogPort;
  apiKeys: ApiKeyStore;
  /** The job's secrets in SecretStorage (the HF token, named secrets); none when left out. */
  jobSecrets?: JobSecretStore;
  runs: RunsModel;
  pods: { refresh(): Promise<void>; isLoaded: boolean };
  /** What a notification's button does (the command families; none when left out). */
  act?: NotifyActionHandler;
}

/**
 * What every command family shares: the sessions, the pickers, the runs this window follows,
 * errors and notifications. The composition builds one; the command table hands it to each family.
 */
export class UiContext {
  readonly host: UiHost;
  readonly bus: EventBus;
  readonly clock: Clock;
  readonly log: LogPort;
  readonly runs: RunsModel;
  readonly followed = new Map<string, Followed>();
  /** The run the status bar shows (the last one followed). */
  current: string | null = null;
  /** Aborted when the window closes: ends the waits of resumeFollowing. */
  readonly closing = new AbortController();
  private readonly followedChanged = new Emitter<void>();
  /** Fires when the followed runs change (the status bar). */
  readonly onFollowedChange = this.followedChanged.event;
  private readonly act: NotifyActionHandler;
  private readonly apiKeys: ApiKeyStore;
  private readonly jobSecrets: JobSecretStore | null;
  private readonly pods: UiContextDeps['pods'];
  private readonly once = new OnceFilter();

  constructor(deps: UiContextDeps) {
    this.host = deps.host;
    this.bus = deps.bus;
    this.clock = deps.clock;
    this.log = deps.log;
    this.apiKeys = deps.apiKeys;
    this.jobSecrets = deps.jobSecrets ?? null;
    this.runs = deps.runs;
    this.pods = deps.pods;
    this.act = deps.act ?? (async () => undefined);
  }

  get window(): UiHost['window'] {
    return this.host.window;
  }

  // ----------------------------------------------------------------- sessions

  /**
   * A fresh session per command: the key and settings are read each time. The base URL is the
   * user's own setting (`machine` scope: a workspace's `.vscode/settings.json` cannot set it, and
   * a value found there anyway is ignored, said once in the log); the session of a folder VS
   * Code does not trust makes no API call, SSH connection or job.
   */
  async session(folder: vscode.WorkspaceFolder): Promise<WorkspaceSession> {
    const key = await this.apiKeys.get();
    const setting = this.host.workspace
      .getConfiguration('overbrainer', folder.uri)
      .inspect<string>('runpod.baseUrl');
    const ignored = setting?.workspaceFolderValue ?? setting?.workspaceValue;
    if (ignored !== undefined && this.once.first(`workspaceBaseUrl:${ignored}`)) {
      this.log.warn(
        `overbrainer.runpod.baseUrl in the workspace's settings (${ignored}) is ignored: where your API key goes is set in your user settings or VS Code's environment only.`,
      );
    }
    return new WorkspaceSession({
      dir: folder.uri.fsPath,
      runsDir: this.host.runsDir(folder),
      env: this.host.env,
      apiKey: key?.key ?? null,
      secretEnv: (await this.jobSecrets?.env().catch(() => undefined)) ?? {},
      baseUrl: setting?.globalValue ?? null,
      trusted: this.trusted,
      bus: this.bus,
      clock: this.clock,
      timing: timingFromEnv(this.host.env).timing,
    });
  }

  /** Whether VS Code trusts the workspace (Workspace Trust; always true where it is off). */
  get trusted(): boolean {
    return this.host.workspace.isTrusted !== false;
  }

  /**
   * True in a trusted workspace. Otherwise says that `what` needs the folder trusted, with a
   * button that opens Manage Workspace Trust, and returns false: nothing else is done.
   */
  async requireTrust(what: string): Promise<boolean> {
    if (this.trusted) return true;
    await this.showError('Overbrainer', untrustedError(what));
    return false;
  }

  async pickFolder(): Promise<vscode.WorkspaceFolder | undefined> {
    const folders = (this.host.workspace.workspaceFolders ?? []).filter(
      (f) => f.uri.scheme === 'file',
    );
    if (folders.length <= 1) return folders[0];
    return this.window.showWorkspaceFolderPick({ placeHolder: 'Workspace folder' });
  }

  folderOfRun(run: RunSummary): vscode.WorkspaceFolder | undefined {
    const runsDir = path.dirname(run.dir);
    return (this.host.workspace.workspaceFolders ?? []).find(
      (f) => this.host.runsDir(f) === runsDir,
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
      void this.window.showInformationMessage(`Overbrainer: no run to ${what}.`);
      return undefined;
    }
    const pick = await this.window.showQuickPick(
      candidates.map((run) => ({
        label: run.id,
        description: [run.state, run.target, run.pod?.state].filter(Boolean).join(' · '),
        run,
      })),
      { placeHolder: `Run to ${what}` },
    );
    return pick?.run;
  }

  // ----------------------------------------------------------------- errors and notifications

  /**
   * Shows an error with its hint; a missing or refused key offers "Set Runpod API Key", a folder
   * not trusted "Manage Workspace Trust".
   */
  async showError(prefix: string, error: unknown): Promise<void> {
    const hint = hintOf(error);
    const needsKey = keyProblem(error);
    const needsTrust = trustProblem(error);
    const text = this.log.redact(`${prefix}: ${describeError(error)}${hint ? ` — ${hint}` : ''}`);
    this.log.error(text);
    const actions = needsTrust
      ? [MANAGE_TRUST_CHOICE]
      : needsKey
        ? ['Set Runpod API Key']
        : ['Show Logs'];
    const choice = await this.window.showErrorMessage(text, ...actions);
    if (choice === 'Set Runpod API Key')
      await this.host.commands.executeCommand('overbrainer.setApiKey');
    if (choice === MANAGE_TRUST_CHOICE)
      await this.host.commands.executeCommand(MANAGE_TRUST_COMMAND);
    if (choice === 'Show Logs') this.log.show();
  }

  notify(event: CoreEvent): void {
    this.show(notificationFor(event));
  }

  /** Shows `n` unless its key was shown already (an overrun, a run's end: once per run). */
  show(n: Notification | null): void {
    if (n === null || !this.once.first(n.key)) return;
    const text = this.log.redact(n.message);
    const shown =
      n.severity === 'error'
        ? this.window.showErrorMessage(text, ...n.actions)
        : n.severity === 'warning'
          ? this.window.showWarningMessage(text, ...n.actions)
          : this.window.showInformationMessage(text, ...n.actions);
    void Promise.resolve(shown).then((choice) =>
      choice === undefined ? undefined : this.act(this, choice, n.runId),
    );
  }

  // ----------------------------------------------------------------- followed runs

  track(runId: string, session: WorkspaceSession, abort: AbortController): void {
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
    this.followedChanged.fire();
  }

  untrack(runId: string): void {
    this.followed.delete(runId);
    if (this.current === runId) this.current = [...this.followed.keys()].pop() ?? null;
    this.followedChanged.fire();
  }

  /**
   * Train opens the new run's live view beside the editor as soon as the run exists, unless the
   * setting `overbrainer.openRunViewOnTrain` is off. The Runs model is read first so the view
   * finds the run by its directory (never a QuickPick).
   */
  async openRunView(runDir: string): Promise<void> {
    const open = this.host.workspace
      .getConfiguration('overbrainer')
      .get<boolean>('openRunViewOnTrain', true);
    if (!open) return;
    await this.runs.refresh().catch(() => undefined);
    await this.host.commands.executeCommand('overbrainer.showRun', {
      dir: runDir,
      openOnTrain: true,
    });
  }

  /** Both views from the records (the Pods view only once shown: it loads lazily). */
  refreshViews(): void {
    void this.runs.refresh().catch(() => undefined);
    if (this.pods.isLoaded) void this.pods.refresh().catch(() => undefined);
  }
}

export { keyProblem, trustProblem };

/** A pod event in words (the progress line and the output channel). */
export function podText(event: Extract<CoreEvent, { type: 'pod' }>): string {
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
