/**
 * A lab for lifecycle integration tests: its own Runpod emulator (real namespaced pods running
 * the real bootstrap, watchdog and sshd), a temp workspace holding examples/tiny with an
 * overbrainer.toml (`trainer = "command"`, a runpod target), and the core's dependencies
 * (RunStore, RunpodClient, EventBus, FlowDeps) with the production timing scaled down. Every event
 * the core publishes is recorded. Each lab owns its emulator, so labs run side by side without
 * their faults touching each other; `close()` kills every pod and proves no process of any of its
 * pods survives.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { systemClock } from '../../src/core/clock';
import { loadConfig, type OverbrainerConfig } from '../../src/core/config';
import { EventBus, type CoreEvent, type PodStatusEvent } from '../../src/core/events';
import { CLIENT_VERSION, RunpodClient } from '../../src/core/runpod/client';
import { hostKeySecretName } from '../../src/core/pod/context';
import { train, type FlowDeps, type FlowResult } from '../../src/core/flow';
import { RunStore } from '../../src/core/runs/store';
import { scaleTiming, type Timing } from '../../src/core/timing';
import { startEmulator, type Emulator, type EmulatorOptions } from '../emulator/emulator';
import type { FaultEffect, RouteName } from '../emulator/faults';
import type { LedgerEntry } from '../emulator/ledger';
import { ApiClient } from '../emulator/testing';
import {
  filePathsUnder,
  filesUnder,
  needlesIn,
  processesMounting,
  processesMountingNow,
  readJson,
} from './labFiles';
import { ROOT, startCli as startUserCli } from './cli';
import { recordLedger } from './reliability';
import { assertDeletedAfterRetrieval } from './retrievedDelete';
import {
  emulatorEnv,
  GPU,
  tempTinyWorkspace,
  tomlFor,
  type TinyTomlOptions,
} from './tinyWorkspace';

export { GPU, ROOT, tomlFor };

/**
 * Production timing / 60 (a lease of 15 s, a margin of 5 s, pod polls of 83 ms, the watchdog's
 * tick 1 s), with the network and SSH limits kept wide enough for a loaded 2-core machine: an
 * SSH command into a pod can take a second or two there, so a scaled request timeout (0.5 s)
 * would fail healthy calls.
 */
export const TIMING_FACTOR = 60;
export function labTiming(overrides: Partial<Timing> = {}): Timing {
  return scaleTiming(TIMING_FACTOR, {
    connectTimeoutMs: 5_000,
    requestTimeoutMs: 15_000,
    createTimeoutMs: 15_000,
    statusPollMs: 300,
    // A pod's boot (sshd, bootstrap, preflight) on a 2-core machine running a dozen labs can
    // pass 30 s: a wider limit keeps a slow pod from counting as never ready (the walk would
    // delete it and create another). The not-ready tests set their own.
    readyTimeoutMs: 90_000,
    preflightTimeoutMs: 60_000,
    deleteConfirmMs: 15_000,
    deletePollMs: 100,
    retryBaseMs: 50,
    retryMaxMs: 500,
    // Production samples the disk once per 30 status polls (60 s against 2 s); with the status
    // poll kept at 300 ms here, the disk's 1 s would be one per 3 and load a 20-run lab with SSH
    // commands production never sends. The disk tests set their own.
    diskPollMs: 10_000,
    // Likewise for the checkpoint stream's look on the pod; the checkpoint tests set their own.
    checkpointPollMs: 10_000,
    // The pod's GPU sample (an nvidia-smi stand-in: a shell and awk); the GPU tests set their own.
    gpuSampleMs: 10_000,
    ...overrides,
  });
}

export interface LabOptions extends TinyTomlOptions {
  timing?: Partial<Timing>;
  emulator?: EmulatorOptions;
  /** Lock owner name in the FlowDeps. */
  owner?: string;
}

/** How a `train` ended: a result or an error, and the run's ID if one was made. */
export interface TrainOutcome {
  result: FlowResult | null;
  error: unknown;
  runId: string | null;
}

export interface RecordedEvent {
  atMs: number;
  event: CoreEvent;
}

/** What a child process needs to build the same FlowDeps (see lifecycleChild.ts). */
export interface ChildSetup {
  workspace: string;
  baseUrl: string;
  timing: Timing;
}

/**
 * The core's parts for `workspace` against the API at `baseUrl`, as a front end builds them:
 * the config read from the workspace's overbrainer.toml (no environment), a RunStore on its
 * runs/, an EventBus and a RunpodClient. Shared by the lab and its child processes.
 */
export function coreFor(
  workspace: string,
  baseUrl: string,
  apiKey: string,
  timing: Timing,
): { config: OverbrainerConfig; store: RunStore; bus: EventBus; client: RunpodClient } {
  const loaded = loadConfig(workspace, {});
  if (!loaded.ok) throw new Error(`lab config: ${JSON.stringify(loaded.errors)}`);
  const store = new RunStore(path.join(workspace, 'runs'), systemClock);
  const bus = new EventBus();
  const client = new RunpodClient({
    baseUrl,
    apiKey,
    clock: systemClock,
    timing,
    version: CLIENT_VERSION,
    log: (level, message) => bus.publish({ type: 'log', level, message }),
  });
  return { config: loaded.config, store, bus, client };
}

export class Lab {
  readonly events: RecordedEvent[] = [];
  readonly deps: FlowDeps;
  readonly config: OverbrainerConfig;
  readonly api: ApiClient;
  private closed = false;
  private readonly background = new Set<Promise<unknown>>();

  private constructor(
    readonly emulator: Emulator,
    readonly tmp: string,
    readonly workspace: string,
    readonly store: RunStore,
    readonly client: RunpodClient,
    readonly bus: EventBus,
    readonly timing: Timing,
    config: OverbrainerConfig,
    owner: string,
  ) {
    this.config = config;
    this.api = new ApiClient(emulator.baseUrl, emulator.apiKey);
    bus.on((event) => this.events.push({ atMs: Date.now(), event }));
    this.deps = {
      store,
      client,
      bus,
      clock: systemClock,
      timing,
      version: CLIENT_VERSION,
      owner,
    };
  }

  static async start(options: LabOptions = {}): Promise<Lab> {
    const emulator = await startEmulator({
      bootDelaysMs: { provisioning: 100, starting: 100 },
      ...options.emulator,
    });
    const { tmp, ws: workspace } = tempTinyWorkspace('lifecycle-it-', tomlFor(options));
    try {
      const timing = labTiming(options.timing);
      const { config, store, bus, client } = coreFor(
        workspace,
        emulator.baseUrl,
        emulator.apiKey,
        timing,
      );
      return new Lab(
        emulator,
        tmp,
        workspace,
        store,
        client,
        bus,
        timing,
        config,
        options.owner ?? 'lifecycle test',
      );
    } catch (error) {
      await emulator.close();
      fs.rmSync(tmp, { recursive: true, force: true });
      throw error;
    }
  }

  /**
   * FlowDeps of another client of the same workspace (a second window, the CLI): its own run
   * store (so run locks see another holder), the same API client and bus.
   */
  otherDeps(owner = 'another client'): FlowDeps {
    return { ...this.deps, store: new RunStore(this.store.runsDir, systemClock), owner };
  }

  /**
   * Marks `work` (a flow running in the background of a scenario) as the lab's: `close()` waits
   * for it to end, so a failed scenario never leaves a flow writing into a removed workspace.
   */
  track<T>(work: Promise<T>): Promise<T> {
    const settled = work.then(
      () => undefined,
      () => undefined,
    );
    this.background.add(settled);
    void settled.then(() => this.background.delete(settled));
    return work;
  }

  /**
   * `train` on the lab's workspace (tracked) to its end: its result or its error, and the run's
   * ID once it had one (`onRun` hears it too).
   */
  async trainOutcome(onRun?: (id: string) => void): Promise<TrainOutcome> {
    let runId: string | null = null;
    try {
      const result = await this.track(
        train(this.deps, this.config, this.workspace, {
          onRun: (r) => {
            runId = r.id;
            onRun?.(r.id);
          },
        }),
      );
      return { result, error: null, runId };
    } catch (error) {
      return { result: null, error, runId };
    }
  }

  /**
   * `trainOutcome` of a run whose pod's bootstrap fails before sshd: as its pod is created, the
   * run's host key secret becomes no key (the bootstrap refuses it; its watchdog deletes the pod).
   */
  async trainWithBadHostKey(): Promise<TrainOutcome> {
    let runId: string | null = null;
    const spoiler = this.bus.on((event) => {
      if (event.type === 'pod' && event.status.kind === 'creating' && runId !== null) {
        this.emulator.setSecret(
          hostKeySecretName(runId),
          Buffer.from('not a key').toString('base64'),
        );
      }
    });
    try {
      return await this.trainOutcome((id) => (runId = id));
    } finally {
      spoiler.dispose();
    }
  }

  /** What a child process needs to drive the same workspace against the same emulator. */
  childSetup(): ChildSetup {
    return { workspace: this.workspace, baseUrl: this.emulator.baseUrl, timing: this.timing };
  }

  // ------------------------------------------------------------------ records

  runDir(id: string): string {
    return this.store.runDir(id);
  }

  /** run.json as it is on disk (snake_case keys, not the class's camelCase). */
  runJson(id: string): Record<string, unknown> {
    return readJson(path.join(this.runDir(id), 'run.json'));
  }

  podJson(id: string): Record<string, unknown> {
    return readJson(path.join(this.runDir(id), 'pod.json'));
  }

  onlyRunId(): string {
    const dir = this.store.runsDir;
    const ids = fs.existsSync(dir) ? fs.readdirSync(dir) : [];
    assert.equal(ids.length, 1, `runs: ${ids.join(', ')}`);
    return ids[0]!;
  }

  ledgerOf(podId: string): LedgerEntry {
    const entry = this.emulator.ledger().pods.find((p) => p.id === podId);
    assert.ok(entry, `pod ${podId} is not in the ledger`);
    return entry;
  }

  /** See {@link assertDeletedAfterRetrieval}: by the client, or by its watchdog on the marker. */
  assertDeletedAfterRetrieval(podId: string, recordedBy?: unknown): void {
    assertDeletedAfterRetrieval(this.emulator, podId, recordedBy);
  }

  /** Ledger entries of the pods carrying run marker `runId`. */
  podsOfRun(runId: string): LedgerEntry[] {
    return this.emulator.ledger().pods.filter((p) => p.runId === runId);
  }

  /**
   * The next `calls` whole calls to `route` with the account's key (each with all the client's
   * retries) fail with `effect`, as when the API cannot answer them, and `extra` requests after
   * them. Returns how many requests fail.
   */
  async failWholeCalls(
    route: RouteName,
    calls: number,
    effect: FaultEffect,
    extra = 0,
  ): Promise<number> {
    const times = calls * (this.timing.retries + 1) + extra;
    await this.emulator.faults.add({ kind: 'request', route, key: 'account', times, effect });
    return times;
  }

  billing(): LedgerEntry[] {
    return this.emulator.ledger().pods.filter((p) => p.billing);
  }

  clientKeyExists(id: string): boolean {
    return fs.existsSync(path.join(this.runDir(id), 'ssh', 'id_ed25519'));
  }

  async hostKeySecretExists(id: string): Promise<boolean> {
    const listed = await this.api.get<{ secrets: { name: string }[] }>('/account/secrets');
    return listed.body.secrets.some((s) => s.name === hostKeySecretName(id));
  }

  /** The file of the pod's own run directory as the pod sees it (`/workspace/overbrainer/<id>/...`). */
  podFile(podId: string, runId: string, rel: string): string {
    const pod = this.emulator.pod(podId);
    assert.ok(pod, `pod ${podId} is gone`);
    return path.join(pod.dirs.workspace, 'overbrainer', runId, rel);
  }

  /**
   * Copies the files under `rel` of each pod of `runId` as the pod holds them, at the moment the
   * core announces it deletes that pod (the bus is synchronous: nothing is deleted before the
   * copy is done). Returns the copies by pod ID.
   */
  capturePodFilesOnDelete(
    runId: () => string | null,
    rel: string,
  ): Map<string, Map<string, Buffer>> {
    const captured = new Map<string, Map<string, Buffer>>();
    this.bus.on((event) => {
      const id = runId();
      if (event.type !== 'pod' || event.status.kind !== 'deleting' || event.runId !== id) return;
      const pod = this.emulator.pod(event.status.podId);
      if (!pod) return;
      captured.set(
        event.status.podId,
        filesUnder(path.join(pod.dirs.workspace, 'overbrainer', id, rel)),
      );
    });
    return captured;
  }

  // ------------------------------------------------------------------ events

  /** The `pod` events, as `kind` or `kind:detail` words, in order. */
  podEvents(runId?: string): PodStatusEvent[] {
    return this.events
      .map((e) => e.event)
      .filter((e): e is Extract<CoreEvent, { type: 'pod' }> => e.type === 'pod')
      .filter((e) => runId === undefined || e.runId === runId)
      .map((e) => e.status);
  }

  podEventKinds(runId?: string): string[] {
    return this.podEvents(runId).map((s) => s.kind);
  }

  metrics(runId?: string): number {
    return this.events.filter(
      (e) => e.event.type === 'metric' && (runId === undefined || e.event.runId === runId),
    ).length;
  }

  logs(): string[] {
    return this.events
      .map((e) => e.event)
      .filter((e): e is Extract<CoreEvent, { type: 'log' }> => e.type === 'log')
      .map((e) => `${e.level}: ${e.message}`);
  }

  warnings(): Extract<CoreEvent, { type: 'warning' }>[] {
    return this.events
      .map((e) => e.event)
      .filter((e): e is Extract<CoreEvent, { type: 'warning' }> => e.type === 'warning');
  }

  /** Every recorded event, one line each, for assertion messages. */
  transcript(): string {
    return this.events
      .filter((e) => e.event.type !== 'metric')
      .map((e) => JSON.stringify(e.event))
      .join('\n');
  }

  /** Resolves once `probe` holds (polled), or rejects after `timeoutMs`. */
  async waitFor(what: string, probe: () => boolean, timeoutMs = 60_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!probe()) {
      if (Date.now() > until) {
        throw new Error(`timed out waiting for ${what}; events:\n${this.transcript()}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Waits until the run's job is recorded running (run.json) and a metric arrived. */
  async jobRunning(runIdOf: () => string | null, timeoutMs = 60_000): Promise<string> {
    let id: string | null = null;
    await this.waitFor(
      'the job to run',
      () => {
        id = runIdOf();
        if (id === null) return false;
        try {
          return this.store.loadRun(id).state === 'running' && this.metrics(id) > 0;
        } catch {
          return false;
        }
      },
      timeoutMs,
    );
    return id!;
  }

  /**
   * Files of the workspace holding a secret: the API key anywhere, or a private key (armored, or
   * base64 of armored as the host-key secret holds it) anywhere but a run's ssh/id_ed25519.
   */
  async secretLeaks(): Promise<string[]> {
    const armored = '-----BEGIN OPENSSH PRIVATE KEY-----';
    const armoredB64 = Buffer.from(armored).toString('base64').slice(0, 40);
    const apiKey = this.emulator.apiKey;
    const found: string[] = [];
    for (const file of await filePathsUnder(this.workspace)) {
      let seen: Set<string>;
      try {
        seen = await needlesIn(path.join(this.workspace, file), [apiKey, armored, armoredB64]);
      } catch {
        continue; // removed while we looked (a retrieval's staging file)
      }
      if (seen.has(apiKey)) found.push(`${file}: the API key`);
      const clientKey = /^runs\/[^/]+\/ssh\/id_ed25519$/.test(file);
      if ((seen.has(armored) && !clientKey) || seen.has(armoredB64)) {
        found.push(`${file}: a private key`);
      }
    }
    return found;
  }

  /**
   * Host processes living in any pod of this lab now (what `close()` proves is empty afterwards),
   * read at once: see {@link processesMountingNow}.
   */
  podProcessesNow(): string[] {
    return processesMountingNow(path.basename(this.emulator.stateDir));
  }

  // ------------------------------------------------------------------ end

  /**
   * Kills every pod, stops the emulator, removes the workspace, and checks that no process of
   * any pod of this lab is left (no sshd, no watchdog, no job). Returns the pods that were still
   * billing before the close (the caller asserts on them when the scenario should leave none).
   */
  async close(): Promise<LedgerEntry[]> {
    if (this.closed) return [];
    this.closed = true;
    if (process.env.LIFECYCLE_TRACE) {
      const t0 = this.events[0]?.atMs ?? 0;
      for (const e of this.events) {
        if (e.event.type === 'metric') continue;
        process.stderr.write(`+${((e.atMs - t0) / 1000).toFixed(2)}s ${JSON.stringify(e.event)}\n`);
      }
    }
    const billing = this.billing();
    const leaks = await this.secretLeaks();
    this.client.dispose();
    const marker = path.basename(this.emulator.stateDir);
    await this.emulator.close();
    // With its pods and API gone, a flow still running ends on its own errors; wait for it.
    await Promise.race([
      Promise.all([...this.background]),
      new Promise((resolve) => setTimeout(resolve, 60_000).unref()),
    ]);
    const violations = this.emulator.contractViolations();
    const survivors = await processesMounting(marker);
    await fs.promises.rm(this.tmp, { recursive: true, force: true });
    assert.deepEqual(
      survivors,
      [],
      `processes of the lab's pods survived: ${survivors.join(', ')}`,
    );
    assert.deepEqual(leaks, [], 'secrets were written where they must not be');
    assert.deepEqual(violations, [], 'the emulator broke its contract');
    return billing;
  }
}

export { filesUnder, processesMounting, readJson } from './labFiles';
export { spawnLifecycleChild, type LifecycleChild } from './lifecycleChildProcess';

export interface CliRan {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A running `overbrainer` CLI (the built bundle, test/helpers/cli.ts) on a lab's workspace. */
export interface CliProcess {
  pid: number;
  out: { stdout: string; stderr: string };
  done: Promise<CliRan>;
  kill(signal?: NodeJS.Signals): void;
}

/**
 * The CLI as a user runs it on the lab's workspace, with a cleared environment: the lab's
 * emulator and key, and OVERBRAINER_TIMING_SCALE `scale` (8 by default: SSH calls into an
 * emulated pod can take seconds on a loaded machine).
 */
export function startCli(
  lab: Lab,
  args: string[],
  env: Record<string, string> = {},
  scale = '8',
): CliProcess {
  const { child, out, done } = startUserCli(['-C', lab.workspace, ...args], {
    env: { ...emulatorEnv(lab.emulator, scale), ...env },
  });
  return { pid: child.pid ?? -1, out, done, kill: (signal = 'SIGKILL') => child.kill(signal) };
}

/** Runs the CLI to its end. */
export function runCli(
  lab: Lab,
  args: string[],
  env: Record<string, string> = {},
): Promise<CliRan> {
  return startCli(lab, args, env).done;
}

/**
 * The labs of one `describe` of the reliability matrix: call it in the describe's body; it
 * returns `lab(options)`, which starts a lab and hands it to an afterEach that records the
 * emulator's ledger for the matrix's figures, closes the lab, and fails a passed test whose lab
 * left a pod billing.
 */
export function matrixLabs(): (options?: LabOptions) => Promise<Lab> {
  const labs: Lab[] = [];
  afterEach(async function () {
    const failures: string[] = [];
    for (const done of labs.splice(0)) {
      recordLedger(this.currentTest?.fullTitle() ?? 'matrix', done.emulator.ledger());
      try {
        const billing = await done.close();
        if (billing.length > 0) failures.push(`billing: ${billing.map((p) => p.id).join(', ')}`);
      } catch (error) {
        failures.push(String(error));
      }
    }
    if (this.currentTest?.state === 'passed') assert.deepEqual(failures, []);
  });
  return async (options: LabOptions = {}) => {
    const started = await Lab.start(options);
    labs.push(started);
    return started;
  };
}

/** Holds the ID of the run a flow creates (pass `onRun` to train()); null until it exists. */
export function runIdHolder(): { id: string | null; onRun: (run: { id: string }) => void } {
  const holder = {
    id: null as string | null,
    onRun: (run: { id: string }) => {
      holder.id = run.id;
    },
  };
  return holder;
}
