import * as path from 'node:path';
import * as vscode from 'vscode';

/**
 * The runs folder's name, on its own (no core import): the thin first bundle (src/extension.ts)
 * uses it to look for runs to follow again without loading the core.
 */

/** The setting naming the runs folder, relative to each workspace folder. */
export const RUNS_FOLDER_SETTING = 'overbrainer.runsFolder';

/**
 * The folder's runs folder, relative to it. A setting that tries to leave the workspace folder
 * (absolute, `..`) falls back to `runs`, so the view never lists another tree.
 */
export function runsFolderName(folder: vscode.WorkspaceFolder): string {
  const configured = vscode.workspace
    .getConfiguration('overbrainer', folder.uri)
    .get<string>('runsFolder', 'runs')
    .trim();
  const normalized = path.normalize(configured === '' ? 'runs' : configured);
  if (path.isAbsolute(normalized) || normalized.split(path.sep).includes('..')) return 'runs';
  return normalized;
}
