import * as vscode from 'vscode';
import * as path from 'node:path';
import type { Clock } from '../../core/clock';
import { RunStore } from '../../core/flow/records';
import { classifyAccountPods, type PodsSource } from '../pods/podsModel';
import type { RunsFolder } from './runsSource';
import type { RunSummary } from './runsModel';
import { RUNS_FOLDER_SETTING, runsFolderName } from './runsFolderName';
import type { WorkspaceSession } from '../workspace';

export { RUNS_FOLDER_SETTING, runsFolderName };

/**
 * The runs folder of every local workspace folder. A setting that tries to leave the workspace
 * folder (absolute, `..`) falls back to `runs`, so the view never lists another tree.
 */
export function runsFolders(): RunsFolder[] {
  return (vscode.workspace.workspaceFolders ?? [])
    .filter((folder) => folder.uri.scheme === 'file')
    .map((folder) => ({
      dir: path.join(folder.uri.fsPath, runsFolderName(folder)),
      workspaceName: folder.name,
    }));
}

/**
 * The run records of the first workspace folder, in its runs folder as the setting names it (as
 * the Runs view reads it): what the Sweeps and Spend views read. Null without a folder.
 */
export function firstFolderStore(
  clock: Clock,
): { folder: vscode.WorkspaceFolder; store: RunStore } | null {
  const folder = vscode.workspace.workspaceFolders?.[0];
  if (folder === undefined) return null;
  return {
    folder,
    store: new RunStore(path.join(folder.uri.fsPath, runsFolderName(folder)), clock),
  };
}

/** How long after a change the runs folders are read once more (see watchRunsFolders). */
export const RUNS_SETTLE_MS = 1_000;

/**
 * Calls `onChange` when a run directory, run.json or pod.json appears, changes or disappears in
 * any runs folder (another window, the CLI, or the core writing), and re-creates its watchers when
 * the workspace folders or the runs-folder setting change.
 *
 * Every burst of changes is followed by one more call after RUNS_SETTLE_MS: a file written right
 * after its new directory can be missed by the OS watcher (the directory is not watched yet), and
 * the directory's own creation event alone would be read too early.
 */
export function watchRunsFolders(onChange: () => void, clock: Clock): vscode.Disposable {
  const abort = new AbortController();
  let settling = false;
  const changed = (): void => {
    onChange();
    if (settling) return;
    settling = true;
    clock.sleep(RUNS_SETTLE_MS, abort.signal).then(
      () => {
        settling = false;
        onChange();
      },
      () => undefined, // Disposed: nothing more to look at.
    );
  };
  let watchers: vscode.Disposable[] = [];
  const create = (): void => {
    for (const watcher of watchers) watcher.dispose();
    watchers = (vscode.workspace.workspaceFolders ?? []).map((folder) => {
      const runs = runsFolderName(folder).split(path.sep).join('/');
      const pattern = new vscode.RelativePattern(
        folder,
        `{${runs},${runs}/*,${runs}/*/run.json,${runs}/*/pod.json}`,
      );
      const watcher = vscode.workspace.createFileSystemWatcher(pattern);
      watcher.onDidCreate(changed);
      watcher.onDidChange(changed);
      watcher.onDidDelete(changed);
      return watcher;
    });
  };
  create();
  const folderSub = vscode.workspace.onDidChangeWorkspaceFolders(() => {
    create();
    changed();
  });
  const configSub = vscode.workspace.onDidChangeConfiguration((event) => {
    if (event.affectsConfiguration(RUNS_FOLDER_SETTING)) {
      create();
      changed();
    }
  });
  return {
    dispose: () => {
      abort.abort();
      folderSub.dispose();
      configSub.dispose();
      for (const watcher of watchers) watcher.dispose();
      watchers = [];
    },
  };
}

/**
 * The Pods view's source: the account's pods listed with a client of the first local workspace
 * folder's session (its key and base URL), classified against every runs folder's records with
 * the core's rules, and the runs as `localRuns` gives them (the Runs view's model: one read for
 * both views). The account is listed once `before` has answered.
 */
export function accountPodsSource(
  sessionOf: (folder: vscode.WorkspaceFolder) => Promise<WorkspaceSession>,
  localRuns: () => Promise<readonly RunSummary[]>,
  before: () => Promise<void>,
  clock: Clock,
): PodsSource {
  const localFolders = (): vscode.WorkspaceFolder[] =>
    (vscode.workspace.workspaceFolders ?? []).filter((folder) => folder.uri.scheme === 'file');
  return {
    fetchAccountPods: async () => {
      await before();
      const folder = localFolders()[0];
      if (folder === undefined) throw new Error('no workspace folder is open');
      const session = await sessionOf(folder);
      try {
        return await session.api().listPods();
      } finally {
        await session.close();
      }
    },
    classify: (pods) =>
      classifyAccountPods(
        pods,
        runsFolders().map((folder) => new RunStore(folder.dir, clock)),
      ),
    localRuns,
  };
}
