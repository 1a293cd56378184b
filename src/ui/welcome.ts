import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { CONFIG_FILE } from '../core/flow/config';
import type { ApiKeyStore } from './apiKey';

/**
 * The context keys the views' welcome contents (package.json `viewsWelcome`) depend on. Unset
 * before activation, so a view shown while the extension starts says "Loading…" (never "There
 * is no data provider registered"), until its first listing ends.
 */
export const WELCOME_KEYS = {
  /** The Runs view's first listing ended (the other keys are set by then). */
  runsLoaded: 'overbrainer.runsLoaded',
  /** The Pods view's first listing ended. */
  podsLoaded: 'overbrainer.podsLoaded',
  /** A workspace folder has an overbrainer.toml: the welcome offers Train, not Create. */
  hasConfig: 'overbrainer.hasConfig',
  /** A Runpod API key is stored or in the environment: the welcome no longer asks for it. */
  hasApiKey: 'overbrainer.hasApiKey',
} as const;

/** A list whose first load ends some time after activation (the Runs and Pods models). */
export interface Settling {
  readonly hasSettled: boolean;
  onDidSettle(listener: () => void): { dispose(): void };
}

/** Keeps the welcome's context keys in step with the config files, the key and the listings. */
export class WelcomeContext implements vscode.Disposable {
  private readonly subs: { dispose(): void }[] = [];

  constructor(
    private readonly apiKeys: ApiKeyStore,
    runs: Settling,
    pods: Settling,
  ) {
    // The keys the Runs welcome reads are set before it leaves "Loading…" (no wrong button).
    this.whenSettled(runs, async () => {
      await Promise.all([this.refreshConfig(), this.refreshKey()]);
      await setContext(WELCOME_KEYS.runsLoaded, true);
    });
    this.whenSettled(pods, () => setContext(WELCOME_KEYS.podsLoaded, true));
    const watcher = vscode.workspace.createFileSystemWatcher(`**/${CONFIG_FILE}`);
    const changed = (): void => void this.refreshConfig();
    this.subs.push(
      watcher,
      watcher.onDidCreate(changed),
      watcher.onDidDelete(changed),
      vscode.workspace.onDidChangeWorkspaceFolders(changed),
    );
  }

  /** After the key is stored or cleared. */
  async refreshKey(): Promise<void> {
    const key = await this.apiKeys.get().catch(() => null);
    await setContext(WELCOME_KEYS.hasApiKey, key !== null);
  }

  async refreshConfig(): Promise<void> {
    const any = (vscode.workspace.workspaceFolders ?? []).some(
      (f) => f.uri.scheme === 'file' && fs.existsSync(path.join(f.uri.fsPath, CONFIG_FILE)),
    );
    await setContext(WELCOME_KEYS.hasConfig, any);
  }

  private whenSettled(list: Settling, then: () => Promise<void>): void {
    if (list.hasSettled) {
      void then();
      return;
    }
    const sub = list.onDidSettle(() => {
      sub.dispose();
      void then();
    });
    this.subs.push(sub);
  }

  dispose(): void {
    for (const sub of this.subs) sub.dispose();
  }
}

async function setContext(key: string, value: boolean): Promise<void> {
  await vscode.commands.executeCommand('setContext', key, value);
}
