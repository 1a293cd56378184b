/**
 * The latency benchmark's two halves of a round (bench/latency.bench.ts): the measured side,
 * {@link child}, in a bundled process of its own, following one run or several at once; and
 * {@link measure}, in the parent, which writes the runs' lines as their trainers would.
 */
import { setMaxListeners } from 'node:events';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { systemClock } from '../src/core/clock';
import { EventBus } from '../src/core/events';
import { SshExecutor } from '../src/core/exec/ssh';
import { scaleTiming } from '../src/core/timing';
import { LEASE_FILE } from '../src/core/pod/podScripts';
import { MetricsFollower, PollingMetricsReader } from '../src/core/train/follow';
import { jobStatus } from '../src/core/train/job';
import type { Sshd } from '../test/helpers/sshd';
import { forkBundled, fromParent, toParent, type Message } from './child';
import {
  countSshRequests,
  cpuMs,
  productionPushes,
  snapshotSsh,
  sshDelta,
  sshTotal,
  waitUntil,
} from './lib';

export const LINES_PER_S = 10;

function line(step: number): string {
  const time = Date.now() / 1000;
  return `${JSON.stringify({ event: 'log', time, step, max_steps: 1_000_000, loss: 1 / (step + 1) })}\n`;
}

/** Wall-clock ms with sub-ms precision, comparable across processes of this machine. */
const wallNowMs = (): number => performance.timeOrigin + performance.now();

interface ChildParams extends Message {
  type: 'params';
  side: 'ours' | 'baseline';
  host: string;
  port: number;
  /** base64 */
  privateKey: string;
  hostPublicKey: string;
  /** The first of {@link runDirs} (what a child of a tree before runDirs reads). */
  runDir: string;
  /** The runs followed at once, each over an SSH connection of its own (a pod each). */
  runDirs?: string[];
  /**
   * A cluster run instead: `runDirs` are its nodes' (rank 0 first), rank 0's metrics followed and
   * every node looked at as src/core/flow/clusterFollow.ts does (see {@link nodeLooks}).
   */
  cluster?: boolean;
}

interface ChildResult extends Message {
  type: 'result';
  /** The first run's [step, wall ms at its metric event]. */
  receipts: [number, number][];
  /** Every run's (absent from a child of a tree before it). */
  receiptsByRun?: [number, number][][];
  cpuMs: number;
  sshRequests: number;
  wallMs: number;
  /** CPU and wall time from the first line to the window (the process's start-up in it). */
  warmUpCpuMs?: number;
  warmUpWallMs?: number;
  /** This process's RSS at the window's end. */
  rssKiB?: number;
  /** Over the window (absent from a child of a tree before them): see {@link WindowCounts}. */
  counts?: WindowCounts;
  /**
   * The process's CPU and wall ms when the first run's step 0 and every {@link SLICE_LINES}th
   * step after it arrived, warm-up included: how its cost per minute settles as it runs.
   */
  slices?: [number, number, number][];
}

/** Lines between two points of {@link ChildResult.slices} (20 s at 10 lines/s). */
export const SLICE_LINES = 200;

/**
 * Where the window's CPU went, beyond the process's total: the main thread's own CPU (the event
 * loop: JavaScript, the socket reads, the collector's pauses) against the helper threads' (V8's
 * concurrent marking and compiling, libuv's pool); how often the main thread went to sleep and
 * was woken (its voluntary context switches: one per wait in epoll with nothing to do); and the
 * garbage collector's pauses as V8 reports them.
 */
export interface WindowCounts {
  mainCpuMs: number;
  wakeUps: number;
  gcPauses: number;
  gcMs: number;
}

/** The calling thread's CPU (ns, /proc schedstat) and voluntary context switches, or nulls. */
function threadNow(): { cpuNs: number; switches: number } | null {
  try {
    const cpuNs = Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]);
    const status = readFileSync('/proc/thread-self/status', 'utf8');
    const switches = Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1]);
    return Number.isFinite(cpuNs) && Number.isFinite(switches) ? { cpuNs, switches } : null;
  } catch {
    return null;
  }
}

/** Counts from now on; `stop()` says what the window held (null where /proc has no answer). */
function countWindow(): { stop(): WindowCounts | undefined } {
  let gcPauses = 0;
  let gcMs = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcPauses++;
      gcMs += entry.duration;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  const before = threadNow();
  return {
    stop() {
      const after = threadNow();
      observer.disconnect();
      if (before === null || after === null) return undefined;
      return {
        mainCpuMs: (after.cpuNs - before.cpuNs) / 1e6,
        wakeUps: after.switches - before.switches,
        gcPauses,
        gcMs,
      };
    },
  };
}

/**
 * The measured side, in a bundled process of its own (bench/child.ts): follows (ours) or polls
 * (baseline) the runs over SSH and reports when each metric event was published, its CPU and SSH
 * requests over the window, and (ours) when the job's end was seen.
 */
export async function child(): Promise<void> {
  const params = await fromParent<ChildParams>('params');
  countSshRequests();
  const nodeDirs = params.runDirs ?? [params.runDir];
  // A cluster's metrics are rank 0's: one run followed, every node looked at.
  const runDirs = params.cluster === true ? nodeDirs.slice(0, 1) : nodeDirs;
  const stop = new AbortController();
  setMaxListeners(0, stop.signal); // every follower listens to it
  const received = runDirs.map(() => new Map<number, number>());
  /** Called after each metric event (the window's end waits on it, not on a polling timer). */
  let onReceipt = (): void => undefined;
  const slices: [number, number, number][] = [];
  const settled: (number | null)[] = runDirs.map(() => null);
  const executors: SshExecutor[] = [];
  const running: Promise<unknown>[] = [];
  for (const [index, runDir] of nodeDirs.entries()) {
    const executor = await SshExecutor.connect({
      host: params.host,
      port: params.port,
      username: 'root',
      privateKey: Buffer.from(params.privateKey, 'base64'),
      hostPublicKey: params.hostPublicKey,
      clock: systemClock,
      timing: scaleTiming(1),
    });
    executors.push(executor);
    if (index >= runDirs.length) continue; // a cluster's node other than rank 0: looked at only
    const bus = new EventBus();
    const receivedAtMs = received[index]!;
    bus.on((event) => {
      if (event.type !== 'metric') return;
      receivedAtMs.set(event.metric.step, wallNowMs());
      if (index === 0 && event.metric.step % SLICE_LINES === 0) {
        slices.push([event.metric.step, cpuMs(), performance.now()]);
      }
      onReceipt();
    });
    const common = {
      executor,
      runId: `bench-${index}`,
      runDir,
      bus,
      clock: systemClock,
      timing: scaleTiming(1),
    };
    running.push(
      (params.side === 'ours'
        ? new MetricsFollower({ ...common, pushes: productionPushes() }).follow(stop.signal)
        : new PollingMetricsReader(common).run(stop.signal)
      ).then(
        () => (settled[index] = wallNowMs()),
        (error: unknown) => {
          settled[index] = wallNowMs();
          if (!stop.signal.aborted) console.error(error);
        },
      ),
    );
  }
  if (params.cluster === true) running.push(nodeLooks(executors, nodeDirs, stop.signal));
  const all = (step: number) => (): boolean => received.every((r) => r.has(step));
  // Reading (streams up, or the poll loops going) once step 0 arrives.
  await waitUntil(`${params.side}: the first line`, all(0), 30_000);
  const warm = { cpu: cpuMs(), at: performance.now() };
  toParent({ type: 'ready' });
  // The parent writes the warm-up lines meanwhile, then starts the window.
  await fromParent('start');
  const ssh0 = snapshotSsh();
  const counting = countWindow();
  const cpu0 = cpuMs();
  const start = performance.now();
  const { lastStep } = await fromParent<Message & { lastStep: number }>('stop');
  // Everything arrives within a poll interval and a bit; the rest counts as lost. Waited for on
  // the events themselves: a 10-ms polling wait here put some 20 wake-ups into the window.
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 15_000);
    onReceipt = (): void => {
      if (!all(lastStep)()) return;
      clearTimeout(timer);
      resolve();
    };
    onReceipt();
  });
  onReceipt = () => undefined;
  const counts = counting.stop();
  toParent({
    type: 'result',
    receipts: [...received[0]!],
    receiptsByRun: received.map((r) => [...r]),
    cpuMs: cpuMs() - cpu0,
    sshRequests: sshTotal(sshDelta(snapshotSsh(), ssh0)),
    wallMs: performance.now() - start,
    warmUpCpuMs: cpu0 - warm.cpu,
    warmUpWallMs: start - warm.at,
    rssKiB: Math.round(process.memoryUsage().rss / 1024),
    ...(counts === undefined ? {} : { counts }),
    slices,
  } satisfies ChildResult);
  if (params.side === 'ours') {
    const { writtenAtMs } = await fromParent<Message & { writtenAtMs: number }>('ended');
    await waitUntil(
      'ours: the job end seen',
      () => settled.every((at) => at !== null),
      15_000,
    ).catch(() => undefined);
    const worst = settled.every((at) => at !== null) ? Math.max(...(settled as number[])) : null;
    toParent({ type: 'endSeen', endSeenMs: worst === null ? null : worst - writtenAtMs });
  }
  stop.abort();
  await Promise.all(running);
  for (const executor of executors) executor.dispose();
}

/**
 * A cluster's looks at its nodes as src/core/flow/clusterFollow.ts's watchNodes makes them while
 * it follows rank 0's metrics: every statusPollMs, every node at once, its status script and its
 * lease written, each bounded by the request timeout. The Runpod API's list of the cluster's pods
 * that goes beside them each time is not here (no API in this benchmark): its HTTPS request would
 * add to these figures.
 */
async function nodeLooks(
  executors: SshExecutor[],
  nodeDirs: string[],
  signal: AbortSignal,
): Promise<void> {
  const timing = scaleTiming(1);
  while (!signal.aborted) {
    await Promise.all(
      executors.map(async (executor, i) => {
        const runDir = nodeDirs[i]!;
        await jobStatus(executor, runDir, { signal, timeoutMs: timing.requestTimeoutMs });
        await executor.writeFileAtomic(`${runDir}/${LEASE_FILE}`, '');
      }),
    ).catch(() => undefined);
    await systemClock.sleep(timing.statusPollMs, signal).catch(() => undefined);
  }
}

/** What a side's round measured, per run followed. */
export interface Round {
  /** Per run: metric → event of each window line received. */
  latenciesMs: number[][];
  lost: number;
  cpuMs: number;
  sshRequests: number;
  wallMs: number;
  warmUpCpuMs: number | null;
  warmUpWallMs: number | null;
  rssKiB: number | null;
  endSeenMs: number | null;
  counts: WindowCounts | null;
  /** CPU ms per minute of each slice of {@link SLICE_LINES} lines from the first line on. */
  slicesCpuPerMinute: number[];
}

/**
 * One side's round: the child follows `runDirs` (`entry`: this file, or the same file of another
 * checkout), this process writes the lines (as the trainers would): `warmUp` lines, then the
 * window's `lines`, to every run at 10 lines/s.
 */
export async function measure(
  side: 'ours' | 'baseline',
  sshd: Sshd,
  runDirs: string[],
  jobPgid: number,
  lines: { warmUp: number; window: number },
  entry: string,
  cluster = false,
): Promise<Round> {
  const files = runDirs.map((runDir) => {
    mkdirSync(join(runDir, '.pod'), { recursive: true });
    writeFileSync(join(runDir, 'job.pid'), `${jobPgid}\n`);
    return join(runDir, 'metrics.jsonl');
  });
  // A cluster's metrics are written by rank 0 alone.
  const written = cluster ? files.slice(0, 1) : files;
  const proc = forkBundled(entry);
  /** Writes steps `from`..`to` at 10 lines/s, noting when each was written. */
  const write = async (from: number, to: number, sentAtMs?: Map<number, number>): Promise<void> => {
    const start = performance.now();
    for (let step = from; step <= to; step++) {
      const due = start + (step - from) * (1000 / LINES_PER_S);
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      sentAtMs?.set(step, wallNowMs());
      for (const file of written) appendFileSync(file, line(step));
    }
  };
  try {
    proc.send({
      type: 'params',
      side,
      host: sshd.host,
      port: sshd.port,
      privateKey: sshd.clientPrivateKey.toString('base64'),
      hostPublicKey: sshd.hostPublicKey,
      runDir: runDirs[0]!,
      runDirs,
      cluster,
    } satisfies ChildParams);
    for (const file of written) appendFileSync(file, line(0));
    await proc.next('ready', 60_000);
    await write(1, lines.warmUp);
    proc.send({ type: 'start' });
    const sentAtMs = new Map<number, number>();
    const lastStep = lines.warmUp + lines.window;
    await write(lines.warmUp + 1, lastStep, sentAtMs);
    proc.send({ type: 'stop', lastStep });
    const result = await proc.next<ChildResult>('result', 60_000);
    const latenciesMs = (result.receiptsByRun ?? [result.receipts]).map((receipts) =>
      receipts.flatMap(([step, atMs]) => {
        const sent = sentAtMs.get(step);
        return sent === undefined ? [] : [atMs - sent];
      }),
    );
    let endSeenMs: number | null = null;
    if (side === 'ours') {
      const writtenAtMs = wallNowMs();
      for (const runDir of runDirs) writeFileSync(join(runDir, 'exit_code'), '0\n');
      proc.send({ type: 'ended', writtenAtMs });
      endSeenMs = (await proc.next<Message & { endSeenMs: number | null }>('endSeen', 30_000))
        .endSeenMs;
    }
    await proc.done();
    return {
      latenciesMs,
      lost: latenciesMs.reduce((sum, run) => sum + lines.window - run.length, 0),
      cpuMs: result.cpuMs,
      sshRequests: result.sshRequests,
      wallMs: result.wallMs,
      warmUpCpuMs: result.warmUpCpuMs ?? null,
      warmUpWallMs: result.warmUpWallMs ?? null,
      rssKiB: result.rssKiB ?? null,
      endSeenMs,
      counts: result.counts ?? null,
      slicesCpuPerMinute: (result.slices ?? []).slice(1).map(([, cpu, at], i) => {
        const [, cpu0, at0] = result.slices![i]!;
        return ((cpu - cpu0) / (at - at0)) * 60_000;
      }),
    };
  } finally {
    proc.process.kill();
  }
}
