import type { Clock } from '../core/clock';
import { HintedError } from '../core/errors';
import {
  ENV_API_KEY,
  ENV_BASE_URL,
  configErrorWithoutHint,
  loadConfig,
  otherApiHost,
  runpodSettings,
  type Env,
  type OverbrainerConfig,
} from '../core/config';
import type { EventBus } from '../core/events';
import { CLIENT_VERSION, RunpodClient } from '../core/runpod/client';
import type { PodCtx } from '../core/pod/context';
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

/**
 * Why a Runpod command cannot start: no key (the UI offers "Set Runpod API Key"), a bad setting,
 * or a folder the user has not trusted (the UI offers "Manage Workspace Trust").
 */
export class SetupError extends HintedError<'not_trusted' | 'no_key' | 'bad_setting'> {
  declare readonly hint: string;

  constructor(
    message: string,
    hint: string,
    readonly needsKey: boolean,
    readonly needsTrust = false,
  ) {
    super(needsTrust ? 'not_trusted' : needsKey ? 'no_key' : 'bad_setting', message, hint);
    this.name = 'SetupError';
  }
}

/** VS Code's command that opens the Workspace Trust editor. */
export const MANAGE_TRUST_COMMAND = 'workbench.trust.manage';
/** The button that runs it. */
export const MANAGE_TRUST_CHOICE = 'Manage Workspace Trust';

/**
 * What an untrusted folder refuses: any Runpod API call, SSH connection or local job. `what` is
 * the action, e.g. "train".
 */
export function untrustedError(what: string): SetupError {
  return new SetupError(
    `This folder is not trusted, so Overbrainer does not ${what} from it: in a folder you have not trusted it shows runs from their records and makes no Runpod API call, no SSH connection and starts nothing.`,
    'Trust the folder (Manage Workspace Trust) if you know where it comes from, then run the command again.',
    false,
    true,
  );
}

export interface WorkspaceOptions {
  dir: string;
  runsDir: string;
  env: Env;
  /** The stored key, if any; wins over the environment. */
  apiKey: string | null;
  /**
   * The user-level setting's value; null when it is not set (the environment may still set
   * one). A workspace's value never comes here: where the key goes is the user's choice.
   */
  baseUrl: string | null;
  /** Whether VS Code trusts the folder: untrusted, no API call, SSH connection or job. */
  trusted: boolean;
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

  /** The Runpod client; throws SetupError without a key, or in a folder not trusted. */
  api(): RunpodClient {
    if (!this.options.trusted) throw untrustedError('call the Runpod API');
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
    const other = this.otherApiHost();
    if (other !== null) {
      // Each command builds its own session: each says where the key goes.
      this.options.bus.publish({ type: 'log', level: 'info', message: other });
    }
    return this.client;
  }

  /**
   * Where the key goes, in words, when that is neither Runpod's own API nor this machine (the
   * emulator); null otherwise. The choice was the user's (their settings or VS Code's
   * environment), never the workspace's.
   */
  otherApiHost(): string | null {
    const settings = runpodSettings(this.env());
    if (!settings.ok) return null;
    const host = otherApiHost(settings.settings.baseUrl);
    if (host === null) return null;
    const source =
      this.options.baseUrl !== null
        ? 'your user setting overbrainer.runpod.baseUrl'
        : `${ENV_BASE_URL} in VS Code's environment`;
    return `Runpod API: your API key goes to ${host} (${settings.settings.baseUrl}, from ${source}), not to Runpod's own API.`;
  }

  /**
   * FlowDeps; the client only when `needsApi` (a local target or a pod-less run needs none).
   * Every flow may connect or start a job: refused in a folder not trusted.
   */
  deps(needsApi: boolean): FlowDeps {
    if (!this.options.trusted) throw untrustedError('connect to a pod or start a job');
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
    if (!this.options.trusted) throw untrustedError('call the Runpod API');
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

  async close(): Promise<void> {
    const client = this.client;
    this.client = null;
    if (client) await client.close().catch(() => undefined);
  }
}
