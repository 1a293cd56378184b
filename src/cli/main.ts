/**
 * The CLI's commands on the same core as the extension: config and API key
 * from the workspace and the environment, events rendered on stderr, the
 * final line of a run on stdout, and Ctrl-C as the spec §8 says (before the
 * job starts: the pod is deleted and the run failed; once the job runs: only
 * the following stops; a delete is never interrupted).
 *
 * Test hook: OVERBRAINER_TIMING_SCALE=<factor ≥ 1> divides every production
 * duration of the core by `factor` (src/core/timing.ts `scaleTiming`), so the
 * integration tests run whole pod lifecycles against the emulator in seconds.
 * It is not in the usage on purpose: with it, deadlines, leases and graces no
 * longer mean what the docs say.
 */
import { POD_LOG_FILE, PodLogRedactor, stopPodLogCaptures } from '../core/runpod/podLogCapture';
import { streamPodLogs } from '../core/runpod/podLogs';
import { JOB_LOG } from '../core/train/job';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isAbortError, systemClock, type Clock } from '../core/clock';
import {
  CONFIG_FILE,
  formatConfigError,
  loadConfig,
  runpodSettings,
  withDotEnv,
  type ConfigError,
  type Env,
  type OverbrainerConfig,
} from '../core/config';
import { EventBus } from '../core/events';
import { CLIENT_VERSION, RunpodClient } from '../core/runpod/client';
import type { PodCtx } from '../core/runpod/context';
import { RunpodConfigError } from '../core/runpod/errors';
import { sshCommand } from '../core/runpod/keys';
import { followLostWords } from '../core/runpod/lifecycle';
import {
  listPods,
  orphanWarnings,
  podTable,
  removeRunOrPod,
  sweepHostKeySecrets,
  type PodRow,
} from '../core/runpod/podAdmin';
import { PodError } from '../core/runpod/podError';
import { billSettled, recordBilled } from '../core/runpod/billing';
import { messageOf } from '../core/runpod/remove';
import {
  attach,
  cancel,
  stop,
  FlowError,
  keepPod,
  quoteForTarget,
  recoverAbandoned,
  summaryLine,
  train,
  type FlowDeps,
  type FlowResult,
} from '../core/flow';
import type { PodRecord } from '../core/runs/podRecord';
import { heldByEarlierRuns, quoteLines } from '../core/runs/quote';
import { noPodLeft, RunStore } from '../core/runs/store';
import { PRODUCTION_TIMING, scaleTiming, type Timing } from '../core/timing';
import { parseArgs, USAGE, UsageError, type Command } from './args';
import {
  filterGpus,
  gpusTable,
  podStatusWords,
  removedLine,
  runsTable,
  type RunLine,
} from './format';
import { CliRenderer } from './render';
import { spendJson, spendRow, spendTable, type SpendRow } from './spend';

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
}

/** Exit codes. */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/** Who the CLI is in run locks and messages. */
export const CLI_OWNER = 'overbrainer CLI';

/** A usage or configuration problem found before anything ran: exit 2. */
class ConfigProblem extends Error {
  constructor(readonly lines: string[]) {
    super(lines.join('\n'));
    this.name = 'ConfigProblem';
  }
}

/** A read-only command whose API did not answer in time: nothing changed anywhere. */
class ReadOnlyTimeout extends Error {
  readonly hint =
    'Check the network and OVERBRAINER_RUNPOD__BASE_URL (unset: the public API), then run it again. Running pods are not affected: their watchdogs keep their own deadlines.';
}

/** The hidden test hook: every production duration divided by OVERBRAINER_TIMING_SCALE. */
export function timingFrom(env: Env): Timing {
  const raw = env.OVERBRAINER_TIMING_SCALE;
  if (raw === undefined || raw.trim() === '') return { ...PRODUCTION_TIMING };
  const factor = Number(raw);
  if (!Number.isFinite(factor) || factor < 1) {
    throw new ConfigProblem([
      `OVERBRAINER_TIMING_SCALE: must be a number of at least 1 (a test hook), not ${JSON.stringify(raw.slice(0, 20))}. Unset it.`,
    ]);
  }
  return scaleTiming(factor);
}

/** Runs one command line; resolves to the exit code. Never throws. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr(`overbrainer: ${error.message}`);
    io.stderr('');
    for (const line of USAGE.trimEnd().split('\n')) io.stderr(line);
    return EXIT_USAGE;
  }
  if (parsed.command.kind === 'help') {
    for (const line of USAGE.trimEnd().split('\n')) io.stdout(line);
    return EXIT_OK;
  }
  const dir = path.resolve(io.cwd, parsed.dir ?? '.');
  const session = new Session(dir, io);
  try {
    return await session.run(parsed.command);
  } catch (error) {
    return session.fail(error);
  } finally {
    await session.close();
  }
}

/** Ctrl-C: the first aborts the command's signal, later ones are ignored with a note. */
class Interrupts {
  readonly controller = new AbortController();
  private count = 0;
  private remove: (() => void) | null = null;
  /** Set once the run's job started: Ctrl-C then only stops following. */
  jobStarted = false;

  constructor(
    private readonly io: CliIo,
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

class Session {
  private readonly clock: Clock;
  private readonly bus = new EventBus();
  private readonly renderer: CliRenderer;
  private readonly store: RunStore;
  private client: RunpodClient | null = null;
  private timing: Timing | null = null;
  private env: Env;
  private interrupts: Interrupts | null = null;
  /** The run the command works on, once known: its summary is printed even after a failure. */
  private runId: string | null = null;
  private summaryPrinted = false;

  constructor(
    private readonly dir: string,
    private readonly io: CliIo,
  ) {
    this.clock = io.clock ?? systemClock;
    this.env = io.env;
    this.renderer = new CliRenderer(this.bus, (line) => this.io.stderr(line), {
      clock: this.clock,
      debug: (io.env.OVERBRAINER_LOG ?? '').trim().toLowerCase() === 'debug',
    });
    this.store = new RunStore(path.join(dir, 'runs'), this.clock);
  }

  async run(command: Exclude<Command, { kind: 'help' }>): Promise<number> {
    this.timing = timingFrom(this.io.env);
    switch (command.kind) {
      case 'train':
        if (command.dryRun) return this.dryRun(command.target);
        return this.train(command.target, command.keepPod, command.resumeFrom);
      case 'attach':
      case 'cancel':
        return this.attachOrCancel(command.kind, command.runId);
      case 'stop':
        return this.stopRun(command.runId);
      case 'keep':
      case 'release':
        return this.keep(command.runId, command.kind === 'keep');
      case 'runs_ls':
        return this.runsLs();
      case 'spend':
        return this.spend(command.sinceMs, command.json);
      case 'runs_logs':
        return this.runsLogs(command);
      case 'pod_ls':
        return this.podLs();
      case 'pod_rm':
        return this.podRm(command.runId, command.force);
      case 'pod_gpus':
        return this.podGpus(command.minVramGb, command.maxPricePerHourUsd, command.inStock);
    }
  }

  // ------------------------------------------------------------------ setup

  /**
   * The workspace's configuration. `strict` (train): a missing or invalid
   * overbrainer.toml is a configuration error (exit 2). Otherwise a missing
   * file gives no config and an invalid one is warned about: pods and runs
   * must stay reachable with a broken file.
   */
  private config(strict: boolean): OverbrainerConfig | null {
    const file = path.join(this.dir, CONFIG_FILE);
    if (!strict && !fs.existsSync(file)) {
      this.env = withDotEnv(this.dir, this.io.env);
      return null;
    }
    const loaded = loadConfig(this.dir, this.io.env);
    this.env = loaded.env;
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
  private api(required: boolean): RunpodClient | null {
    if (this.client) return this.client;
    const settings = runpodSettings(this.env);
    if (!settings.ok)
      throw new ConfigProblem(settings.errors.map((e: ConfigError) => formatConfigError(e)));
    if (settings.settings.apiKey === null) {
      if (!required) return null;
      throw new ConfigProblem([
        'OVERBRAINER_RUNPOD__API_KEY: no Runpod API key is set. Set it to a key from the Runpod console (Settings → API Keys), in the environment or in the workspace .env.',
      ]);
    }
    this.client = new RunpodClient({
      baseUrl: settings.settings.baseUrl,
      apiKey: settings.settings.apiKey,
      clock: this.clock,
      timing: this.timingOf(),
      version: CLIENT_VERSION,
      log: (level, message) => this.bus.publish({ type: 'log', level, message }),
    });
    return this.client;
  }

  private timingOf(): Timing {
    return this.timing ?? timingFrom(this.io.env);
  }

  private deps(client: RunpodClient | null): FlowDeps {
    return {
      store: this.store,
      client,
      bus: this.bus,
      clock: this.clock,
      timing: this.timingOf(),
      version: CLIENT_VERSION,
      owner: CLI_OWNER,
    };
  }

  private podCtx(client: RunpodClient): PodCtx {
    return {
      store: this.store,
      client,
      bus: this.bus,
      clock: this.clock,
      timing: this.timingOf(),
      version: CLIENT_VERSION,
    };
  }

  /** Whether the run has a pod record (so its commands need the Runpod API). */
  private hasPodRecord(runId: string): boolean {
    try {
      return this.store.loadPod(runId) !== null;
    } catch {
      // A damaged pod.json: the flow reports it; a pod may exist, so the API is needed.
      return true;
    }
  }

  private listenForRun(): void {
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

  /**
   * `train --dry-run`: the quote and the plan (GPU types in order with rates and stock, data
   * centers, volume) from the live catalog. Read-only: no run directory, no pod, no secret.
   */
  private async dryRun(targetName: string | null): Promise<number> {
    const config = this.config(true)!;
    const name =
      targetName ??
      config.training?.target ??
      (Object.keys(config.targets).length === 1 ? Object.keys(config.targets)[0] : undefined);
    const target = name === undefined ? undefined : config.targets[name];
    if (target === undefined) {
      throw new ConfigProblem([
        `no target ${name ?? '(none given)'} in ${CONFIG_FILE}: name one with --target`,
      ]);
    }
    if (target.kind !== 'runpod') {
      this.io.stdout(`dry run: target ${target.name} runs on this machine: it costs nothing`);
      return EXIT_OK;
    }
    const client = this.api(true)!;
    const catalog = await this.readOnly(client, (signal) =>
      client.listGpuTypes({
        count: target.gpuCount,
        cloud: 'SECURE',
        includeAvailability: true,
        signal,
      }),
    );
    const q = quoteForTarget(target, catalog, heldByEarlierRuns(this.store, target.name));
    this.io.stdout(`dry run: target ${target.name}; nothing is created`);
    this.io.stdout(
      `GPU types, in the order tried (${target.gpuCount} GPU${target.gpuCount === 1 ? '' : 's'}):`,
    );
    if (q.rates.length === 0) this.io.stdout('  none in stock within the limits');
    q.rates.forEach((r, i) =>
      this.io.stdout(
        `  ${i + 1}. ${r.gpuType}  ${r.usdPerHour === null ? 'no price' : `$${r.usdPerHour.toFixed(2)}/h`}  stock ${r.availability ?? 'unknown'}`,
      ),
    );
    this.io.stdout(
      `Data centers: ${target.dataCenterIds === 'auto' || target.dataCenterIds.length === 0 ? 'any' : target.dataCenterIds.join(', ')}`,
    );
    this.io.stdout(
      `Volume: ${target.networkVolumeId === null ? 'none' : `network volume ${target.networkVolumeId} at /workspace/data`}; container disk ${target.containerDiskGb} GB`,
    );
    for (const line of quoteLines(q)) this.io.stdout(line);
    return EXIT_OK;
  }

  private async train(
    targetName: string | null,
    keepPodFlag: boolean,
    resumeFrom: string | null,
  ): Promise<number> {
    if (resumeFrom !== null) this.store.runDir(resumeFrom); // refused first if it would leave runs/
    const config = this.config(true)!;
    const name =
      targetName ??
      config.training?.target ??
      (Object.keys(config.targets).length === 1 ? Object.keys(config.targets)[0] : undefined);
    const target = name === undefined ? undefined : config.targets[name];
    const client = this.api(target?.kind === 'runpod');
    if (target?.kind === 'runpod' && client) {
      await this.warnOrphans(client);
      await this.recoverAbandoned(client, config);
    }
    this.interrupts = new Interrupts(this.io, this.renderer, (jobStarted) =>
      jobStarted
        ? 'stopping to follow the run; its job and pod keep running'
        : "stopping: the run's pod is deleted, since its job has not started (a delete is never interrupted)",
    );
    this.listenForRun();
    const result = await train(this.deps(client), config, this.dir, {
      target: targetName ?? undefined,
      keepPod: keepPodFlag,
      resumeFrom: resumeFrom ?? undefined,
      signal: this.interrupts.signal,
      onRun: (run) => {
        this.runId = run.id;
        this.io.stderr(`train: run ${run.id} on target ${run.target} (runs/${run.id})`);
      },
    });
    return this.finished(result);
  }

  /** Prints the end of a run (kept pod, final line); the exit code from its state. */
  private finished(result: FlowResult): number {
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

  private async attachOrCancel(kind: 'attach' | 'cancel', runId: string): Promise<number> {
    this.store.runDir(runId); // an ID that would leave runs/ is refused first
    const config = this.config(false);
    const client = this.api(this.hasPodRecord(runId));
    this.runId = runId;
    this.interrupts = new Interrupts(this.io, this.renderer, () =>
      kind === 'attach'
        ? 'stopping to follow the run; its job and pod keep running'
        : 'stopping; a cancel already sent still ends the job',
    );
    this.interrupts.jobStarted = true;
    if (kind === 'attach') {
      return this.finished(await attach(this.deps(client), config, runId, this.interrupts.signal));
    }
    const result = await cancel(this.deps(client), config, runId, this.interrupts.signal);
    this.renderer.flush();
    this.io.stdout(result.summary);
    this.summaryPrinted = true;
    // Success is the run ending cancelled; another client following it collects it then.
    return result.run.state === 'cancelled' || result.run.state === 'running'
      ? EXIT_OK
      : EXIT_FAILED;
  }

  /** `train stop`: a snapshot is asked for; success is the run ending `stopped`. */
  private async stopRun(runId: string): Promise<number> {
    this.store.runDir(runId);
    const config = this.config(false);
    const client = this.api(this.hasPodRecord(runId));
    this.runId = runId;
    this.interrupts = new Interrupts(
      this.io,
      this.renderer,
      () => 'stopping to follow the run; the snapshot asked for is still saved and its job stops',
    );
    this.interrupts.jobStarted = true;
    const { result } = await stop(this.deps(client), config, runId, this.interrupts.signal);
    this.renderer.flush();
    if (result === null) {
      this.io.stdout(
        `train: run ${runId} asked for a snapshot; the client following it brings the snapshot home`,
      );
      this.summaryPrinted = true;
      return EXIT_OK;
    }
    this.io.stdout(result.summary);
    this.summaryPrinted = true;
    return result.run.state === 'stopped' ? EXIT_OK : EXIT_FAILED;
  }

  private async keep(runId: string, keep: boolean): Promise<number> {
    this.store.runDir(runId);
    const client = this.api(true);
    const pod = await keepPod(this.deps(client), runId, keep, keep ? null : this.config(false));
    this.io.stdout(
      keep
        ? `pod: ${pod.podId ?? ''} kept: \`${sshCommand(runId)}\`; remove it with \`overbrainer pod rm ${runId}\`; nothing deletes it automatically`
        : pod.state === 'deleted'
          ? `pod: ${pod.podId ?? ''} released and deleted: the results of run ${runId} are retrieved`
          : `pod: ${pod.podId ?? ''} released: its watchdog's deadline and graces apply again`,
    );
    return EXIT_OK;
  }

  private runsLs(): number {
    const { runs, warnings } = this.store.list();
    for (const warning of warnings) this.io.stderr(`warning: ${warning.message}`);
    if (runs.length === 0) {
      this.io.stdout(`runs: no run in ${this.store.runsDir}`);
      return EXIT_OK;
    }
    const lines: RunLine[] = runs.map((run) => {
      try {
        return { run, pod: this.store.loadPod(run.id), podProblem: null };
      } catch (error) {
        return { run, pod: null, podProblem: `pod record unreadable (${messageOf(error)})` };
      }
    });
    for (const line of runsTable(lines)) this.io.stdout(line);
    return EXIT_OK;
  }

  /** `runs logs`: the job's log, or the pod's (kept, or streamed from the API), redacted. */
  private async runsLogs(command: Extract<Command, { kind: 'runs_logs' }>): Promise<number> {
    const { runId } = command;
    const runDir = this.store.runDir(runId);
    if (!fs.existsSync(runDir)) {
      this.io.stderr(
        `runs logs: no run ${runId} in ${this.store.runsDir} (overbrainer runs ls lists them)`,
      );
      return EXIT_FAILED;
    }
    this.config(false);
    const client = this.api(false);
    const redactor = new PodLogRedactor((text) => client?.redact(text) ?? text);
    const tail = command.tail ?? 100;
    const last = <T>(items: T[]): T[] => (tail === 0 ? [] : items.slice(-tail));
    if (!command.pod) {
      const file = path.join(runDir, JOB_LOG);
      if (!fs.existsSync(file)) {
        this.io.stderr(
          `runs logs: run ${runId} has no job log yet (${path.join('runs', runId, JOB_LOG)}); try --pod for the pod's log`,
        );
        return EXIT_FAILED;
      }
      const lines = fs.readFileSync(file, 'utf8').split('\n');
      if (lines[lines.length - 1] === '') lines.pop();
      for (const line of last(lines)) this.io.stdout(redactor.redact(line));
      return EXIT_OK;
    }
    const show = (l: { ts: string; source: string; line: string }): void =>
      this.io.stdout(`${l.ts} ${l.source}: ${redactor.redact(l.line)}`);
    const kept = path.join(runDir, POD_LOG_FILE);
    if (!command.follow && fs.existsSync(kept)) {
      const rows = fs
        .readFileSync(kept, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .flatMap((l) => {
          try {
            return [JSON.parse(l) as { ts: string; source: string; line: string }];
          } catch {
            return [];
          }
        })
        .filter((r) => command.source === null || r.source === command.source);
      for (const row of last(rows)) show(row);
      return EXIT_OK;
    }
    const podId = this.store.loadPod(runId)?.podId ?? null;
    if (podId === null) {
      this.io.stderr(`runs logs: run ${runId} has no pod and no kept pod log`);
      return EXIT_FAILED;
    }
    const api = this.api(true)!;
    this.interrupts = new Interrupts(this.io, this.renderer, () => 'stopped following the pod log');
    const signal = this.interrupts.signal;
    const stopAfter = new AbortController();
    const onAbort = (): void => stopAfter.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const timing = this.timingOf();
    if (!command.follow) {
      // No --follow: what the API replays within the drain time, then done.
      void this.clock.sleep(timing.podLogDrainMs, stopAfter.signal).then(
        () => stopAfter.abort(),
        () => undefined,
      );
    }
    const { end } = await streamPodLogs({
      client: api,
      podId,
      clock: this.clock,
      timing,
      signal: stopAfter.signal,
      tail,
      source: command.source ?? undefined,
      onLine: show,
    });
    signal.removeEventListener('abort', onAbort);
    if (end === 'gone')
      this.io.stderr(
        `runs logs: pod ${podId} is gone (its kept log: ${path.join('runs', runId, POD_LOG_FILE)})`,
      );
    if (end === 'unsupported') this.io.stderr('runs logs: this Runpod API does not serve pod logs');
    return EXIT_OK;
  }

  private async podLs(): Promise<number> {
    this.config(false);
    const client = this.api(true)!;
    const rows = await this.readOnly(client, (signal) => listPods(this.podCtx(client), { signal }));
    if (rows.length === 0) {
      this.io.stdout('pod: no overbrainer pod on this Runpod account');
      return EXIT_OK;
    }
    for (const line of podTable(rows)) this.io.stdout(line);
    return EXIT_OK;
  }

  private async podRm(runId: string, force: boolean): Promise<number> {
    this.config(false);
    const client = this.api(true)!;
    // Every delete is shielded: Ctrl-C is only noted.
    this.interrupts = new Interrupts(this.io, this.renderer, null);
    const removal = await removeRunOrPod(this.podCtx(client), runId, { force });
    if (removal.removed.length === 0 && removal.error === null) {
      this.io.stdout(`pod: no pod for run ${runId}`);
    }
    // Every deleted pod is printed, even when the command fails overall.
    for (const pod of removal.removed) this.io.stdout(removedLine(pod));
    if (removal.error !== null) return this.fail(removal.error);
    return EXIT_OK;
  }

  /**
   * `spend`: each run's estimated pod spend beside what Runpod billed. A deleted pod whose bill
   * was never read, or read too soon after the deletion to be final, is read now
   * (`GET /billing/pods`) and saved in its pod.json; without an API key the figures on disk are
   * listed as they are.
   */
  private async spend(sinceMs: number | null, json: boolean): Promise<number> {
    this.config(false);
    const { runs, warnings } = this.store.list();
    for (const w of warnings) this.io.stderr(`warning: ${w.message}`);
    const client = this.api(false);
    const rows: SpendRow[] = [];
    for (const run of runs) {
      if (sinceMs !== null && Date.parse(run.created) < sinceMs) continue;
      let pod: PodRecord | null;
      try {
        pod = this.store.loadPod(run.id);
      } catch (error) {
        this.io.stderr(`warning: run ${run.id}: ${messageOf(error)}`);
        continue;
      }
      if (pod === null) continue;
      if (client !== null && pod.state === 'deleted' && !billSettled(pod)) {
        await this.readOnly(client, (signal) => recordBilled(this.podCtx(client), pod, signal));
      }
      rows.push(spendRow(run.id, run.created, run.state, pod));
    }
    if (json) {
      this.io.stdout(JSON.stringify(spendJson(rows), null, 2));
      return EXIT_OK;
    }
    for (const line of spendTable(rows)) this.io.stdout(line);
    return EXIT_OK;
  }

  private async podGpus(
    minVramGb: number | null,
    maxPricePerHourUsd: number | null,
    inStockOnly: boolean,
  ): Promise<number> {
    this.config(false);
    const client = this.api(true)!;
    const gpus = await this.readOnly(client, (signal) =>
      client.listGpuTypes({ count: 1, cloud: 'SECURE', includeAvailability: true, signal }),
    );
    const matching = filterGpus(gpus, { minVramGb, maxPricePerHourUsd, inStockOnly });
    if (matching.length === 0) {
      this.io.stdout('pod: no GPU type matches');
      return EXIT_OK;
    }
    for (const line of gpusTable(matching)) this.io.stdout(line);
    return EXIT_OK;
  }

  /**
   * Runs the API calls of a read-only command within `readOnlyLimitMs` (retries included): a
   * listing fails then, naming the base URL, instead of waiting out every retry.
   */
  private async readOnly<T>(
    client: RunpodClient,
    calls: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const limitMs = this.timingOf().readOnlyLimitMs;
    const limit = new AbortController();
    const done = new AbortController();
    void this.clock.sleep(limitMs, done.signal).then(
      () => limit.abort(),
      () => undefined,
    );
    try {
      return await calls(limit.signal);
    } catch (error) {
      if (!limit.signal.aborted) throw error;
      throw new ReadOnlyTimeout(
        `the Runpod API at ${client.baseUrl} did not answer within ${Math.round(limitMs / 1000)} s` +
          (isAbortError(error) ? '' : ` (${messageOf(error)})`),
      );
    } finally {
      done.abort();
    }
  }

  /** Warns about the pods nothing will delete, from one list of the account. Never deletes. */
  private async warnOrphans(client: RunpodClient): Promise<void> {
    try {
      const rows = await listPods(this.podCtx(client), { lookUpUnlisted: false });
      for (const warning of orphanWarnings(rows)) this.io.stderr(`warning: ${warning}`);
      await this.sweepSecrets(client, rows);
    } catch (error) {
      this.io.stderr(`warning: cannot look for leftover pods: ${messageOf(error)}`);
    }
  }

  /** Settles the runs left `preparing` by a client that died before their job started. */
  private async recoverAbandoned(client: RunpodClient, config: OverbrainerConfig): Promise<void> {
    for (const left of await recoverAbandoned(this.deps(client), config)) {
      if (left.error === null) {
        this.io.stderr(
          `train: run ${left.runId} was left starting by a client that stopped; ${left.result?.summary ?? ''}`,
        );
      } else {
        this.io.stderr(
          `warning: run ${left.runId} was left starting by a client that stopped and cannot be cleaned up: ${messageOf(left.error)}; retry with \`overbrainer train attach ${left.runId}\``,
        );
      }
    }
  }

  /** Deletes the host-key secrets (and client keys) that ended runs left behind. */
  private async sweepSecrets(client: RunpodClient, rows: readonly PodRow[]): Promise<void> {
    try {
      const swept = await sweepHostKeySecrets(this.podCtx(client), rows);
      if (swept.length > 0)
        this.io.stderr(
          `train: deleted the host-key secrets left by ended runs ${swept.join(', ')}`,
        );
    } catch (error) {
      this.io.stderr(
        `warning: cannot sweep the host-key secrets of ended runs: ${messageOf(error)}`,
      );
    }
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
    } else if (interrupted && error instanceof FlowError && error.hint === null) {
      // The flow's stop-following message: what keeps running and how to reach it.
      this.io.stderr(`interrupted: ${error.message}`);
    } else if (!interrupted && this.followLost(error) !== null) {
      this.io.stderr(`lost: ${this.followLost(error)!}`);
    } else {
      this.io.stderr(`error: ${messageOf(error)}`);
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
  private followLost(error: unknown): string | null {
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
        messageOf(error),
        pod.keep ? null : pod.deadlineUnixS,
        this.clock.nowMs(),
        `follow it again with \`overbrainer train attach ${run.id}\``,
      );
    } catch {
      return null;
    }
  }

  /** The run's final line from its records, once, when the command got that far. */
  private printSummary(podStatus: string | null = null): void {
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
    const client = this.client;
    this.client = null;
    // A pod log stream never ends by itself while its pod lives: stopped before the close.
    await stopPodLogCaptures();
    if (client) await client.close().catch(() => undefined);
  }
}

function isInterruptedBeforeJob(error: unknown): boolean {
  return error instanceof PodError && error.kind === 'interrupted';
}

function hintOf(error: unknown): string | null {
  if (typeof error === 'object' && error !== null && 'hint' in error) {
    const hint = (error as { hint: unknown }).hint;
    if (typeof hint === 'string' && hint.trim() !== '') return hint;
  }
  return null;
}
