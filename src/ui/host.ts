import type * as vscode from 'vscode';
import type { Log } from './log';
import type { PythonEnvironments } from './sweeps/sweepPython';

/**
 * The small slice of VS Code the command handlers and the run panels use, typed, so that they run in unit tests
 * against a fake and in production against the real API (`vscodeHost()` passes `vscode.window`,
 * `vscode.commands` and `vscode.workspace` themselves). Only types come from `vscode` here.
 */
export type WindowPort = Pick<
  typeof vscode.window,
  | 'showInformationMessage'
  | 'showWarningMessage'
  | 'showErrorMessage'
  | 'showQuickPick'
  | 'showWorkspaceFolderPick'
  | 'withProgress'
  | 'showTextDocument'
  | 'createTerminal'
  | 'createWebviewPanel'
>;

export interface UiHost {
  window: WindowPort;
  commands: Pick<typeof vscode.commands, 'executeCommand'>;
  /** `isTrusted`: Workspace Trust (false in Restricted Mode). */
  workspace: Pick<typeof vscode.workspace, 'workspaceFolders' | 'getConfiguration' | 'isTrusted'>;
  /** `vscode.ProgressLocation`'s two values the handlers use. */
  progress: { notification: vscode.ProgressLocation; window: vscode.ProgressLocation };
  /** `vscode.ViewColumn`'s two values the run panels open in. */
  viewColumn: { active: vscode.ViewColumn; beside: vscode.ViewColumn };
  /** `vscode.Uri.file`. */
  fileUri(fsPath: string): vscode.Uri;
  /** `vscode.Uri.joinPath`. */
  joinUri(base: vscode.Uri, ...segments: string[]): vscode.Uri;
  /** A read-only run log document (scheme `overbrainer-log`): its path, the run directory as query. */
  logUri(runDir: string, docPath: string): vscode.Uri;
  /** The runs folder of a workspace folder (setting `overbrainer.runsFolder`, default `runs`). */
  runsDir(folder: vscode.WorkspaceFolder): string;
  /** The environment the sessions read (`process.env` in production). */
  env: NodeJS.ProcessEnv;
  /** The Python extension's environments API, null when it is not installed (absent: never). */
  pythonEnvironments?: () => Promise<PythonEnvironments | null>;
}

/** The part of the output channel's Log the handlers use. */
export type LogPort = Pick<Log, 'info' | 'warn' | 'error' | 'redact' | 'show' | 'coreEvent'>;
