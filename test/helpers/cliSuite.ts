/**
 * The CLI files' shared fixture: one emulator for the `describe` (its pods booting in 100 ms),
 * a fresh examples/tiny workspace per test, the CLIs a test started killed after it, and no pod
 * left billing by a passed test (a failed one reports what the CLIs it still waited on said).
 * Call it in the describe's body; its getters read the current emulator and workspace.
 * With `sharedWorkspace`, the describe's tests run one after another in one workspace (a later
 * test reads what an earlier one left).
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startEmulator, type Emulator } from '../emulator/emulator';
import { ApiClient } from '../emulator/testing';
import { startCli, type Ran, type Running } from './cli';
import { readJson } from './labFiles';
import { emulatorEnv, tempTinyWorkspace } from './tinyWorkspace';

export interface CliSuite {
  readonly emulator: Emulator;
  readonly api: ApiClient;
  /** The test's workspace (and the temp dir holding it). */
  readonly ws: string;
  readonly tmp: string;
  /** `overbrainer -C <dir> ARGS…` with an environment holding only the emulator's and `env`. */
  start(args: string[], env?: Record<string, string>, dir?: string): Running;
  cli(args: string[], env?: Record<string, string>, dir?: string): Promise<Ran>;
  runsDir(): string;
  /** The one run of the workspace (fails on none or several). */
  onlyRun(): string;
  runJson(id: string): Record<string, unknown>;
  podJson(id: string): Record<string, unknown>;
  /** The emulator's ledger entry of a pod (fails when it has none). */
  ledgerOf(podId: string): ReturnType<Emulator['ledger']>['pods'][number];
  /**
   * `train release RUN` of a kept pod whose results were retrieved: it says so, and pod.json
   * records it deleted and no longer kept. Returns that pod.json.
   */
  releaseRetrieved(id: string, podId: string): Promise<Record<string, unknown>>;
}

export interface CliSuiteOptions {
  /** One workspace for the whole describe, made before its first test (default: one per test). */
  sharedWorkspace?: boolean;
  /** More environment for every CLI the suite starts. */
  env?: Record<string, string>;
  /** Called on each new workspace after examples/tiny and `toml` are written into it. */
  prepare?: (ws: string) => void;
}

/** `prefix` names the temp dirs; `toml` is each workspace's overbrainer.toml. */
export function cliSuite(
  prefix: string,
  toml: () => string,
  options: CliSuiteOptions = {},
): CliSuite {
  let emulator: Emulator | undefined;
  let api: ApiClient | undefined;
  let tmp = '';
  let ws = '';
  const children = new Set<ChildProcess>();
  /** Every CLI the test started, with its arguments. */
  const started = new Map<Running, string[]>();

  const newWorkspace = (): void => {
    ({ tmp, ws } = tempTinyWorkspace(prefix, toml()));
    options.prepare?.(ws);
  };
  const removeWorkspace = (): void => {
    if (tmp !== '') fs.rmSync(tmp, { recursive: true, force: true });
  };

  before(async () => {
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 100, starting: 100 } });
    api = new ApiClient(emulator.baseUrl, emulator.apiKey);
    if (options.sharedWorkspace) newWorkspace();
  });

  after(async () => {
    if (options.sharedWorkspace) removeWorkspace();
    await emulator?.close();
    if (emulator) assert.deepEqual(emulator.contractViolations(), []);
  });

  beforeEach(() => {
    if (!options.sharedWorkspace) newWorkspace();
  });

  afterEach(async function () {
    if (this.currentTest?.state !== 'passed') {
      // A test that timed out says nothing of the CLIs it waited on: what they said so far.
      for (const [running, args] of started) {
        if (running.child.exitCode !== null || running.child.signalCode !== null) continue;
        console.log(`  still running: overbrainer ${args.join(' ')}\n${running.out.stderr}`);
      }
    }
    started.clear();
    for (const child of children) child.kill('SIGKILL');
    children.clear();
    const em = suite.emulator;
    em.faults.clear();
    // No pod of a finished test may still bill (a failed test reports it here too).
    const billing = em.ledger().pods.filter((p) => p.billing);
    for (const pod of billing) await suite.api.delete(`/pods/${pod.id}`);
    if (!options.sharedWorkspace) removeWorkspace();
    if (this.currentTest?.state === 'passed') {
      assert.deepEqual(
        billing.map((p) => p.id),
        [],
        'a pod was left billing',
      );
    }
  });

  const suite: CliSuite = {
    get emulator(): Emulator {
      if (!emulator) throw new Error('the suite’s emulator is not started (before() failed?)');
      return emulator;
    },
    get api(): ApiClient {
      if (!api) throw new Error('the suite’s emulator is not started (before() failed?)');
      return api;
    },
    get ws() {
      return ws;
    },
    get tmp() {
      return tmp;
    },
    start(args, env = {}, dir = ws) {
      const running = startCli(['-C', dir, ...args], {
        children,
        env: { ...emulatorEnv(suite.emulator), ...options.env, ...env },
      });
      started.set(running, ['-C', dir, ...args]);
      return running;
    },
    cli: (args, env, dir) => suite.start(args, env, dir).done,
    runsDir: () => path.join(ws, 'runs'),
    onlyRun() {
      const dir = suite.runsDir();
      const ids = fs.existsSync(dir) ? fs.readdirSync(dir) : [];
      assert.equal(ids.length, 1, `runs: ${ids.join(', ')}`);
      return ids[0] ?? '';
    },
    runJson: (id) => readJson(path.join(suite.runsDir(), id, 'run.json')),
    podJson: (id) => readJson(path.join(suite.runsDir(), id, 'pod.json')),
    ledgerOf(podId) {
      const entry = suite.emulator.ledger().pods.find((p) => p.id === podId);
      assert.ok(entry, `pod ${podId} is not in the ledger`);
      return entry;
    },
    async releaseRetrieved(id, podId) {
      const released = await suite.cli(['train', 'release', id]);
      assert.equal(released.code, 0, released.stderr);
      assert.equal(
        released.stdout.trim(),
        `pod: ${podId} released and deleted: the results of run ${id} are retrieved`,
      );
      const pod = suite.podJson(id);
      assert.equal(pod.keep, false);
      assert.equal(pod.state, 'deleted');
      return pod;
    },
  };
  return suite;
}
