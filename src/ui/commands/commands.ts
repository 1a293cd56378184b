import * as vscode from 'vscode';
import { API_KEY_ENV, validateApiKey, type ApiKeyStore } from '../apiKey';
import { COMMAND_IDS, notAvailableMessage, type CommandId } from './commandIds';
import type { Controller } from './controller';
import type { Log } from '../log';
import type { PodsModel } from '../pods/podsModel';
import type { RunPanels } from '../panel/runPanel';
import type { RunsModel } from '../runs/runsModel';
import { errorText } from '../runs/runsTree';

export interface CommandDeps {
  log: Log;
  apiKeys: ApiKeyStore;
  runs: RunsModel;
  pods: PodsModel;
  controller: Controller;
  /** The run webview's panels (Show Run, Compare Runs). */
  runPanels: RunPanels;
}

export type Handler = (...args: unknown[]) => unknown;

/**
 * Every contributed command's handler. Those whose feature has not landed say so instead of
 * doing nothing. The thin first bundle (src/extension.ts) registers the commands at activation
 * and calls these once the core is loaded.
 */
export function commandHandlers(deps: CommandDeps): Record<CommandId, Handler> {
  const c = deps.controller;
  const implemented: Partial<Record<CommandId, Handler>> = {
    'overbrainer.train': () => c.train(),
    'overbrainer.attach': (arg) => c.attach(arg),
    'overbrainer.cancel': (arg) => c.cancel(arg),
    'overbrainer.stopRun': (arg) => c.stopRun(arg),
    'overbrainer.resumeRun': (arg) => c.resume(arg),
    'overbrainer.keepPod': (arg) => c.keep(arg, true),
    'overbrainer.releasePod': (arg) => c.keep(arg, false),
    'overbrainer.removePod': (arg) => c.removePod(arg),
    'overbrainer.showRun': (arg) => deps.runPanels.showRun(arg),
    'overbrainer.compareRuns': (arg, selected) => deps.runPanels.compareRuns(arg, selected),
    'overbrainer.openSshTerminal': (arg) => c.openSshTerminal(arg),
    'overbrainer.createConfig': () => c.createConfig(),
    'overbrainer.pickGpuTypes': () => c.pickGpuTypes(),
    'overbrainer.pickDataCenters': () => c.pickDataCenters(),
    'overbrainer.pickVolume': () => c.pickVolume(),
    'overbrainer.setApiKey': () => setApiKey(deps),
    'overbrainer.showLogs': (arg) => c.showLogs(arg),
    'overbrainer.refreshRuns': () => refresh(deps, 'runs'),
    'overbrainer.refreshPods': () => refresh(deps, 'pods'),
    'overbrainer.showPods': async () => {
      await vscode.commands.executeCommand('overbrainer.pods.focus');
      await refresh(deps, 'pods');
    },
  };
  return Object.fromEntries(
    COMMAND_IDS.map((id) => [id, implemented[id] ?? (() => notAvailable(deps, id))]),
  ) as Record<CommandId, Handler>;
}

function notAvailable(deps: CommandDeps, id: CommandId): void {
  const message = notAvailableMessage(id);
  deps.log.info(message);
  void vscode.window.showInformationMessage(message);
}

/**
 * Asks for the key in a password box and stores it in SecretStorage. The key is never logged,
 * shown, or put in an error text; cancelling changes nothing.
 */
async function setApiKey(deps: CommandDeps): Promise<void> {
  const current = await deps.apiKeys.get();
  const already =
    current === null
      ? ''
      : current.source === 'secretStorage'
        ? 'A Runpod API key is already stored; a new one replaces it. '
        : `${API_KEY_ENV} is set; a stored key takes precedence over it. `;
  const key = await vscode.window.showInputBox({
    title: 'Overbrainer: Set Runpod API Key',
    prompt: `${already}Your Runpod API key (Runpod → Settings → API Keys). Stored in VS Code’s secret storage, never in settings or files.`,
    placeHolder: 'rpa_…',
    password: true,
    ignoreFocusOut: true,
    validateInput: (text) => validateApiKey(text),
  });
  if (key === undefined) return;
  try {
    await deps.apiKeys.set(key);
  } catch (error) {
    // SecretStorage errors come from the OS keyring; the redactor keeps the key out of them.
    const text = deps.log.redact(
      `Could not save the Runpod API key: ${errorText(error)}. Try "Overbrainer: Set Runpod API Key" again, or set ${API_KEY_ENV} in VS Code's environment.`,
    );
    deps.log.error(text);
    void vscode.window.showErrorMessage(text);
    return;
  }
  void deps.controller.welcome.refreshKey();
  deps.log.info('Runpod API key saved to VS Code secret storage.');
  void vscode.window.showInformationMessage('Runpod API key saved');
}

async function refresh(deps: CommandDeps, which: 'runs' | 'pods'): Promise<void> {
  try {
    await (which === 'runs' ? deps.runs : deps.pods).refresh();
  } catch (error) {
    const text = `Could not list ${which}: ${errorText(error)}. Check the runs folder (setting overbrainer.runsFolder) and try again.`;
    deps.log.error(text);
    void vscode.window.showErrorMessage(deps.log.redact(text));
  }
}
