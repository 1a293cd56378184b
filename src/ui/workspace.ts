import type { Clock } from '../core/clock';
import type { EventBus } from '../core/events';
import {
  ENV_API_KEY,
  ENV_BASE_URL,
  configErrorWithoutHint,
  SetupError,
  untrustedError,
  Workspace,
  type Env,
  type FlowDeps,
  type OverbrainerConfig,
  type RunpodClient,
  type RunStore,
} from '../core/flow';
import type { Timing } from '../core/timing';

/**
 * The extension's side of the core's Workspace (src/core/flow/workspace.ts), which the CLI's
 * session builds too: the API key from SecretStorage and the base URL from the
 * `overbrainer.runpod.baseUrl` setting layered over the environment; setup errors worded for
 * VS Code. Free of `vscode`.
 */

/** Who the extension is in run locks and messages. */
export const VSCODE_OWNER = 'VS Code window';

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
  /** The job's secrets stored in SecretStorage, as environment entries; they win over `env`. */
  secretEnv?: Readonly<Record<string, string>>;
  /** Whether VS Code trusts the folder: untrusted, no API call, SSH connection or job. */
  trusted: boolean;
  bus: EventBus;
  clock: Clock;
  timing: Timing;
}

/** One workspace folder's run store and Runpod access. */
export class WorkspaceSession {
  readonly workspace: Workspace;

  constructor(readonly options: WorkspaceOptions) {
    this.workspace = new Workspace({
      dir: options.dir,
      runsDir: options.runsDir,
      env: this.env(),
      bus: options.bus,
      clock: options.clock,
      timing: options.timing,
      owner: VSCODE_OWNER,
      trusted: options.trusted,
      // Each command builds its own session: each says where the key goes.
      onOtherApiHost: () => {
        const words = this.otherApiHost();
        if (words !== null) options.bus.publish({ type: 'log', level: 'info', message: words });
      },
    });
  }

  get dir(): string {
    return this.options.dir;
  }

  get store(): RunStore {
    return this.workspace.store;
  }

  /** The env the config sees: the process env with the key and base URL applied. */
  env(): Env {
    const env: Record<string, string | undefined> = {
      ...this.options.env,
      ...this.options.secretEnv,
    };
    if (this.options.apiKey !== null) env[ENV_API_KEY] = this.options.apiKey;
    if (this.options.baseUrl !== null) env[ENV_BASE_URL] = this.options.baseUrl;
    return env;
  }

  /** The validated overbrainer.toml, or the errors as one SetupError. */
  config(): OverbrainerConfig {
    const loaded = this.workspace.loadConfig();
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
    return this.workspace.api(true);
  }

  /**
   * Where the key goes, in words, when that is neither Runpod's own API nor this machine (the
   * emulator); null otherwise. The choice was the user's (their settings or VS Code's
   * environment), never the workspace's.
   */
  otherApiHost(): string | null {
    const other = this.workspace.otherApiHost();
    if (other === null) return null;
    const source =
      this.options.baseUrl !== null
        ? 'your user setting overbrainer.runpod.baseUrl'
        : `${ENV_BASE_URL} in VS Code's environment`;
    return `Runpod API: your API key goes to ${other.host} (${other.baseUrl}, from ${source}), not to Runpod's own API.`;
  }

  /**
   * FlowDeps; the client only when `needsApi` (a local target or a pod-less run needs none).
   * Every flow may connect or start a job: refused in a folder not trusted.
   */
  deps(needsApi: boolean): FlowDeps {
    if (!this.options.trusted) throw untrustedError('connect to a pod or start a job');
    return this.workspace.deps(needsApi ? this.api() : this.workspace.apiOrNull());
  }

  close(): Promise<void> {
    return this.workspace.close();
  }
}
