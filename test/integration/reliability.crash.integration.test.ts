/**
 * Reliability matrix (issue #7), client crashes: the process running the lifecycle
 * (test/helpers/lifecycleChild.ts: `train()` of the core, as the CLI and the extension run it)
 * is killed with SIGKILL at every step of a run: before the first create, right after a create
 * was sent (before its answer), while waiting for SSH, before the job starts, mid-job,
 * mid-download, after the retrieved marker but before the delete, and mid-delete. Then either
 * `overbrainer train attach` (the CLI) finishes the run or cleans up, or nobody attaches and the
 * pod's watchdog alone deletes the pod within the bound the safety model states
 * (docs/RELIABILITY.md): max(deadline, last lease renewal + lease TTL) + one watchdog tick, or
 * one tick after the retrieved marker; a job the deadline's snapshot stopped (mid-job, a job
 * longer than the deadline) is kept for its retrieval until min(deadline, job end) + the
 * retrieve grace.
 *
 * Each case has its own lab (emulator with real pods + workspace) and asserts on run.json,
 * pod.json, the files on disk and the emulator's ledger: every pod deleted, never two billing pods
 * for one run, no verified result lost. Cases run side by side (a few at a time); each `it`
 * awaits its own. Timings: production / 60 (test/helpers/lifecycle.ts labTiming); the CLI that
 * attaches runs with OVERBRAINER_TIMING_SCALE=8.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sha256File } from '../../src/core/exec/localFiles';
import { attach } from '../../src/core/flow';
import type { CoreEvent } from '../../src/core/events';
import type { Fault } from '../emulator/faults';
import type { LedgerEntry } from '../emulator/ledger';
import {
  Lab,
  filesUnder,
  startCli,
  spawnLifecycleChild,
  type LabOptions,
  type LifecycleChild,
} from '../helpers/lifecycle';
import { recordFault, recordLedger, recordResult } from '../helpers/reliability';

/** Slack on a bound for a loaded 2-core machine: a curl from the pod, a tick that runs late. */
const SLACK_MS = 10_000;
/**
 * max_hours of the cases nobody attaches to: the deadline is 36 s after the create (a pod takes
 * up to ~20 s to be ready on a loaded machine; the job must start before the deadline).
 */
const SHORT_MAX_HOURS = 0.01;
/** How many cases run at once (each has an emulator, pods with sshd, and a child process). */
const PARALLEL = 4;

type Step =
  | 'before-create'
  | 'create-sent'
  | 'waiting-ssh'
  | 'before-job'
  | 'mid-job'
  | 'mid-download'
  | 'after-marker'
  | 'mid-delete';

interface Case {
  step: Step;
  /** Who finishes: `train attach` right after the kill, or nobody (the watchdog alone). */
  then: 'attach' | 'nobody';
}

interface Killed {
  lab: Lab;
  child: LifecycleChild;
  runId: string;
  killAtMs: number;
  /** Files of the run's output/ verified on disk before the kill (sha256 by path). */
  verifiedBefore: Map<string, string>;
  /** The big file's sha256 as the pod holds it (mid-download). */
  podBigSha: string | null;
}

const sha = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

function hashes(dir: string): Map<string, string> {
  return new Map([...filesUnder(dir)].map(([file, data]) => [file, sha(data)]));
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, probe: () => boolean, timeoutMs = 180_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** When the watchdog logged a line matching `line` ("<UTC ts> <msg>", whole seconds), or null. */
function logTimeMs(log: string, line: RegExp): number | null {
  for (const text of log.split('\n')) {
    const match = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (.*)$/.exec(text);
    if (match && line.test(match[2]!)) return Date.parse(match[1]!);
  }
  return null;
}

const podEvent = (events: CoreEvent[], kind: string): boolean =>
  events.some((e) => e.type === 'pod' && e.status.kind === kind);

/** Whether a call to `route` by the account key hangs (an injected `hang` fault holds it). */
function inFlight(lab: Lab, route: string): boolean {
  return lab.emulator
    .requests()
    .some((r) => r.route === route && r.key === 'account' && r.status === 'hung');
}

/** The lab for a step: the job, config and faults that open the step's window. */
function labOptions(c: Case): LabOptions {
  const base: LabOptions = {
    maxHours: c.then === 'nobody' ? SHORT_MAX_HOURS : 1,
    // Long enough that the pod waits for `train attach` to retrieve (a loaded machine is slow).
    retrieveGraceMinutes: 10,
  };
  switch (c.step) {
    case 'mid-job':
      return c.then === 'attach'
        ? { ...base, steps: 150, stepSeconds: 0.1 }
        : // A job longer than the deadline, as a user's would be: once the lease is stale the
          // watchdog asks for the deadline's snapshot, the trainer saves and ends, and the pod is
          // kept for its retrieval (the shortest retrieve grace, 1 min) before it is deleted.
          { ...base, steps: 1_000, stepSeconds: 0.1, retrieveGraceMinutes: 1 };
    case 'mid-download':
      return {
        ...base,
        // A result big enough that its download takes a while: killed halfway through it.
        command:
          'python3 train.py --steps 5 --step-seconds 0.05 && head -c 150000000 /dev/urandom > output/big.bin',
      };
    default:
      return { ...base, steps: 10, stepSeconds: 0.05 };
  }
}

/** The faults opening the window of `step`, installed before the child starts. */
function faultsFor(step: Step): Fault[] {
  switch (step) {
    case 'before-create':
      // The host-key secret (stored before the create) never answers: no create is ever sent.
      return [{ kind: 'request', route: 'createSecret', effect: { type: 'hang' } }];
    case 'create-sent':
      // Runpod creates the pod but never answers the create.
      return [{ kind: 'request', route: 'createPod', applied: true, effect: { type: 'hang' } }];
    case 'waiting-ssh':
      // The container starts 4 s after the create: the client waits for SSH meanwhile.
      return [{ kind: 'slowBoot', startingMs: 4_000 }];
    case 'after-marker':
      // The client's delete (account key) is never answered nor applied.
      return [{ kind: 'request', route: 'deletePod', key: 'account', effect: { type: 'hang' } }];
    case 'mid-delete':
      // The client's delete is applied but never answered. Until the kill the watchdog's own
      // deletes fail: once the retrieved marker is on the pod it deletes at its next tick, and on
      // a loaded machine it could beat the client's delete (the run would end before the kill).
      return [
        {
          kind: 'request',
          route: 'deletePod',
          key: 'account',
          applied: true,
          effect: { type: 'hang' },
        },
        {
          kind: 'request',
          route: 'deletePod',
          key: 'pod',
          times: 'always',
          effect: { type: 'status', status: 503 },
        },
        {
          kind: 'request',
          route: 'podAction',
          key: 'pod',
          times: 'always',
          effect: { type: 'status', status: 503 },
        },
      ];
    default:
      return [];
  }
}

/** Waits until the child is in `step`, then SIGKILLs it. */
async function killAt(lab: Lab, child: LifecycleChild, step: Step): Promise<number> {
  const ev = child.events;
  const dead = (): boolean => {
    if (ev.some((e) => (e as { type: string }).type === 'done')) {
      throw new Error(`the run ended before the kill: ${child.stderr()}`);
    }
    return false;
  };
  const runId = (): string | null => {
    const runs = path.join(lab.workspace, 'runs');
    return fs.existsSync(runs) ? (fs.readdirSync(runs)[0] ?? null) : null;
  };
  switch (step) {
    case 'before-create':
      await until('the host-key secret call', () => dead() || inFlight(lab, 'createSecret'));
      break;
    case 'create-sent':
      await until(
        'the create to be applied',
        () => dead() || (inFlight(lab, 'createPod') && lab.emulator.ledger().pods.length === 1),
      );
      break;
    case 'waiting-ssh':
      await until('the pod to be created', () => dead() || podEvent(ev, 'created'));
      break;
    case 'before-job':
      await until('the pod to be ready', () => dead() || podEvent(ev, 'ready'));
      break;
    case 'mid-job':
      await until(
        'the job to run',
        () =>
          dead() ||
          (ev.some((e) => e.type === 'runState' && e.state === 'running') &&
            ev.filter((e) => e.type === 'metric').length >= 3),
      );
      break;
    case 'mid-download':
      await until('the download to be under way', () => {
        dead();
        const id = runId();
        if (id === null) return false;
        const partial = path.join(lab.runDir(id), '.retrieving', 'partial');
        const files = filesUnderSizes(partial);
        return files > 1_000_000;
      });
      break;
    case 'after-marker':
    case 'mid-delete':
      await until("the client's delete", () => dead() || inFlight(lab, 'deletePod'));
      // Both variants hang; the applied one must have deleted the pod first.
      if (step === 'mid-delete') {
        await until('the delete to be applied', () =>
          lab.emulator.ledger().pods.every((p) => !p.billing),
        );
      }
      break;
  }
  return child.kill();
}

/** Total bytes of the files under `dir` (0 when it does not exist). */
function filesUnderSizes(dir: string): number {
  let total = 0;
  const walk = (d: string): void => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const p = path.join(d, entry.name);
      if (entry.isDirectory()) walk(p);
      else {
        try {
          total += fs.statSync(p).size;
        } catch {
          // being moved
        }
      }
    }
  };
  walk(dir);
  return total;
}

/** Never two pods of one run billing at the same moment (their billed spans never overlap). */
function assertOneBillingPodAtATime(pods: LedgerEntry[], nowMs: number): void {
  const spans = pods
    .map((p) => ({ id: p.id, from: p.createdAtMs, to: p.deletedAtMs ?? nowMs }))
    .sort((a, b) => a.from - b.from);
  for (let i = 1; i < spans.length; i++) {
    assert.ok(
      spans[i]!.from >= spans[i - 1]!.to,
      `pods ${spans[i - 1]!.id} and ${spans[i]!.id} of one run billed at the same time`,
    );
  }
}

async function crash(c: Case): Promise<Killed> {
  const lab = await Lab.start(labOptions(c));
  if (c.step === 'before-job') {
    // Upload enough that the job starts a while after the pod is ready: killed in between.
    fs.writeFileSync(path.join(lab.workspace, 'data', 'blob.bin'), Buffer.alloc(40_000_000, 7));
  }
  for (const fault of faultsFor(c.step)) await lab.emulator.faults.add(fault);
  const child = spawnLifecycleChild(lab);
  let killAtMs: number;
  try {
    killAtMs = await killAt(lab, child, c.step);
  } catch (error) {
    await child.kill();
    await lab.close().catch(() => undefined);
    const seen = child.events.map((e) => JSON.stringify(e).slice(0, 300)).join('\n');
    throw new Error(`${String(error)}\nchild stderr: ${child.stderr()}\nchild events:\n${seen}`, {
      cause: error,
    });
  }
  const runId = lab.onlyRunId();
  const output = path.join(lab.runDir(runId), 'output');
  const verifiedBefore =
    c.step === 'after-marker' || c.step === 'mid-delete' ? hashes(output) : new Map();
  let podBigSha: string | null = null;
  if (c.step === 'mid-download' && c.then === 'attach') {
    const podId = String(lab.podJson(runId).pod_id);
    podBigSha = (await sha256File(lab.podFile(podId, runId, 'output/big.bin'))).sha256;
  }
  // The faults that opened the window are done: what follows sees a healthy Runpod.
  lab.emulator.faults.clear();
  return { lab, child, runId, killAtMs, verifiedBefore, podBigSha };
}

/** What the kill left, per step: the records say where the run stood. */
function assertLeft(k: Killed, step: Step): void {
  const run = k.lab.runJson(k.runId);
  const pod = k.lab.podJson(k.runId);
  const pods = k.lab.podsOfRun(k.runId);
  switch (step) {
    case 'before-create':
      assert.equal(run.state, 'preparing');
      assert.equal(pod.state, 'creating');
      assert.equal(pod.pod_id, null);
      assert.equal(pods.length, 0, 'no create was sent');
      break;
    case 'create-sent':
      assert.equal(run.state, 'preparing');
      assert.equal(pod.pod_id, null, 'the create was never answered');
      assert.equal(pods.length, 1);
      assert.equal(pods[0]!.billing, true);
      break;
    case 'waiting-ssh':
    case 'before-job':
      assert.equal(run.state, 'preparing');
      assert.equal(run.job, null);
      assert.ok(typeof pod.pod_id === 'string');
      assert.equal(pods.length, 1);
      break;
    case 'mid-job':
    case 'mid-download':
      assert.equal(run.state, 'running');
      assert.equal(pods.length, 1);
      assert.equal(pods[0]!.billing, true);
      break;
    case 'after-marker':
    case 'mid-delete':
      assert.equal(run.state, 'succeeded', 'the run was saved before its pod was ended');
      assert.ok(k.verifiedBefore.size > 0, 'results were verified before the kill');
      break;
  }
}

/** The end every case must reach: nothing bills, the records agree, no result lost. */
async function assertEnd(k: Killed, step: Step, finisher: 'attach' | 'nobody'): Promise<void> {
  const run = k.lab.runJson(k.runId);
  const pod = k.lab.podJson(k.runId);
  const pods = k.lab.podsOfRun(k.runId);
  assert.deepEqual(
    k.lab.billing().map((p) => p.id),
    [],
    'a pod is still billing',
  );
  assertOneBillingPodAtATime(pods, Date.now());
  assert.equal(pod.state, 'deleted', `pod.json: ${JSON.stringify(pod)}`);
  assert.ok(!k.lab.clientKeyExists(k.runId), 'the client key is forgotten');
  const output = path.join(k.lab.runDir(k.runId), 'output');
  switch (step) {
    case 'before-create':
    case 'create-sent':
    case 'waiting-ssh':
    case 'before-job':
      assert.equal(run.state, 'failed');
      if (finisher === 'attach') assert.equal(run.message, 'interrupted before the job started');
      break;
    case 'mid-job':
      if (finisher === 'attach') {
        assert.equal(run.state, 'succeeded', String(run.message));
        assert.ok(fs.existsSync(path.join(output, 'model.json')));
      } else {
        assert.equal(run.state, 'failed');
      }
      break;
    case 'mid-download':
      if (finisher === 'attach') {
        assert.equal(run.state, 'succeeded', String(run.message));
        // The partial download was resumed or redone, then verified: the pod's bytes exactly.
        assert.equal((await sha256File(path.join(output, 'big.bin'))).sha256, k.podBigSha);
        assert.ok(!fs.existsSync(path.join(k.lab.runDir(k.runId), '.retrieving')));
      } else {
        assert.equal(run.state, 'failed');
      }
      break;
    case 'after-marker':
    case 'mid-delete': {
      assert.equal(run.state, 'succeeded');
      assert.deepEqual(hashes(output), k.verifiedBefore, 'the verified results are intact');
      break;
    }
  }
}

const CASES: Case[] = [
  ...(
    [
      'before-create',
      'create-sent',
      'waiting-ssh',
      'before-job',
      'mid-job',
      'mid-download',
      'after-marker',
      'mid-delete',
    ] as const
  ).map((step): Case => ({ step, then: 'attach' })),
  ...(['create-sent', 'mid-job', 'mid-download', 'after-marker'] as const).map((step): Case => ({
    step,
    then: 'nobody',
  })),
];

/** RELIABILITY_CASES=<substring> runs only the matching cases (to debug one). */
const ONLY = process.env.RELIABILITY_CASES;

const title = (c: Case): string =>
  c.then === 'attach'
    ? `SIGKILL ${c.step}, then train attach: the run ends, every pod deleted, no result lost`
    : `SIGKILL ${c.step}, nobody attaches: the watchdog alone deletes the pod within its bound`;

/** One case, start to end; returns the lab for the final close. */
async function scenario(c: Case, name: string): Promise<void> {
  const k = await crash(c);
  try {
    recordFault(name, 'client.sigkill');
    for (const fault of faultsFor(c.step)) {
      recordFault(name, fault.kind === 'request' ? `api.${fault.route}.hang` : `pod.${fault.kind}`);
    }
    assertLeft(k, c.step);
    const { lab, runId } = k;
    if (c.then === 'attach') {
      // Scale 3, not 8: the attach's SSH connect limit (10 s / scale) must hold on a loaded machine.
      const ran = await startCli(lab, ['train', 'attach', runId], {}, '3').done;
      const endMs = Date.now();
      assert.match(
        ran.stdout.trim(),
        new RegExp(`^train: run ${runId} (succeeded|failed)`),
        ran.stderr,
      );
      const ok = lab.runJson(runId).state === 'succeeded';
      assert.equal(ran.code, ok ? 0 : 1, ran.stderr);
      assert.ok(
        !ran.stdout.includes(lab.emulator.apiKey) && !ran.stderr.includes(lab.emulator.apiKey),
      );
      // Every pod of the run was deleted by the time attach returned.
      for (const p of lab.podsOfRun(runId)) {
        assert.ok(p.deletedAtMs !== null && p.deletedAtMs <= endMs, `pod ${p.id} outlived attach`);
      }
    } else {
      // Nobody attaches: the bound is max(deadline, last lease renewal + TTL) + a watchdog tick,
      // or one tick once the retrieved marker is on the pod.
      const tickMs = lab.timing.watchdogIntervalS * 1000;
      for (const p of lab.podsOfRun(runId)) {
        const deadlineMs = p.createdAtMs + SHORT_MAX_HOURS * 3_600_000 + 1_000;
        const podLog = (): string => lab.emulator.podLog(p.id);
        let boundMs: number;
        let reason: RegExp;
        if (c.step === 'after-marker') {
          boundMs = k.killAtMs + tickMs + SLACK_MS;
          reason = /delete reason=retrieved/;
        } else if (c.step === 'mid-job') {
          // The deadline's snapshot ends the job (asked for at the deadline minus the lead, or
          // once the lease is stale, within the snapshot wait); the pod is then kept for its
          // retrieval until min(deadline, job end) + retrieve grace: abandoned before the
          // deadline, or the deadline's delete after it.
          const snapshotBoundMs =
            Math.max(deadlineMs, k.killAtMs + lab.timing.leaseTtlMs) +
            lab.timing.snapshotWaitS * 1000 +
            tickMs +
            SLACK_MS;
          await until(
            `the deadline's snapshot to end the job on pod ${p.id}`,
            () => logTimeMs(podLog(), /job ended/) !== null,
            snapshotBoundMs - Date.now(),
          );
          assert.match(podLog(), /snapshot requested reason=deadline/);
          const endedMs = logTimeMs(podLog(), /job ended/)! + 1_000;
          boundMs = Math.min(deadlineMs, endedMs) + 60_000 + tickMs + SLACK_MS;
          reason = /delete reason=(abandoned|deadline)/;
        } else {
          boundMs = Math.max(deadlineMs, k.killAtMs + lab.timing.leaseTtlMs) + tickMs + SLACK_MS;
          reason = /delete reason=deadline/;
        }
        await until(
          `pod ${p.id} deleted by its watchdog`,
          () => !lab.ledgerOf(p.id).billing,
          boundMs - Date.now() + 5_000,
        ).catch((error: unknown) => {
          throw new Error(`${String(error)}\nits watchdog's log:\n${podLog()}`);
        });
        const entry = lab.ledgerOf(p.id);
        assert.equal(entry.deletedBy, 'pod', 'its own watchdog deleted it');
        assert.ok(
          entry.deletedAtMs! <= boundMs,
          `deleted ${entry.deletedAtMs! - boundMs} ms past its bound`,
        );
        assert.match(podLog(), reason);
      }
      // The next look (attach, in process) records what happened.
      const attached = await attach(lab.deps, lab.config, runId).catch((e: unknown) => e);
      assert.ok(
        !(attached instanceof Error) || /no job yet/.test(attached.message),
        String(attached),
      );
    }
    await assertEnd(k, c.step, c.then);
    recordLedger(name, lab.emulator.ledger());
    const verified =
      c.step === 'after-marker' || c.step === 'mid-delete'
        ? 1
        : c.then === 'attach' && (c.step === 'mid-job' || c.step === 'mid-download')
          ? 1
          : 0;
    recordResult(name, { verified, lost: 0 });
  } catch (error) {
    await k.lab.close().catch(() => undefined);
    throw new Error(`${String(error)}\nchild stderr: ${k.child.stderr()}\n${k.lab.transcript()}`, {
      cause: error,
    });
  }
  const billing = await k.lab.close();
  assert.deepEqual(
    billing.map((p) => p.id),
    [],
    'pods left billing at close',
  );
}

describe('reliability: the client killed with SIGKILL at every step', function () {
  this.timeout(400_000);
  const results = new Map<Case, Promise<void>>();

  before(function () {
    const suite = this.test?.parent?.fullTitle() ?? 'reliability';
    // Up to PARALLEL cases at a time; each `it` awaits its own.
    let running = 0;
    const queue: (() => void)[] = [];
    const slot = async (): Promise<void> => {
      if (running >= PARALLEL) await new Promise<void>((resolve) => queue.push(resolve));
      running++;
    };
    const free = (): void => {
      running--;
      queue.shift()?.();
    };
    for (const c of CASES) {
      if (ONLY && !title(c).includes(ONLY)) continue;
      const work = (async () => {
        await slot();
        try {
          await scenario(c, `${suite} ${title(c)}`);
        } finally {
          free();
        }
      })();
      work.catch(() => undefined); // reported by its `it`
      results.set(c, work);
    }
  });

  after(async () => {
    await Promise.allSettled(results.values());
  });

  for (const c of CASES) {
    if (ONLY && !title(c).includes(ONLY)) continue;
    it(title(c), async () => {
      await results.get(c);
    });
  }
});
