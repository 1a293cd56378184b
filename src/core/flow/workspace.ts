/**
 * One workspace folder as both front ends work with it, built once per command: its run store,
 * the env its config and API key come from, the Runpod client (built on first need), the flow's
 * dependencies, and the typed setup errors that carry the next action. The CLI and the extension
 * differ only in where the env comes from (the process and the workspace `.env`; VS Code's
 * environment with the stored key and the user's base URL) and in how they word a setup error.
 */
import * as path from 'node:path';
import type { Clock } from '../clock';
import { HintedError } from '../errors';
import type { EventBus } from '../events';
import type { Timing } from '../timing';
import {
  CONFIG_FILE,
  ENV_API_KEY,
  loadConfig,
  otherApiHost,
  runpodSettings,
  type ConfigError,
  type Env,
  type LoadedConfig,
} from '../config';
import { CLIENT_VERSION, RunpodClient } from '../runpod/client';
import { ApiError } from '../runpod/apiErrors';
import type { PodCtx } from '../pod/context';
import { RunStore } from '../runs/store';
import { FlowError, podCtx, type FlowDeps } from './deps';

/**
 * Why a command cannot start: no key (the next action sets one), a bad setting or config, or a
 * folder the user has not trusted (the next action trusts it).
 */
export class SetupError extends HintedError<'not_trusted' | 'no_key' | 'bad_setting'> {
  declare readonly hint: string;

  constructor(
    message: string,
    hint: string,
    readonly needsKey: boolean,
    readonly needsTrust = false,
    /** The settings' own errors (a bad OVERBRAINER_RUNPOD__* value), each with its position. */
    readonly settingErrors: readonly ConfigError[] = [],
  ) {
    super(needsTrust ? 'not_trusted' : needsKey ? 'no_key' : 'bad_setting', message, hint);
    this.name = 'SetupError';
  }
}

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

/** A missing or refused (401) API key, anywhere in the error's cause chain. */
export function keyProblem(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e !== null && e !== undefined && depth < 5; depth++) {
    if (e instanceof SetupError) return e.needsKey;
    if (e instanceof ApiError) return e.kind === 'unauthorized';
    if (e instanceof FlowError) return e.kind === 'no_api_key';
    e = e instanceof Error ? e.cause : undefined;
  }
  return false;
}

/** A folder not trusted (the workspace refused), anywhere in the error's cause chain. */
export function trustProblem(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e !== null && e !== undefined && depth < 5; depth++) {
    if (e instanceof SetupError) return e.needsTrust;
    e = e instanceof Error ? e.cause : undefined;
  }
  return false;
}

/** Where the key goes when that is neither Runpod's own API nor this machine (the emulator). */
export interface OtherApiHost {
  host: string;
  baseUrl: string;
}

export interface WorkspaceOptions {
  dir: string;
  /** Where the runs are; `<dir>/runs` unless told. */
  runsDir?: string;
  /** The env the config and the API settings see. */
  env: Env;
  bus: EventBus;
  clock: Clock;
  timing: Timing;
  /** Who follows, for lock messages ("VS Code window", "overbrainer CLI"). */
  owner: string;
  /** Whether the folder is trusted: untrusted, no API call, SSH connection or job. */
  trusted?: boolean;
  /** Told once, when the client is built for a host other than Runpod's (each front end words it). */
  onOtherApiHost?: (other: OtherApiHost) => void;
}

export class Workspace {
  readonly store: RunStore;
  readonly bus: EventBus;
  readonly clock: Clock;
  readonly timing: Timing;
  /** The env the API settings come from; the CLI's takes in the workspace `.env` once read. */
  env: Env;
  private built: RunpodClient | null = null;

  constructor(readonly options: WorkspaceOptions) {
    this.store = new RunStore(options.runsDir ?? path.join(options.dir, 'runs'), options.clock);
    this.bus = options.bus;
    this.clock = options.clock;
    this.timing = options.timing;
    this.env = options.env;
  }

  get dir(): string {
    return this.options.dir;
  }

  get trusted(): boolean {
    return this.options.trusted !== false;
  }

  /** The client built so far (null: none yet, or closed). */
  get client(): RunpodClient | null {
    return this.built;
  }

  /** overbrainer.toml with the env overlay (and the env the workspace `.env` makes). */
  loadConfig(): LoadedConfig {
    return loadConfig(this.dir, this.env);
  }

  /** overbrainer.toml's path. */
  get configFile(): string {
    return path.join(this.dir, CONFIG_FILE);
  }

  /**
   * The Runpod client. Throws a SetupError in a folder not trusted, for a bad setting, and for a
   * missing key when `required`; without a key and not required, null (a local target, a run
   * without a pod).
   */
  api(required: true): RunpodClient;
  api(required: boolean): RunpodClient | null;
  api(required: boolean): RunpodClient | null {
    if (!this.trusted) throw untrustedError('call the Runpod API');
    if (this.built) return this.built;
    const settings = runpodSettings(this.env);
    if (!settings.ok) {
      const first = settings.errors[0];
      throw new SetupError(
        settings.errors.map((e) => `${e.message}`).join('; '),
        first?.hint ??
          'Fix the OVERBRAINER_RUNPOD__* setting the message names, then run the command again.',
        first?.envVar === ENV_API_KEY,
        false,
        settings.errors,
      );
    }
    if (settings.settings.apiKey === null) {
      if (!required) return null;
      throw new SetupError(
        'No Runpod API key is set.',
        'Run "Overbrainer: Set Runpod API Key" with a key from the Runpod console (Settings → API Keys).',
        true,
      );
    }
    const other = this.otherApiHost();
    if (other !== null) this.options.onOtherApiHost?.(other);
    this.built = new RunpodClient({
      baseUrl: settings.settings.baseUrl,
      apiKey: settings.settings.apiKey,
      clock: this.clock,
      timing: this.timing,
      version: CLIENT_VERSION,
      log: (level, message) => this.bus.publish({ type: 'log', level, message }),
    });
    return this.built;
  }

  /** The client when one can be built; null otherwise (no key, a bad setting, not trusted). */
  apiOrNull(): RunpodClient | null {
    try {
      return this.api(false);
    } catch {
      return null;
    }
  }

  /** Where the key goes, when that is neither Runpod's own API nor this machine; null otherwise. */
  otherApiHost(): OtherApiHost | null {
    const settings = runpodSettings(this.env);
    if (!settings.ok) return null;
    const host = otherApiHost(settings.settings.baseUrl);
    return host === null ? null : { host, baseUrl: settings.settings.baseUrl };
  }

  /** The flow's dependencies with `client` (null: no Runpod API, a local target only). */
  deps(client: RunpodClient | null): FlowDeps {
    return {
      store: this.store,
      client,
      bus: this.bus,
      clock: this.clock,
      timing: this.timing,
      version: CLIENT_VERSION,
      owner: this.options.owner,
      env: this.env,
    };
  }

  /**
   * What the pod layer's calls work with, for flow's commands only (a front end calls those):
   * `client` when given (the CLI's read-only limits on the workspace's client), else the
   * workspace's own. Throws a SetupError without a key or trust.
   */
  podCtx(client?: RunpodClient): PodCtx {
    if (!this.trusted) throw untrustedError('call the Runpod API');
    return podCtx(this.deps(client ?? this.api(true)));
  }

  /**
   * Whether the run has a pod record, or a cluster in run.json (so its commands need the Runpod
   * API).
   */
  hasPodRecord(runId: string): boolean {
    try {
      if (this.store.loadPod(runId) !== null) return true;
    } catch {
      // A damaged pod.json: the flow reports it; a pod may exist, so the API is needed.
      return true;
    }
    try {
      return (this.store.loadRun(runId).cluster ?? null) !== null;
    } catch {
      return false; // no run, or a damaged run.json: the flow reports it
    }
  }

  async close(): Promise<void> {
    const client = this.built;
    this.built = null;
    if (client) await client.close().catch(() => undefined);
  }
}
