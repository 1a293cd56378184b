import * as vscode from 'vscode';
import { systemClock } from '../core/clock';
import { EventBus } from '../core/events';
import { ApiKeyStore } from './apiKey';
import { JobSecretStore } from './jobSecrets';
import type { CommandId } from './commands/commandIds';
import { RunLogDocuments } from './runs/runLogDocuments';
import { commandHandlers, type Handler } from './commands/commands';
import { act, CoreEventsView } from './commands/coreEvents';
import { watchConfigDiagnostics } from './diagnostics';
import type { Log } from './log';
import { PodsModel, type PodsItem } from './pods/podsModel';
import type { Redactor } from '../core/redact';
import { resumeFollowing } from './runs/following';
import { StatusBar } from './runs/statusBar';
import { accountPodsSource, runsFolders, watchRunsFolders } from './runs/runsFolders';
import { RunPanels } from './panel/runPanel';
import { RunsModel, TOP_LEVEL_RUNS, type RunsNode } from './runs/runsModel';
import { readNewestRuns, readRuns } from './runs/runsSource';
import { bindPodsViewMessage, podsTreeProvider, runsTreeProvider } from './runs/runsTree';
import type { SpendRowView } from './spend/spendModel';
import { SpendTreeProvider } from './spend/spendTree';
import { refreshesSpend } from './spend/spendModel';
import { UiContext } from './uiContext';
import type { SweepsNode } from './sweeps/sweepsModel';
import { refreshesSweeps } from './sweeps/sweepsModel';
import { SweepsTreeProvider } from './sweeps/sweepsTree';
import { SweepPages } from './sweeps/sweepPage';
import { vscodeHost } from './vscodeHost';
import { WelcomeContext } from './welcome';
import { describeError } from '../core/errors';

/** The workspace state's key of the run page chart's controls. */
const CHART_PREFS_KEY = 'overbrainer.chartPrefs';

/** What the thin first bundle (src/extension.ts) built at activation and hands to the core. */
export interface FirstBundle {
  context: vscode.ExtensionContext;
  redactor: Redactor;
  log: Log;
  podsView: vscode.TreeView<PodsItem>;
}

/** What the composed UI hands back to the thin bundle. */
export interface ComposedUi {
  commands: Record<CommandId, Handler>;
  runsTree: vscode.TreeDataProvider<RunsNode>;
  podsTree: vscode.TreeDataProvider<PodsItem>;
  spendTree: vscode.TreeDataProvider<SpendRowView>;
  sweepsTree: vscode.TreeDataProvider<SweepsNode>;
  /** The run panel's serializer (a panel VS Code restores after a reload). */
  restorePanel(panel: vscode.WebviewPanel, state: unknown): Promise<void>;
  /** Runs this workspace left `running` are followed again (unless another process holds them). */
  resumeFollowing(): Promise<void>;
  /** The user trusted the workspace: the views that held back their API calls list again. */
  trustGranted(): void;
}

/**
 * The composition root of everything past activation, in its own bundle (dist/extension-core.js)
 * that the thin first bundle requires when a command runs, a view is first shown, a run panel is
 * restored, overbrainer.toml changes or a run must be followed again: builds the models, the
 * UI context with its command table, the status bar and the panels, and registers their resources with the context. Building reads no
 * file and makes no API call or SSH connection; the Problems check of overbrainer.toml runs.
 */
export function composeUi(first: FirstBundle): ComposedUi {
  const { context, log } = first;
  const apiKeys = new ApiKeyStore(context.secrets, first.redactor);
  const jobSecrets = new JobSecretStore(context.secrets, first.redactor);
  const runs = new RunsModel(() => readRuns(runsFolders()), {
    clock: systemClock,
    newest: (count) => readNewestRuns(runsFolders(), count),
  });
  // The Pods and Spend views read the same records when the container shows: after the Runs
  // view's first rows are read (its failure is the Runs view's to show), then the whole list
  // (read in batches that yield, so those rows' answer goes out meanwhile: the Spend view's read
  // of every record is one synchronous pass, which may run before VS Code writes that answer) and a
  // turn of the event loop.
  const afterRunsListed = async (): Promise<void> => {
    await runs.newest(TOP_LEVEL_RUNS).catch(() => undefined);
    await runs.latest().catch(() => undefined);
    await new Promise((resolve) => setImmediate(resolve));
  };
  // The account's pods, listed at most once a minute with the session's key (built lazily).
  const late: { ctx?: UiContext } = {};
  const pods = new PodsModel(
    accountPodsSource(
      (folder) => late.ctx!.session(folder),
      () => runs.latest(),
      afterRunsListed,
      systemClock,
    ),
    { clock: systemClock },
  );
  context.subscriptions.push(runs, pods);
  const bus = new EventBus();
  const host = vscodeHost();
  const ctx = new UiContext({
    host,
    bus,
    clock: systemClock,
    log,
    apiKeys,
    jobSecrets,
    runs,
    pods,
    act,
  });
  late.ctx = ctx;
  const events = new CoreEventsView(ctx);
  const welcome = new WelcomeContext(apiKeys, runs, pods);
  context.subscriptions.push(
    bus.on((event) => events.onEvent(event)),
    new StatusBar(ctx, bus, systemClock),
    welcome,
    // Deactivation stops following only: aborting after the job started never deletes a pod.
    {
      dispose: () => {
        ctx.closing.abort();
        for (const f of ctx.followed.values()) {
          f.abort.abort(Object.assign(new Error('VS Code window closing'), { name: 'AbortError' }));
        }
      },
    },
    watchConfigDiagnostics(),
    // The Runs view's ETA from the metrics; a pod seen deleted leaves the Pods view at once.
    runs.observe(bus),
    bus.on((event) => {
      if (event.type === 'pod' && event.status.kind === 'deleted') {
        pods.noteDeleted(event.status.podId);
      }
    }),
  );

  // The run webview's panels (their serializer is registered by the thin bundle).
  const runPanels = new RunPanels({
    host,
    extensionUri: context.extensionUri,
    bus,
    clock: systemClock,
    runs,
    log,
    // The chart's smoothing, log scale and x: one choice per workspace.
    chartPrefs: {
      get: () => context.workspaceState.get<unknown>(CHART_PREFS_KEY),
      set: (value) => void context.workspaceState.update(CHART_PREFS_KEY, value),
    },
    pickRun: (arg, applies, what) => ctx.pickRun(arg, applies, what),
  });
  context.subscriptions.push(runPanels, new RunLogDocuments((text) => log.redact(text)));

  const runsTree = runsTreeProvider(runs, systemClock, log);
  const podsTree = podsTreeProvider(pods, systemClock, log);
  const spendTree = new SpendTreeProvider(systemClock, afterRunsListed);
  const sweepsTree = new SweepsTreeProvider(systemClock, log);
  const sweepPages = new SweepPages(host, systemClock, log);
  context.subscriptions.push(
    sweepPages,
    runsTree,
    podsTree,
    spendTree,
    sweepsTree,
    bus.on((event) => {
      if (refreshesSpend(event)) spendTree.refresh();
      if (refreshesSweeps(event)) sweepsTree.refresh();
      sweepPages.onEvent(event);
    }),
    bindPodsViewMessage(first.podsView, pods, systemClock),
    // Only models already shown are reloaded; a hidden view loads when it is first shown. The
    // Spend view reads the records again too: a bill read after a pod ended comes with no event.
    watchRunsFolders(() => {
      spendTree.refresh();
      sweepsTree.refresh();
      for (const model of [runs, pods]) {
        if (model.isLoaded) {
          model
            .refresh()
            .catch((error: unknown) => log.warn(`Reload failed: ${describeError(error)}`));
        }
      }
    }, systemClock),
  );
  return {
    commands: commandHandlers({
      ctx,
      log,
      apiKeys,
      jobSecrets,
      runs,
      pods,
      runPanels,
      sweepPages,
      welcome,
    }),
    runsTree,
    podsTree,
    spendTree,
    sweepsTree,
    restorePanel: (panel, state) => runPanels.restore(panel, state),
    resumeFollowing: () => resumeFollowing(ctx),
    trustGranted: () => {
      if (pods.isLoaded) pods.refresh().catch((error: unknown) => log.warn(describeError(error)));
      void welcome.refreshKey();
    },
  };
}
