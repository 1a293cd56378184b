import * as path from 'node:path';
import * as vscode from 'vscode';
import { CONFIG_FILE, loadConfig, type ConfigError } from '../core/flow/config';

/** A config error as a Problems entry: its line and column (1-based in the core), message and hint. */
export function toDiagnostic(error: ConfigError): vscode.Diagnostic {
  const line = Math.max(0, error.line - 1);
  const column = Math.max(0, error.column - 1);
  const range = new vscode.Range(line, column, line, column + Math.max(1, error.key.length || 1));
  const diagnostic = new vscode.Diagnostic(
    range,
    `${error.message}. ${error.hint}`,
    vscode.DiagnosticSeverity.Error,
  );
  diagnostic.source = 'overbrainer';
  if (error.key !== '') diagnostic.code = error.key;
  return diagnostic;
}

/**
 * Keeps the Problems panel in step with each workspace folder's overbrainer.toml: checked at
 * activation and on every save or delete. Errors from the environment (file `env:NAME`) are
 * not about the file and go to the log only.
 */
export function watchConfigDiagnostics(): vscode.Disposable {
  const collection = vscode.languages.createDiagnosticCollection('overbrainer');
  const check = (folder: vscode.WorkspaceFolder): void => {
    const file = vscode.Uri.file(path.join(folder.uri.fsPath, CONFIG_FILE));
    const loaded = loadConfig(folder.uri.fsPath);
    if (loaded.ok) {
      collection.delete(file);
      return;
    }
    const inFile = loaded.errors.filter((e) => !e.file.startsWith('env:'));
    // A missing file is not a problem to show: the welcome view offers to create it.
    if (inFile.length === 1 && inFile[0]?.message.startsWith('there is no ')) {
      collection.delete(file);
      return;
    }
    collection.set(file, inFile.map(toDiagnostic));
  };
  const checkAll = (): void => {
    for (const folder of vscode.workspace.workspaceFolders ?? []) {
      if (folder.uri.scheme === 'file') check(folder);
    }
  };
  const onFile = (uri: vscode.Uri): void => {
    if (path.basename(uri.fsPath) !== CONFIG_FILE) return;
    const folder = vscode.workspace.getWorkspaceFolder(uri);
    if (folder) check(folder);
  };
  const watcher = vscode.workspace.createFileSystemWatcher(`**/${CONFIG_FILE}`);
  const subs = [
    collection,
    watcher,
    watcher.onDidChange(onFile),
    watcher.onDidCreate(onFile),
    watcher.onDidDelete(onFile),
    vscode.workspace.onDidSaveTextDocument((doc) => onFile(doc.uri)),
    vscode.workspace.onDidChangeWorkspaceFolders(checkAll),
  ];
  checkAll();
  return vscode.Disposable.from(...subs);
}
