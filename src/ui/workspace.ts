import * as path from 'node:path';
import type { Clock } from '../core/clock';
import {
  ENV_API_KEY,
  ENV_BASE_URL,
  configErrorWithoutHint,
  loadConfig,
  runpodSettings,
  type Env,
  type OverbrainerConfig,
} from '../core/config';
import type { EventBus } from '../core/events';
import { CLIENT_VERSION, RunpodClient } from '../core/runpod/client';
import type { PodCtx } from '../core/runpod/context';
import type { FlowDeps } from '../core/flow';
import { RunStore } from '../core/runs/store';
import type { Timing } from '../core/timing';

/**
 * The extension's counterpart of the CLI's session setup (src/cli/main.ts): the same FlowDeps
 * from the same config loader and env names, with the API key from SecretStorage and the base URL
 * from the `overbrainer.runpod.baseUrl` setting layered over the environment. Free of `vscode`.
 */

/** Who the extension is in run locks and messages. */
export const VSCODE_OWNER = 'VS Code window';

/** Why a Runpod command cannot start: no key (the UI offers "Set Runpod API Key"), or a bad setting. */
export class SetupError extends Error {
  constructor(
    message: string,
    readonly hint: string,
    readonly needsKey: boolean,
  ) {
    super(message);
    this.name = 'SetupError';
  }
}

export interface WorkspaceOptions {
  dir: string;
  runsDir: string;
  env: Env;
  /** The stored key, if any; wins over the environment. */
  apiKey: string | null;
  /** The setting's value; null when it is the default (the environment may still set one). */
  baseUrl: string | null;
  bus: EventBus;
  clock: Clock;
  timing: Timing;
}

/** One workspace folder's run store and Runpod access. */
export class WorkspaceSession {
  readonly store: RunStore;
  private client: RunpodClient | null = null;

  constructor(readonly options: WorkspaceOptions) {
    this.store = new RunStore(options.runsDir, options.clock);
  }

  get dir(): string {
    return this.options.dir;
  }

  /** The env the config sees: the process env with the key and base URL applied. */
  env(): Env {
    const env: Record<string, string | undefined> = { ...this.options.env };
    if (this.options.apiKey !== null) env[ENV_API_KEY] = this.options.apiKey;
    if (this.options.baseUrl !== null) env[ENV_BASE_URL] = this.options.baseUrl;
    return env;
  }

  /** The validated overbrainer.toml, or the errors as one SetupError. */
  config(): OverbrainerConfig {
    const loaded = loadConfig(this.dir, this.env());
    if (loaded.ok) return loaded.config;
    // Each error's place and rule in the message, their hints once each in the hint (a
    // notification shows both: the hint is not repeated).
    const hints = [...new Set(loaded.errors.map((e) => e.hint))];
    throw new SetupError(
      loaded.errors.map((e) => configErrorWithoutHint(e)).join('\n'),
      hints.length > 0 ? hints.join(' ') : 'Fix overbrainer.toml (see the Problems panel).',
      false,
    );
  }

  /** The config when it loads; null otherwise (pod and run commands still work then). */
  configOrNull(): OverbrainerConfig | null {
    try {
      return this.config();
    } catch {
      return null;
    }
  }

  /** The Runpod client; throws SetupError without a key. */
  api(): RunpodClient {
    if (this.client) return this.client;
    const settings = runpodSettings(this.env());
    if (!settings.ok) {
      const first = settings.errors[0];
      throw new SetupError(
        settings.errors.map((e) => `${e.message}`).join('; '),
        first?.hint ?? '',
        first?.envVar === ENV_API_KEY,
      );
    }
    if (settings.settings.apiKey === null) {
      throw new SetupError(
        'No Runpod API key is set.',
        'Run "Overbrainer: Set Runpod API Key" with a key from the Runpod console (Settings → API Keys).',
        true,
      );
    }
    this.client = new RunpodClient({
      baseUrl: settings.settings.baseUrl,
      apiKey: settings.settings.apiKey,
      clock: this.options.clock,
      timing: this.options.timing,
      version: CLIENT_VERSION,
      log: (level, message) => this.options.bus.publish({ type: 'log', level, message }),
    });
    return this.client;
  }

  /** FlowDeps; the client only when `needsApi` (a local target or a pod-less run needs none). */
  deps(needsApi: boolean): FlowDeps {
    return {
      store: this.store,
      client: needsApi ? this.api() : this.apiOrNull(),
      bus: this.options.bus,
      clock: this.options.clock,
      timing: this.options.timing,
      version: CLIENT_VERSION,
      owner: VSCODE_OWNER,
    };
  }

  podCtx(): PodCtx {
    return {
      store: this.store,
      client: this.api(),
      bus: this.options.bus,
      clock: this.options.clock,
      timing: this.options.timing,
      version: CLIENT_VERSION,
    };
  }

  private apiOrNull(): RunpodClient | null {
    try {
      return this.api();
    } catch {
      return null;
    }
  }

  /** `runs/<id>/ssh/config` relative to the workspace folder, for the terminal's command line. */
  sshConfigPath(runId: string): string {
    return path.relative(this.dir, path.join(this.store.sshDir(runId), 'config'));
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = null;
    if (client) await client.close().catch(() => undefined);
  }
}
