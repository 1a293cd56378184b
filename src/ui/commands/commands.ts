import * as vscode from 'vscode';
import { API_KEY_ENV, validateApiKey, type ApiKeyStore } from '../apiKey';
import { validateSecretName, validateSecretValue, type JobSecretStore } from '../jobSecrets';
import { COMMAND_IDS, notAvailableMessage, type CommandId } from './commandIds';
import { createConfig, pickDataCenters, pickGpuTypes, pickVolume } from './configCommands';
import { attach } from '../runs/following';
import type { Log } from '../log';
import { keep, openSshTerminal, removePod } from '../pods/podCommands';
import type { PodsModel } from '../pods/podsModel';
import type { RunPanels } from '../panel/runPanel';
import type { SweepPages } from '../sweeps/sweepPage';
import { showLogs } from '../runs/runLogs';
import type { RunsModel } from '../runs/runsModel';
import { cancel, resume, stopRun } from './stopCommands';
import { train } from './trainCommand';
import { attachSweep, startSweep, stopSweep } from './sweepCommands';
import type { UiContext } from '../uiContext';
import type { WelcomeContext } from '../welcome';
import { describeError } from '../../core/errors';

export interface CommandDeps {
  /** What every command family shares (sessions, pickers, followed runs, errors). */
  ctx: UiContext;
  log: Log;
  apiKeys: ApiKeyStore;
  /** The job's secrets in SecretStorage (Set Hugging Face Token, Set Job Secret). */
  jobSecrets: JobSecretStore;
  runs: RunsModel;
  pods: PodsModel;
  /** The run webview's panels (Show Run, Compare Runs). */
  runPanels: RunPanels;
  /** The sweeps' pages (Open Sweep). */
  sweepPages: SweepPages;
  /** The welcome views' context keys (a key saved changes them). */
  welcome: WelcomeContext;
}

export type Handler = (...args: unknown[]) => unknown;

/**
 * The one table of the contributed commands: each id to its handler. Those whose feature has not
 * landed say so instead of doing nothing. The thin first bundle (src/extension.ts) registers the
 * commands at activation and calls these once the core is loaded.
 */
export function commandHandlers(deps: CommandDeps): Record<CommandId, Handler> {
  const { ctx } = deps;
  const implemented: Partial<Record<CommandId, Handler>> = {
    'overbrainer.train': () => train(ctx),
    'overbrainer.startSweep': () => startSweep(ctx),
    'overbrainer.stopSweep': (arg) => stopSweep(ctx, arg),
    'overbrainer.attachSweep': (arg) => attachSweep(ctx, arg),
    'overbrainer.refreshSweeps': () => ctx.refreshViews(),
    'overbrainer.openSweep': (arg) => deps.sweepPages.show(arg),
    'overbrainer.attach': (arg) => attach(ctx, arg),
    'overbrainer.cancel': (arg) => cancel(ctx, arg),
    'overbrainer.stopRun': (arg) => stopRun(ctx, arg),
    'overbrainer.resumeRun': (arg) => resume(ctx, arg),
    'overbrainer.keepPod': (arg) => keep(ctx, arg, true),
    'overbrainer.releasePod': (arg) => keep(ctx, arg, false),
    'overbrainer.removePod': (arg) => removePod(ctx, arg),
    'overbrainer.showRun': (arg) => deps.runPanels.showRun(arg),
    'overbrainer.compareRuns': (arg, selected) => deps.runPanels.compareRuns(arg, selected),
    'overbrainer.openSshTerminal': (arg) => openSshTerminal(ctx, arg),
    'overbrainer.createConfig': () => createConfig(ctx),
    'overbrainer.pickGpuTypes': () => pickGpuTypes(ctx),
    'overbrainer.pickDataCenters': () => pickDataCenters(ctx),
    'overbrainer.pickVolume': () => pickVolume(ctx),
    'overbrainer.setApiKey': () => setApiKey(deps),
    'overbrainer.setHfToken': () => setHfToken(deps),
    'overbrainer.setJobSecret': () => setJobSecret(deps),
    'overbrainer.showLogs': (arg) => showLogs(ctx, arg),
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
      `Could not save the Runpod API key: ${describeError(error)}. Try "Overbrainer: Set Runpod API Key" again, or set ${API_KEY_ENV} in VS Code's environment.`,
    );
    deps.log.error(text);
    void vscode.window.showErrorMessage(text);
    return;
  }
  void deps.welcome.refreshKey();
  deps.log.info('Runpod API key saved to VS Code secret storage.');
  void vscode.window.showInformationMessage('Runpod API key saved');
}

/**
 * Asks for the Hugging Face token in a password box and stores it in SecretStorage: the job gets
 * it as HF_TOKEN (the Hub push of hub_model_id, gated models). Never logged or shown.
 */
async function setHfToken(deps: CommandDeps): Promise<void> {
  const already = (await deps.jobSecrets.hasHfToken())
    ? 'A token is already stored; a new one replaces it. '
    : '';
  const token = await vscode.window.showInputBox({
    title: 'Overbrainer: Set Hugging Face Token',
    prompt: `${already}Your Hugging Face token (huggingface.co/settings/tokens; a write token to push with hub_model_id). Stored in VS Code's secret storage; runs get it as HF_TOKEN, never in a file.`,
    placeHolder: 'hf_…',
    password: true,
    ignoreFocusOut: true,
    validateInput: (text) => validateSecretValue(text),
  });
  if (token === undefined) return;
  await storeSecret(deps, 'the Hugging Face token', () => deps.jobSecrets.setHfToken(token));
}

/** Asks for a secret's name (as [training] secrets lists it) and value; stores it. */
async function setJobSecret(deps: CommandDeps): Promise<void> {
  const name = await vscode.window.showInputBox({
    title: 'Overbrainer: Set Job Secret (1/2)',
    prompt: 'The name the job reads, as [training] secrets lists it.',
    placeHolder: 'WANDB_API_KEY',
    ignoreFocusOut: true,
    validateInput: (text) => validateSecretName(text),
  });
  if (name === undefined) return;
  const value = await vscode.window.showInputBox({
    title: `Overbrainer: Set Job Secret (2/2): ${name.trim()}`,
    prompt: `The value of ${name.trim()}. Stored in VS Code's secret storage; runs get it in their environment, never in a file.`,
    password: true,
    ignoreFocusOut: true,
    validateInput: (text) => validateSecretValue(text),
  });
  if (value === undefined) return;
  await storeSecret(deps, name.trim(), () => deps.jobSecrets.set(name, value));
}

async function storeSecret(
  deps: CommandDeps,
  what: string,
  store: () => Promise<void>,
): Promise<void> {
  try {
    await store();
  } catch (error) {
    const text = deps.log.redact(`Could not save ${what}: ${describeError(error)}.`);
    deps.log.error(text);
    void vscode.window.showErrorMessage(text);
    return;
  }
  deps.log.info(`${what} saved to VS Code secret storage.`);
  void vscode.window.showInformationMessage(`Overbrainer: ${what} saved`);
}

async function refresh(deps: CommandDeps, which: 'runs' | 'pods'): Promise<void> {
  try {
    await (which === 'runs' ? deps.runs : deps.pods).refresh();
  } catch (error) {
    const text = `Could not list ${which}: ${describeError(error)}. Check the runs folder (setting overbrainer.runsFolder) and try again.`;
    deps.log.error(text);
    void vscode.window.showErrorMessage(deps.log.redact(text));
  }
}
