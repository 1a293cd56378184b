import * as path from 'node:path';
import * as vscode from 'vscode';
import type { ComposedUi } from './ui/composition';
import type { PodsItem } from './ui/pods/podsModel';
import type { RunsNode } from './ui/runs/runsModel';
import type { SpendRowView } from './ui/spend/spendModel';
import type { SweepsNode } from './ui/sweeps/sweepsModel';
import { requireWithCodeCache } from './boot/codeCache';
import { DeferredTree } from './boot/deferredTree';
import { anyRunToFollow } from './boot/runsToFollow';
import { COMMAND_IDS } from './ui/commands/commandIds';
import { Log } from './ui/log';
import { Redactor } from './core/redact';
import { runsFolderName } from './ui/runs/runsFolderName';

/** The config file (the core's CONFIG_FILE; importing the config module would load its codecs). */
const CONFIG_FILE = 'overbrainer.toml';
/** The run panel's webview type (RUN_VIEW_TYPE in src/ui/panel/runPanel.ts). */
const RUN_VIEW_TYPE = 'overbrainer.run';

/** The UI's composition (src/ui/composition.ts) with the core, bundled beside this one (esbuild.mjs). */
const CORE_BUNDLE = 'extension-core.js';
/** How long after the core's load its V8 code is cached: the first work it does is compiled then. */
const CODE_CACHE_SAVE_DELAY_MS = 5_000;

/**
 * The thin first bundle: registers the commands, the views, the run panel's serializer and the
 * log channel, and nothing else. The core (config codecs, lifecycle, the controller, the models)
 * is loaded when a command runs, a view is first shown, a run panel is restored, an
 * overbrainer.toml is opened, saved or changed (its Problems entries), or a run recorded
 * `running` or `preparing` must be followed again: that last look is a directory listing and a
 * text search right after activation, and the core is loaded at once when it finds one.
 */
export function activate(context: vscode.ExtensionContext): void {
  const startedMs = performance.now();
  const redactor = new Redactor();
  const log = new Log(redactor);
  context.subscriptions.push(log);

  let core: ComposedUi | null = null;
  /** What loads the core on an event that needs it, until it is loaded. */
  const triggers: vscode.Disposable[] = [];
  const load = (why: string): ComposedUi => {
    if (core !== null) return core;
    const t0 = performance.now();
    const loaded = requireWithCodeCache<typeof import('./ui/composition')>(
      path.join(__dirname, CORE_BUNDLE),
      path.join(context.globalStorageUri.fsPath, 'code-cache'),
      (message) => log.info(`Code cache: ${message}.`),
    );
    core = loaded.exports.composeUi({ context, redactor, log, podsView });
    const saving = setTimeout(() => loaded.saveCache(), CODE_CACHE_SAVE_DELAY_MS);
    context.subscriptions.push({ dispose: () => clearTimeout(saving) });
    runsTree.attach(core.runsTree);
    podsTree.attach(core.podsTree);
    spendTree.attach(core.spendTree);
    sweepsTree.attach(core.sweepsTree);
    for (const trigger of triggers.splice(0)) trigger.dispose();
    log.info(
      `Core loaded in ${(performance.now() - t0).toFixed(1)} ms (${why}; ${loaded.cached ? 'from the code cache' : 'compiled'}).`,
    );
    return core;
  };

  // The views ask for their rows when first shown: that loads the core (a progress bar meanwhile).
  const runsTree = new DeferredTree<RunsNode>(async () => load('the Runs view').runsTree);
  const podsTree = new DeferredTree<PodsItem>(async () => load('the Pods view').podsTree);
  const spendTree = new DeferredTree<SpendRowView>(async () => load('the Spend view').spendTree);
  const sweepsTree = new DeferredTree<SweepsNode>(async () => load('the Sweeps view').sweepsTree);
  const podsView = vscode.window.createTreeView('overbrainer.pods', { treeDataProvider: podsTree });
  context.subscriptions.push(
    runsTree,
    podsTree,
    vscode.window.createTreeView('overbrainer.runs', { treeDataProvider: runsTree }),
    podsView,
    spendTree,
    vscode.window.createTreeView('overbrainer.spend', { treeDataProvider: spendTree }),
    sweepsTree,
    vscode.window.createTreeView('overbrainer.sweeps', { treeDataProvider: sweepsTree }),
    ...COMMAND_IDS.map((id) =>
      vscode.commands.registerCommand(id, (...args: unknown[]) =>
        load(`the command ${id}`).commands[id](...args),
      ),
    ),
    // A run panel left open before a reload comes back with the core behind it.
    vscode.window.registerWebviewPanelSerializer(RUN_VIEW_TYPE, {
      deserializeWebviewPanel: async (panel, state) =>
        load('a run panel to restore').restorePanel(panel, state),
    }),
  );

  // overbrainer.toml's Problems entries: the core checks every folder's file once it is loaded.
  const onConfig = (uri: vscode.Uri): void => {
    if (path.basename(uri.fsPath) === CONFIG_FILE) load(`${CONFIG_FILE} opened or changed`);
  };
  const watcher = vscode.workspace.createFileSystemWatcher(`**/${CONFIG_FILE}`);
  triggers.push(
    watcher,
    watcher.onDidChange(onConfig),
    watcher.onDidCreate(onConfig),
    watcher.onDidDelete(onConfig),
    vscode.workspace.onDidOpenTextDocument((doc) => onConfig(doc.uri)),
    vscode.workspace.onDidSaveTextDocument((doc) => onConfig(doc.uri)),
  );
  context.subscriptions.push({ dispose: () => triggers.splice(0).forEach((t) => t.dispose()) });

  log.info(
    `Overbrainer ${String(context.extension.packageJSON.version)} activated in ${(performance.now() - startedMs).toFixed(1)} ms.`,
  );

  // Right after activation (not in it): an editor already showing overbrainer.toml gets its
  // Problems, and a run this workspace left `running` is followed again: at once in a trusted
  // workspace, else once the user trusts it (Restricted Mode: no API call, SSH or job before).
  const followAgain = (): void => {
    const runsDirs = (vscode.workspace.workspaceFolders ?? [])
      .filter((folder) => folder.uri.scheme === 'file')
      .map((folder) => path.join(folder.uri.fsPath, runsFolderName(folder)));
    anyRunToFollow(runsDirs)
      .then((found) => (found ? load('a run to follow again').resumeFollowing() : undefined))
      .catch((error: unknown) =>
        log.warn(
          `Could not resume following: ${error instanceof Error ? error.message : String(error)}`,
        ),
      );
  };
  setImmediate(() => {
    if (vscode.workspace.textDocuments.some((doc) => path.basename(doc.uri.fsPath) === CONFIG_FILE))
      load(`${CONFIG_FILE} open`);
    if (vscode.workspace.isTrusted) {
      followAgain();
    } else {
      log.info(
        'This folder is not trusted: Overbrainer shows its runs from their records and makes no Runpod API call, no SSH connection and starts nothing until you trust it.',
      );
    }
  });
  context.subscriptions.push(
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      log.info('The folder is trusted now: following its running runs again, listing the pods.');
      core?.trustGranted();
      followAgain();
    }),
  );
}

/** The controller (a context subscription) aborts every follow; nothing deletes a pod here. */
export function deactivate(): void {}
