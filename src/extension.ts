import * as vscode from 'vscode';
import { systemClock } from './core/clock';
import { EventBus } from './core/events';
import { ApiKeyStore } from './ui/apiKey';
import { Controller } from './ui/controller';
import { watchConfigDiagnostics } from './ui/diagnostics';
import { registerCommands } from './ui/commands';
import { Log } from './ui/log';
import { PodsModel } from './ui/podsModel';
import { Redactor } from './ui/redact';
import { accountPodsSource, runsFolders, watchRunsFolders } from './ui/runsFolders';
import { RunPanels } from './ui/runPanel';
import { RunsModel } from './ui/runsModel';
import { readRuns } from './ui/runsSource';
import { bindPodsViewMessage, errorText, podsTreeProvider, runsTreeProvider } from './ui/runsTree';
import { SpendTreeProvider } from './ui/spendTree';

/**
 * The composition root: builds the models, wires them to the views and commands, and registers
 * every resource with the context. Activation is cheap on purpose — no file is read, no API
 * call and no SSH connection is made until a view is shown or a command asks.
 */
export function activate(context: vscode.ExtensionContext): void {
  const startedMs = performance.now();
  const redactor = new Redactor();
  const log = new Log(redactor);
  context.subscriptions.push(log);

  const apiKeys = new ApiKeyStore(context.secrets, redactor);
  const runs = new RunsModel(() => readRuns(runsFolders()), { clock: systemClock });
  // The account's pods, listed at most once a minute with the session's key (built lazily).
  const late: { controller?: Controller } = {};
  const pods = new PodsModel(
    accountPodsSource((folder) => late.controller!.session(folder), systemClock),
    { clock: systemClock },
  );
  context.subscriptions.push(runs, pods);
  const bus = new EventBus();
  const controller = new Controller(bus, systemClock, log, apiKeys, runs, pods);
  late.controller = controller;
  context.subscriptions.push(
    controller,
    watchConfigDiagnostics(),
    // The Runs view's ETA from the metrics; a pod seen deleted leaves the Pods view at once.
    runs.observe(bus),
    bus.on((event) => {
      if (event.type === 'pod' && event.status.kind === 'deleted') {
        pods.noteDeleted(event.status.podId);
      }
    }),
  );

  // The run webview's panels (and their serializer, so panels come back after a reload).
  const runPanels = new RunPanels({
    extensionUri: context.extensionUri,
    bus,
    clock: systemClock,
    runs,
    log,
    pickRun: (arg, applies, what) => controller.pickRun(arg, applies, what),
  });
  context.subscriptions.push(runPanels);

  const runsTree = runsTreeProvider(runs, systemClock, log);
  const podsTree = podsTreeProvider(pods, systemClock, log);
  const podsView = vscode.window.createTreeView('overbrainer.pods', { treeDataProvider: podsTree });
  const spendTree = new SpendTreeProvider(systemClock);
  context.subscriptions.push(
    runsTree,
    podsTree,
    vscode.window.createTreeView('overbrainer.runs', { treeDataProvider: runsTree }),
    podsView,
    spendTree,
    vscode.window.createTreeView('overbrainer.spend', { treeDataProvider: spendTree }),
    bus.on((event) => {
      if (event.type === 'pod' || event.type === 'runState') spendTree.refresh();
    }),
    bindPodsViewMessage(podsView, pods, systemClock),
    ...registerCommands({ log, apiKeys, runs, pods, controller, runPanels }),
    // Only models already shown are reloaded; a hidden view loads when it is first shown.
    watchRunsFolders(() => {
      for (const model of [runs, pods]) {
        if (model.isLoaded) {
          model.refresh().catch((error: unknown) => log.warn(`Reload failed: ${errorText(error)}`));
        }
      }
    }, systemClock),
  );

  log.info(
    `Overbrainer ${String(context.extension.packageJSON.version)} activated in ${(performance.now() - startedMs).toFixed(1)} ms.`,
  );
  // Runs this workspace left `running` are followed again (unless another process holds them).
  controller
    .resumeFollowing()
    .catch((error: unknown) => log.warn(`Could not resume following: ${errorText(error)}`));
}

/** The controller (a context subscription) aborts every follow; nothing deletes a pod here. */
export function deactivate(): void {}
