import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type * as vscode from 'vscode';
import type { CoreEvent } from '../../src/core/events';
import { EventBus } from '../../src/core/events';
import { ApiKeyStore, type SecretStore } from '../../src/ui/apiKey';
import type { LogPort, UiHost, WindowPort } from '../../src/ui/host';
import type { Pod } from '../../src/core/runpod/api';
import type { RunCluster } from '../../src/core/runs/clusterRecord';
import { Redactor } from '../../src/core/redact';
import { RunStore } from '../../src/core/runs/store';
import { RunsModel, type PodSummary, type RunSummary } from '../../src/ui/runs/runsModel';
import { UiContext, type NotifyActionHandler } from '../../src/ui/uiContext';
import { FakeClock } from '../helpers/fakeClock';
import { FakeWebviewPanel, joinUri } from './uiFakePanel';

/** A message, quick pick, progress, document or terminal the handlers asked the window for. */
export type Shown =
  | {
      kind: 'info' | 'warning' | 'error';
      message: string;
      modal: boolean;
      detail?: string;
      items: string[];
    }
  | { kind: 'quickPick'; items: unknown[]; placeHolder?: string }
  | { kind: 'progress'; title: string }
  | { kind: 'document'; fsPath: string; scheme?: string; query?: string }
  | { kind: 'terminal'; options: vscode.TerminalOptions }
  | { kind: 'command'; command: string; args: unknown[] };

/**
 * A fake of the slice of VS Code the command handlers take (UiHost): it records what they show
 * and answers each message or quick pick with `answer` (undefined: dismissed).
 */
export class FakeHost {
  readonly shown: Shown[] = [];
  answer: (shown: Shown) => unknown = () => undefined;
  folders: vscode.WorkspaceFolder[] = [];
  /** Settings of section `overbrainer` by key (the default when absent). */
  readonly settings = new Map<string, unknown>();
  /** What `inspect(key)` answers per scope (user: globalValue; workspace: workspaceValue…). */
  readonly scoped = new Map<string, Record<string, unknown>>();
  /** Workspace Trust: false is Restricted Mode. */
  trusted = true;
  readonly env: NodeJS.ProcessEnv = {};
  /** The webview panels the run panels opened, in order. */
  readonly panels: FakeWebviewPanel[] = [];

  private message(kind: 'info' | 'warning' | 'error') {
    return (message: string, ...rest: unknown[]): Promise<unknown> => {
      const options =
        typeof rest[0] === 'object' && rest[0] !== null
          ? (rest.shift() as vscode.MessageOptions)
          : {};
      const shown: Shown = {
        kind,
        message,
        modal: options.modal === true,
        detail: options.detail,
        items: rest as string[],
      };
      this.shown.push(shown);
      return Promise.resolve(this.answer(shown));
    };
  }

  readonly window = {
    showInformationMessage: this.message('info'),
    showWarningMessage: this.message('warning'),
    showErrorMessage: this.message('error'),
    showQuickPick: (items: unknown[], options?: vscode.QuickPickOptions): Promise<unknown> => {
      const shown: Shown = { kind: 'quickPick', items, placeHolder: options?.placeHolder };
      this.shown.push(shown);
      return Promise.resolve(this.answer(shown));
    },
    showWorkspaceFolderPick: (): Promise<unknown> => Promise.resolve(this.folders[0]),
    withProgress: <R>(
      options: vscode.ProgressOptions,
      task: (progress: unknown, token: unknown) => Promise<R>,
    ): Promise<R> => {
      this.shown.push({ kind: 'progress', title: options.title ?? '' });
      return task({ report: () => undefined }, { onCancellationRequested: () => undefined });
    },
    showTextDocument: (uri: vscode.Uri): Promise<unknown> => {
      this.shown.push({
        kind: 'document',
        fsPath: uri.fsPath,
        scheme: uri.scheme,
        query: uri.query,
      });
      return Promise.resolve(undefined);
    },
    createTerminal: (options: vscode.TerminalOptions): unknown => {
      this.shown.push({ kind: 'terminal', options });
      return { show: () => undefined };
    },
    createWebviewPanel: (viewType: string, title: string, column: unknown): unknown => {
      const panel = new FakeWebviewPanel(viewType, title, column);
      this.panels.push(panel);
      return panel;
    },
  };

  host(): UiHost {
    const workspace = {
      getConfiguration: () => ({
        get: (key: string, fallback?: unknown) =>
          this.settings.has(key) ? this.settings.get(key) : fallback,
        inspect: (key: string) => this.scoped.get(key),
      }),
    };
    // Read when the handlers ask, so a test may add a folder later (or trust the workspace).
    Object.defineProperty(workspace, 'workspaceFolders', { get: () => this.folders });
    Object.defineProperty(workspace, 'isTrusted', { get: () => this.trusted });
    return {
      window: this.window as unknown as WindowPort,
      commands: {
        executeCommand: (command: string, ...args: unknown[]) => {
          this.shown.push({ kind: 'command', command, args });
          return Promise.resolve(undefined);
        },
      } as UiHost['commands'],
      workspace: workspace as unknown as UiHost['workspace'],
      progress: { notification: 15, window: 10 } as UiHost['progress'],
      viewColumn: { active: -1, beside: -2 } as UiHost['viewColumn'],
      fileUri: (fsPath) => ({ fsPath, scheme: 'file' }) as vscode.Uri,
      joinUri,
      logUri: (runDir, docPath) =>
        ({
          fsPath: docPath,
          path: docPath,
          scheme: 'overbrainer-log',
          query: runDir,
        }) as vscode.Uri,
      runsDir: (f) => path.join(f.uri.fsPath, 'runs'),
      env: this.env,
    };
  }

  /** The messages shown, as "kind: text". */
  messages(): string[] {
    return this.shown.flatMap((s) =>
      s.kind === 'info' || s.kind === 'warning' || s.kind === 'error'
        ? [`${s.kind}: ${s.message}`]
        : [],
    );
  }
}

export function folder(dir: string): vscode.WorkspaceFolder {
  return { uri: { fsPath: dir, scheme: 'file' } as vscode.Uri, name: path.basename(dir), index: 0 };
}

/** What the log received. */
export class FakeLog implements LogPort {
  readonly lines: string[] = [];
  shown = 0;
  info(text: string): void {
    this.lines.push(`info ${text}`);
  }
  warn(text: string): void {
    this.lines.push(`warn ${text}`);
  }
  error(text: string): void {
    this.lines.push(`error ${text}`);
  }
  redact(text: string): string {
    return text;
  }
  show(): void {
    this.shown++;
  }
  coreEvent(_event: CoreEvent): void {}
}

class MemorySecrets implements SecretStore {
  private readonly values = new Map<string, string>();
  get(key: string) {
    return Promise.resolve(this.values.get(key));
  }
  store(key: string, value: string) {
    this.values.set(key, value);
    return Promise.resolve();
  }
  delete(key: string) {
    this.values.delete(key);
    return Promise.resolve();
  }
}

/** A UiContext over the fake host, with `runs` as the Runs model's records and `act` its notifications' buttons. */
export function fakeContext(
  runs: RunSummary[] = [],
  act?: NotifyActionHandler,
): {
  ctx: UiContext;
  fake: FakeHost;
  log: FakeLog;
  clock: FakeClock;
  apiKeys: ApiKeyStore;
} {
  const fake = new FakeHost();
  const log = new FakeLog();
  const clock = new FakeClock();
  const apiKeys = new ApiKeyStore(new MemorySecrets(), new Redactor(), {});
  const ctx = new UiContext({
    host: fake.host(),
    bus: new EventBus(),
    clock,
    log,
    apiKeys,
    runs: new RunsModel(() => Promise.resolve(runs), { clock }),
    pods: { refresh: () => Promise.resolve(), isLoaded: false },
    act,
  });
  return { ctx, fake, log, clock, apiKeys };
}

/** A run in `dir` (its ID the directory's name), running on pod `pod1` unless `over` says else. */
/** A run's two-node cluster (clu-1, members member-0 and member-1, both running). */
export function twoNodeCluster(): RunCluster {
  return {
    id: 'clu-1',
    name: 'overbrainer-r1-c1',
    gpuTypeId: 'NVIDIA A40',
    gpuCountPerPod: 1,
    costPerHourUsd: 0.4,
    createdAt: '2026-12-02T10:00:00Z',
    deletedAt: null,
    nodes: [0, 1].map((rank) => ({
      rank,
      podId: `member-${rank}`,
      ip: null,
      state: 'running' as const,
      deadlineUnixS: null,
      costCapAtUnixS: null,
      message: null,
    })),
    billedUsd: null,
    billedCheckedAt: null,
  };
}

export function runSummary(dir: string, over: Partial<RunSummary> = {}): RunSummary {
  return {
    id: path.basename(dir),
    dir,
    workspaceName: 'w',
    target: 'pod',
    createdUnixS: 1,
    state: 'running',
    message: null,
    problem: null,
    pod: podSummary('pod1'),
    ...over,
  };
}

/** Pod `podId` of a run's record, running, nothing else known unless `over` says. */
export function podSummary(podId: string | null, over: Partial<PodSummary> = {}): PodSummary {
  return {
    podId,
    state: 'running',
    gpuType: null,
    costPerHourUsd: null,
    deadlineUnixS: null,
    estimatedSpendUsd: null,
    keep: false,
    strayPodIds: [],
    ...over,
  };
}

/**
 * A runs/ store in a fresh temp directory for each test of the `describe` it is called in, on a
 * FakeClock at 2026-12-02 12:00 UTC; removed after each test.
 */
export function useTempStore(prefix: string): { root: string; store: RunStore; clock: FakeClock } {
  const lab = {} as { root: string; store: RunStore; clock: FakeClock };
  beforeEach(function () {
    lab.root = mkdtempSync(path.join(tmpdir(), prefix));
    lab.clock = new FakeClock(Date.parse('2026-12-02T12:00:00Z'));
    lab.store = new RunStore(path.join(lab.root, 'runs'), lab.clock);
  });
  afterEach(function () {
    rmSync(lab.root, { recursive: true, force: true });
  });
  return lab;
}

/** A running A40 pod of the account as the API lists it, named for run `runMarker`. */
export function accountPod(
  id: string,
  runMarker: string | null,
  name = `overbrainer-${runMarker}-1`,
): Pod {
  return {
    id,
    name,
    status: 'RUNNING',
    costPerHourUsd: 0.44,
    dataCenterId: null,
    gpu: { id: 'NVIDIA A40', count: 1 },
    sshDirect: null,
    runMarker,
    createdAt: '2026-12-02T11:00:00Z',
    cluster: null,
  };
}
