/**
 * One CLI command's session on the same core as the extension: config and API key
 * from the workspace and the environment, events rendered on stderr, the
 * final line of a run on stdout, Ctrl-C (before the job starts: the pod is
 * deleted and the run failed; once the job runs: only the following stops; a
 * delete is never interrupted), errors with their hint, and the exit codes.
 * The commands themselves are in ./commands/.
 *
 * Test hook: OVERBRAINER_TIMING_SCALE=<factor ≥ 1> divides every production
 * duration of the core by `factor` (src/core/timing.ts `scaleTiming`), so the
 * integration tests run whole pod lifecycles against the emulator in seconds.
 * It is not in the usage on purpose: with it, deadlines, leases and graces no
 * longer mean what the docs say.
 */
import { describeError, HintedError, hintOf } from '../core/errors';
import { timingFromEnv } from '../core/timing';
import * as fs from 'node:fs';
import { isAbortError, systemClock, type Clock } from '../core/clock';
import { EventBus } from '../core/events';
import {
  CONFIG_FILE,
  ENV_API_KEY,
  FlowError,
  SetupError,
  Workspace,
  formatConfigError,
  readDotEnv,
  summaryLine,
  type Env,
  type FlowDeps,
  type FlowResult,
  type OverbrainerConfig,
  type RunStore,
  type RunpodClient,
} from '../core/flow';
import { RunpodConfigError } from '../core/flow/pods';
import { followLostWords, stopPodLogCaptures, PodError, noPodLeft } from '../core/flow/records';
import { sshCommand } from '../core/flow/ssh';
import { type Timing } from '../core/timing';
import { podStatusWords } from './format';
import { ReadOnlyCalls } from './readOnly';
import { CliRenderer } from './render';

/** What the CLI talks to: injected so the unit tests run it in-process. */
export interface CliIo {
  /** Writes one line to stdout. */
  stdout(line: string): void;
  /** Writes one line to stderr. */
  stderr(line: string): void;
  env: Env;
  cwd: string;
  /** Installs the Ctrl-C handler (replacing the default exit); returns its remover. */
  onInterrupt(handler: () => void): () => void;
  clock?: Clock;
  /** The process's own stdin and stdout, for `runs ssh` (absent: in-process tests). */
  terminal?: CliTerminal;
  /**
   * Only when stderr is a terminal: replaces the block of status lines redrawn in place below
   * the stderr lines (the boot log's last lines while a pod provisions). Absent: plain lines.
   */
  status?: (lines: string[]) => void;
}

/** The process's stdin and stdout as `runs ssh` hands them to a shell. */
export interface CliTerminal {
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
}

/** Exit codes. */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/** Prints `document` as indented JSON on stdout (every `--json`). */
export function printJson(s: { io: CliIo }, document: unknown): number {
  s.io.stdout(JSON.stringify(document, null, 2));
  return EXIT_OK;
}

/** Who the CLI is in run locks and messages. */
export const CLI_OWNER = 'overbrainer CLI';

/** A usage or configuration problem found before anything ran: exit 2. */
export class ConfigProblem extends HintedError<'config'> {
  constructor(readonly lines: string[]) {
    super(
      'config',
      lines.join('\n'),
      'Fix what the lines above name (overbrainer.toml, an OVERBRAINER_* variable, the command line), then run the command again.',
    );
    this.name = 'ConfigProblem';
  }
}

export { ReadOnlyTimeout } from './readOnly';

/** The hidden test hook (the core's timingFromEnv); a bad value is refused, naming it. */
export function timingFrom(env: Env): Timing {
  const { timing, problem } = timingFromEnv(env);
  if (problem !== null) throw new ConfigProblem([problem]);
  return timing;
}

/** Ctrl-C: the first aborts the command's signal, later ones are ignored with a note. */
export class Interrupts {
  readonly controller = new AbortController();
  private count = 0;
  private remove: (() => void) | null = null;
  /** Set once the run's job started: Ctrl-C then only stops following. */
  jobStarted = false;

  constructor(
    readonly io: CliIo,
    private readonly renderer: CliRenderer,
    /** What the first Ctrl-C does, in words; null to ignore every Ctrl-C (a delete runs). */
    private readonly first: ((jobStarted: boolean) => string) | null,
  ) {
    this.remove = io.onInterrupt(() => this.interrupted());
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  private interrupted(): void {
    this.count++;
    if (this.count === 1 && this.first !== null) {
      this.io.stderr(`interrupt: ${this.first(this.jobStarted)}`);
      const reason = new Error('interrupted (Ctrl-C)');
      reason.name = 'AbortError';
      this.controller.abort(reason);
      return;
    }
    const deleting = [...this.renderer.deleting];
    this.io.stderr(
      deleting.length > 0
        ? `interrupt ignored: pod ${deleting.join(', ')} is being deleted, and a delete is never interrupted; wait for it to be confirmed`
        : this.first === null
          ? 'interrupt ignored: pods are being deleted, and a delete is never interrupted; wait for it'
          : 'interrupt ignored: already stopping; wait for it',
    );
  }

  dispose(): void {
    this.remove?.();
    this.remove = null;
  }
}

export class Session {
  readonly clock: Clock;
  readonly bus = new EventBus();
  readonly renderer: CliRenderer;
  timing: Timing | null = null;
  interrupts: Interrupts | null = null;
  /** The workspace (run store, env, client), built on first use with the command's timing. */
  private built: Workspace | null = null;
  /** The read-only calls' limits, shared by all of the command's calls. */
  private readOnlyCalls: ReadOnlyCalls | null = null;
  /** The run the command works on, once known: its summary is printed even after a failure. */
  runId: string | null = null;
  /** Whether the `.env` lines ignored were warned about (once per command). */
  private dotEnvWarned = false;
  summaryPrinted = false;

  constructor(
    readonly dir: string,
    readonly io: CliIo,
  ) {
    this.clock = io.clock ?? systemClock;
    this.renderer = new CliRenderer(this.bus, (line) => this.io.stderr(line), {
      clock: this.clock,
      debug: (io.env.OVERBRAINER_LOG ?? '').trim().toLowerCase() === 'debug',
      status: io.status,
    });
  }

  /** The core's Workspace for the command's folder (src/core/flow/workspace.ts). */
  get workspace(): Workspace {
    this.built ??= new Workspace({
      dir: this.dir,
      env: this.io.env,
      bus: this.bus,
      clock: this.clock,
      timing: this.timingOf(),
      owner: CLI_OWNER,
      // A host the user chose outside the workspace (the process env), but not Runpod's: said.
      onOtherApiHost: ({ host, baseUrl }) =>
        this.io.stderr(
          `note: the Runpod API key goes to ${host} (OVERBRAINER_RUNPOD__BASE_URL=${baseUrl}), not to Runpod's own API`,
        ),
    });
    return this.built;
  }

  get store(): RunStore {
    return this.workspace.store;
  }

  /** The env the config and the API key come from (the workspace `.env` once read). */
  get env(): Env {
    return this.workspace.env;
  }

  // ------------------------------------------------------------------ setup

  /**
   * The workspace's configuration. `strict` (train): a missing or invalid
   * overbrainer.toml is a configuration error (exit 2). Otherwise a missing
   * file gives no config and an invalid one is warned about: pods and runs
   * must stay reachable with a broken file.
   */
  config(strict: boolean): OverbrainerConfig | null {
    const ws = this.workspace;
    const dotEnv = readDotEnv(this.dir, this.io.env);
    if (!this.dotEnvWarned) {
      this.dotEnvWarned = true;
      for (const line of dotEnv.ignored) {
        this.io.stderr(`warning: ${line.file}:${line.line}: ${line.message}`);
        this.io.stderr(`hint: ${line.hint}`);
      }
    }
    if (!strict && !fs.existsSync(ws.configFile)) {
      ws.env = dotEnv.env;
      return null;
    }
    ws.env = this.io.env;
    const loaded = ws.loadConfig();
    ws.env = loaded.env;
    if (loaded.ok) return loaded.config;
    const lines = loaded.errors.map(formatConfigError);
    if (strict) throw new ConfigProblem(lines);
    for (const line of lines) this.io.stderr(`warning: ${line}`);
    this.io.stderr(
      `warning: going on without ${CONFIG_FILE}: only the run records and the API key are used`,
    );
    return null;
  }

  /** The Runpod client, or null when no API key is set (and `required` is false). */
  api(required: boolean): RunpodClient | null {
    try {
      return this.workspace.api(required);
    } catch (error) {
      if (!(error instanceof SetupError)) throw error;
      if (error.settingErrors.length > 0)
        throw new ConfigProblem(error.settingErrors.map(formatConfigError));
      throw new ConfigProblem([
        `${ENV_API_KEY}: no Runpod API key is set. Set it to a key from the Runpod console (Settings → API Keys), in the environment or in the workspace .env.`,
      ]);
    }
  }

  timingOf(): Timing {
    return this.timing ?? timingFrom(this.io.env);
  }

  deps(client: RunpodClient | null): FlowDeps {
    return this.workspace.deps(client);
  }

  /** Whether the run has a pod record (so its commands need the Runpod API). */
  hasPodRecord(runId: string): boolean {
    return this.workspace.hasPodRecord(runId);
  }

  listenForRun(): void {
    this.bus.on((event) => {
      if (
        event.type === 'runState' &&
        event.runId === this.runId &&
        event.state === 'running' &&
        this.interrupts
      ) {
        this.interrupts.jobStarted = true;
      }
    });
  }

  // --------------------------------------------------------------- commands

  /** Prints the end of a run (kept pod, final line); the exit code from its state. */
  finished(result: FlowResult): number {
    this.renderer.flush();
    const { run, pod } = result;
    if (result.ending === 'kept' && pod?.podId) {
      this.io.stderr(
        `warning: pod ${pod.podId} kept (--keep-pod): \`${sshCommand(run.id)}\`; remove it with \`overbrainer pod rm ${run.id}\`; nothing deletes it automatically`,
      );
    }
    this.io.stdout(result.summary);
    this.summaryPrinted = true;
    return run.state === 'succeeded' ? EXIT_OK : EXIT_FAILED;
  }

  /**
   * Runs the API calls of a read-only command on `api` (`client` under the read-only limits,
   * ./readOnly.ts): Runpod's rate limit waited out up to 30 s in all, counted down on a terminal;
   * a refused connection failing at once, no answer after `readOnlyLimitMs`, naming the base URL.
   */
  async readOnly<T>(
    client: RunpodClient,
    calls: (api: RunpodClient, signal: AbortSignal, answered: () => void) => Promise<T>,
  ): Promise<T> {
    this.readOnlyCalls ??= new ReadOnlyCalls({
      clock: this.clock,
      timing: this.timingOf(),
      say: (line) => {
        this.renderer.flush();
        this.io.stderr(line);
      },
      countdown: this.io.status === undefined ? undefined : (line) => this.renderer.waiting(line),
    });
    return this.readOnlyCalls.run(client, calls);
  }

  // ---------------------------------------------------------------- endings

  /** Prints `error` (message, then its hint) and returns the exit code. */
  fail(error: unknown): number {
    this.renderer.flush();
    if (error instanceof ConfigProblem) {
      for (const line of error.lines) this.io.stderr(line);
      return EXIT_USAGE;
    }
    if (error instanceof RunpodConfigError) {
      this.io.stderr(`${error.variable}: ${error.message}`);
      return EXIT_USAGE;
    }
    const interrupted = this.interrupts?.signal.aborted ?? false;
    if (interrupted && this.runId !== null && isInterruptedBeforeJob(error)) {
      const left = !noPodLeft(this.store, this.runId);
      this.io.stderr(
        left
          ? `interrupted: run ${this.runId} stopped before its job started, but a pod of it may be left: check \`overbrainer pod ls\``
          : `interrupted: run ${this.runId} stopped before its job started; it has no pod left`,
      );
    } else if (interrupted && error instanceof FlowError && error.kind === 'stopped_following') {
      // The flow's stop-following message: what keeps running and how to reach it.
      this.io.stderr(`interrupted: ${error.message}`);
    } else if (!interrupted && this.followLost(error) !== null) {
      this.io.stderr(`lost: ${this.followLost(error)!}`);
    } else {
      this.io.stderr(`error: ${describeError(error)}`);
      const hint = hintOf(error);
      if (hint) this.io.stderr(`hint: ${hint}`);
    }
    this.printSummary(error instanceof PodError ? error.podStatus : null);
    return EXIT_FAILED;
  }

  /**
   * When the command stopped on `error` while its run is still `running` on a pod that is not
   * deleted (a connection lost, the API out of reach: not a failed run), what VS Code says too:
   * the run goes on, how to follow it again, what the pod's watchdog does meanwhile. Null
   * otherwise, and for a pod found stopped (EXITED, TERMINATED), whose error names its state.
   */
  followLost(error: unknown): string | null {
    if (this.runId === null || isAbortError(error)) return null;
    if (error instanceof ConfigProblem || error instanceof RunpodConfigError) return null;
    // The flow's own refusals (another client follows, already ended) lost nothing.
    if (error instanceof FlowError) return null;
    if (error instanceof PodError && error.kind !== 'api') return null;
    try {
      const run = this.store.loadRun(this.runId);
      const pod = this.store.loadPod(this.runId);
      if (run.state !== 'running' || run.job === null) return null;
      if (pod === null || pod.podId === null || pod.state === 'deleted') return null;
      return followLostWords(
        run.id,
        describeError(error),
        pod.keep ? null : pod.deadlineUnixS,
        this.clock.nowMs(),
        `follow it again with \`overbrainer train attach ${run.id}\``,
      );
    } catch {
      return null;
    }
  }

  /** The run's final line from its records, once, when the command got that far. */
  printSummary(podStatus: string | null = null): void {
    if (this.runId === null || this.summaryPrinted) return;
    try {
      const run = this.store.loadRun(this.runId);
      const pod = this.store.loadPod(this.runId);
      let line = summaryLine({ store: this.store }, run, pod);
      // pod.json says what the client last recorded (`running`); Runpod just said otherwise.
      if (pod?.podId && podStatus !== null && pod.state !== 'deleted') {
        line = line.replace(pod.summary(), podStatusWords(pod.podId, podStatus));
      }
      this.io.stdout(line);
      this.summaryPrinted = true;
    } catch {
      // No readable record: the error above says enough.
    }
  }

  async close(): Promise<void> {
    this.interrupts?.dispose();
    this.renderer.dispose();
    // A pod log stream never ends by itself while its pod lives: stopped before the close.
    await stopPodLogCaptures();
    await this.built?.close();
  }
}

export function isInterruptedBeforeJob(error: unknown): boolean {
  return error instanceof PodError && error.kind === 'interrupted';
}
