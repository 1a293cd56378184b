import * as path from 'node:path';
import * as vscode from 'vscode';
import type { UiHost } from './host';
import type { PythonEnvironments } from './sweeps/sweepPython';
import { RUN_LOG_SCHEME } from './runs/runLogs';
import { runsFolderName } from './runs/runsFolders';

/** The real VS Code behind the handlers' UiHost. */
export function vscodeHost(): UiHost {
  return {
    window: vscode.window,
    commands: vscode.commands,
    workspace: vscode.workspace,
    progress: {
      notification: vscode.ProgressLocation.Notification,
      window: vscode.ProgressLocation.Window,
    },
    viewColumn: { active: vscode.ViewColumn.Active, beside: vscode.ViewColumn.Beside },
    fileUri: (fsPath) => vscode.Uri.file(fsPath),
    joinUri: (base, ...segments) => vscode.Uri.joinPath(base, ...segments),
    logUri: (runDir, docPath) =>
      vscode.Uri.from({ scheme: RUN_LOG_SCHEME, path: docPath, query: runDir }),
    runsDir: (folder) => path.join(folder.uri.fsPath, runsFolderName(folder)),
    env: process.env,
    pythonEnvironments: async () => {
      const extension = vscode.extensions.getExtension<{ environments?: PythonEnvironments }>(
        'ms-python.python',
      );
      if (extension === undefined) return null;
      const api = extension.isActive ? extension.exports : await extension.activate();
      return api?.environments ?? null;
    },
  };
}
