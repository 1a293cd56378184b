/**
 * The load driver (issue #7, "Load"): `runs` runs trained and followed at once from THIS process
 * for `simulatedHours`, against one Runpod emulator holding one real pod per run (sshd, the real
 * bootstrap and watchdog). Time is the production timing divided by `timingScale` (60: an hour
 * in a minute), max_hours included, so each job runs far past its max_hours and only the leases
 * this process renews keep the watchdogs from deleting the pods.
 *
 * While the jobs run it samples, every `sampleMs`: this process's memory (RSS, V8 heap) and the
 * age of each pod's `.pod/lease` as the pod holds it. It returns the figures; it asserts nothing
 * itself (callers do: the load test, the benchmark).
 *
 *     const figures = await runLoad({ runs: 20, simulatedHours: 1, timingScale: 60 });
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { LEASE_FILE } from '../../src/core/pod/podScripts';
import { train, type FlowResult } from '../../src/core/flow';
import { scaleTiming, type Timing } from '../../src/core/timing';
import { GPU, Lab } from './lifecycle';

export interface LoadOptions {
  /** Runs followed at once (20 in the reliability matrix). */
  runs: number;
  /** How long each job runs, in simulated (production-time) hours. */
  simulatedHours: number;
  /** Production timing divided by this (60: an hour lasts a minute). */
  timingScale: number;
  /**
   * Each run's max_hours, simulated (default simulatedHours: the deadline counts from the
   * create and provisioning is not scaled, so at 1/120 a pod has 30 s to start its job and renew
   * its lease; run alone, the 20 were running 1 s after their creates). Each job runs on past it
   * (see `pastDeadlineHoursSimulated`), kept only by the lease. At 1.5 × simulatedHours, each
   * pod was followed 15 s more at 1/120 (a 50 % longer follow) for nothing more proven.
   */
  maxHoursSimulated?: number;
  /** How long each job runs on past its pod's max_hours, simulated (default 0.25 h: a lease TTL). */
  pastDeadlineHoursSimulated?: number;
  /** Simulated minutes between two metrics of a job (default 1). */
  metricEveryMinutes?: number;
  /**
   * Real ms between two runs' starts (default 500): twenty SSH handshakes at once in ssh2's pure
   * JavaScript crypto stall one event loop for seconds on a loaded 2-core machine. Once started,
   * all are followed at once.
   */
  startSpacingMs?: number;
  /** Sampling period of memory and leases, real ms (default 500). */
  sampleMs?: number;
  /** Progress lines (default none). */
  log?: (line: string) => void;
  /**
   * Called with the lab while the jobs run (all running), before they end: lets a caller look
   * at the live pods and processes (e.g. the secrets scan). Awaited.
   */
  whileRunning?: (lab: Lab, runIds: string[]) => Promise<void>;
}

export interface MemorySample {
  atMs: number;
  rssMb: number;
  heapUsedMb: number;
}

export interface LoadFigures {
  runs: number;
  simulatedHours: number;
  timingScale: number;
  maxHoursSimulated: number;
  /** Real time of the whole load, and of its parts. */
  wallMs: number;
  /** From the first create to the last job recorded running. */
  startAllMs: number;
  /** From all jobs running to the last run ended (verified and its pod deleted). */
  followMs: number;
  /** Runs that ended `succeeded` with their results verified, and the others with their reason. */
  succeeded: number;
  failed: string[];
  /** Metrics received per run (fewest and most), and how many each job writes. */
  metricsMin: number;
  metricsMax: number;
  metricsExpected: number;
  /** Runs whose published metrics differ from the steps their job says it ran (result.json). */
  metricsMissed: string[];
  /** Oldest lease seen on any pod while its job ran, against the lease's time to live. */
  leaseMaxAgeMs: number;
  leaseTtlMs: number;
  leaseSamples: number;
  /** Failed lease renewals (the core logs them), and a few of their messages. */
  leaseRenewFailures: number;
  leaseRenewFailureSamples: string[];
  /** Pods whose watchdog logged that it waited past max_hours because the lease was held. */
  podsLeaseHeldPastDeadline: number;
  /** Pods deleted by a deadline rule (watchdog `delete reason=deadline`, or the client's guard). */
  deadlineDeletes: number;
  /** Ledger: pods created, still billing after the runs ended (leaked). */
  podsCreated: number;
  podsLeaked: number;
  /** This process's event loop delay over the jobs' run (p99 and max, ms). */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  /** This process's memory over the jobs' run. */
  memory: {
    samples: number;
    rssFirstMb: number;
    rssLastMb: number;
    rssMaxMb: number;
    heapFirstMb: number;
    heapLastMb: number;
    heapMaxMb: number;
    /** Median heap of the last fifth of the samples minus that of the first fifth. */
    heapGrowthMb: number;
    rssGrowthMb: number;
  };
  /** The emulator's own contract violations, and secrets found in the workspace (both must be []). */
  problems: string[];
}

const MB = 1024 * 1024;

function median(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}

/** The load's timing: production / `scale`, with network and SSH limits wide enough for a loaded 2-core machine. */
export function loadTiming(scale: number): Timing {
  return scaleTiming(scale, {
    connectTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    createTimeoutMs: 30_000,
    readyTimeoutMs: 90_000,
    preflightTimeoutMs: 60_000,
    deleteConfirmMs: 30_000,
    deletePollMs: 200,
    retryBaseMs: 100,
    retryMaxMs: 1_000,
    statusPollMs: 1_000,
    // The pod's watcher looks for new checkpoints every checkpointLookMs (5 s in production, on
    // the pod's own machine); scaled to 167 ms, twenty pods' looks all run on this one 2-core
    // machine. These jobs save no checkpoint: one look in 2 s, what the SSH poll it replaced cost.
    checkpointLookMs: 2_000,
    // Likewise the GPU sample (the emulator's nvidia-smi stand-in, a shell and awk per sample).
    gpuSampleMs: 10_000,
  });
}

/**
 * The job of each run: a metric every `step` seconds for at least `steps` steps, and on until
 * `past` seconds after its pod's max_hours deadline (read from the pod's PID 1, whose environment
 * holds the watchdog's OVERBRAINER_DEADLINE), so every job runs well past max_hours however long
 * provisioning took on a loaded machine (the deadline counts from the create). Writes
 * output/result.json with the steps it ran.
 */
const LOAD_JOB = `import json, os, sys, time
step_s, steps, past = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
deadline = None
try:
    for kv in open("/proc/1/environ", "rb").read().split(b"\\0"):
        if kv.startswith(b"OVERBRAINER_DEADLINE="):
            deadline = int(kv.split(b"=", 1)[1])
except OSError:
    pass
start = time.time()
end = start + steps * step_s
if deadline is not None:
    end = max(end, deadline + past)
metrics = os.environ["OVERBRAINER_METRICS"]
step = 0
while True:
    step += 1
    with open(metrics, "a") as out:
        out.write(json.dumps({"event": "log", "step": step, "loss": 1.0 / step, "time": time.time()}) + "\\n")
    if time.time() + step_s > end:
        break
    time.sleep(step_s)
os.makedirs("output", exist_ok=True)
with open("output/result.json", "w") as out:
    json.dump({"steps": step, "deadline": deadline}, out)
`;

export async function runLoad(options: LoadOptions): Promise<LoadFigures> {
  const t0 = performance.now();
  const log = options.log ?? ((): void => undefined);
  const scale = options.timingScale;
  const maxHoursSimulated = options.maxHoursSimulated ?? options.simulatedHours;
  const everyMinutes = options.metricEveryMinutes ?? 1;
  const steps = Math.max(1, Math.round((options.simulatedHours * 60) / everyMinutes));
  const stepSeconds = (everyMinutes * 60) / scale;
  const timing = loadTiming(scale);
  const lab = await Lab.start({
    command: `python3 data/load_job.py ${stepSeconds} ${steps} ${((options.pastDeadlineHoursSimulated ?? 0.25) * 3600) / scale}`,
    gpuTypes: [GPU.rtx4090, GPU.a5000],
    maxHours: maxHoursSimulated / scale,
    timing,
    owner: 'load',
  });
  fs.writeFileSync(path.join(lab.workspace, 'data', 'load_job.py'), LOAD_JOB);
  const problems: string[] = [];
  const memory: MemorySample[] = [];
  let leaseMaxAgeMs = 0;
  let leaseSamples = 0;
  let sampler: NodeJS.Timeout | null = null;
  try {
    // One GPU type can hold every pod (the default catalog holds 8 + 4 RTX 4090s).
    await lab.emulator.faults.setStock(GPU.rtx4090, options.runs + 5, 'EU-RO-1');
    const ids: (string | null)[] = new Array<string | null>(options.runs).fill(null);
    const flows: Promise<FlowResult | Error>[] = [];
    for (let n = 0; n < options.runs; n++) {
      if (n > 0) await new Promise((resolve) => setTimeout(resolve, options.startSpacingMs ?? 500));
      flows.push(
        lab.track(
          train(lab.deps, lab.config, lab.workspace, { onRun: (run) => (ids[n] = run.id) }).catch(
            (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
          ),
        ),
      );
    }
    // All jobs running (run.json says so and a metric arrived), or a flow ended early.
    const allRunning = async (): Promise<void> => {
      const ended = new Set<number>();
      flows.forEach((f, n) => void f.then(() => ended.add(n)));
      await lab.waitFor(
        `${options.runs} jobs running`,
        () =>
          ids.every((id, n) => {
            if (ended.has(n)) return true;
            if (id === null) return false;
            try {
              return lab.store.loadRun(id).state === 'running' && lab.metrics(id) > 0;
            } catch {
              return false;
            }
          }),
        timing.readyTimeoutMs + 60_000,
      );
    };
    await allRunning();
    const startAllMs = performance.now() - t0;
    log(`${options.runs} jobs running after ${(startAllMs / 1000).toFixed(1)} s`);
    const runIds = ids.filter((id): id is string => id !== null);
    const podOf = new Map<string, string>();
    for (const id of runIds) {
      try {
        const podId = lab.podJson(id).pod_id;
        if (typeof podId === 'string') podOf.set(id, podId);
      } catch {
        // No pod record: the run failed before its create; its flow says why.
      }
    }
    const ended = new Set<string>();
    flows.forEach(
      (f, n) =>
        void f.then(() => {
          const id = ids[n];
          if (id !== null && id !== undefined) ended.add(id);
        }),
    );
    const sample = (): void => {
      const m = process.memoryUsage();
      memory.push({ atMs: performance.now() - t0, rssMb: m.rss / MB, heapUsedMb: m.heapUsed / MB });
      const nowMs = Date.now();
      for (const [id, podId] of podOf) {
        if (ended.has(id)) continue;
        try {
          if (fs.existsSync(lab.podFile(podId, id, 'exit_code'))) continue;
          const stat = fs.statSync(lab.podFile(podId, id, LEASE_FILE));
          leaseMaxAgeMs = Math.max(leaseMaxAgeMs, nowMs - stat.mtimeMs);
          leaseSamples++;
        } catch {
          // Not renewed yet (the first renewal comes at once), or the pod is being deleted.
        }
      }
    };
    const loop = monitorEventLoopDelay({ resolution: 20 });
    loop.enable();
    sample();
    sampler = setInterval(sample, options.sampleMs ?? 500);
    const tFollow = performance.now();
    if (options.whileRunning) await options.whileRunning(lab, runIds);
    const results = await Promise.all(flows);
    clearInterval(sampler);
    sampler = null;
    loop.disable();
    sample();
    const followMs = performance.now() - tFollow;
    log(`runs ended after ${(followMs / 1000).toFixed(1)} s of following`);

    const failed: string[] = [];
    let succeeded = 0;
    const metricCounts: number[] = [];
    const metricsMissed: string[] = [];
    results.forEach((result, n) => {
      const id = ids[n] ?? `(run ${n + 1})`;
      if (result instanceof Error) {
        failed.push(`${id}: ${result.message}`);
        return;
      }
      const run = lab.store.loadRun(id);
      if (run.state === 'succeeded') succeeded++;
      else failed.push(`${id}: ${run.state} ${run.message ?? ''}`);
      const published = lab.events.filter(
        (e) => e.event.type === 'metric' && e.event.runId === id,
      ).length;
      metricCounts.push(published);
      try {
        const ran = (
          JSON.parse(
            fs.readFileSync(path.join(lab.runDir(id), 'output', 'result.json'), 'utf8'),
          ) as { steps: number }
        ).steps;
        if (ran !== published) metricsMissed.push(`${id}: published ${published} of ${ran}`);
      } catch (error) {
        metricsMissed.push(`${id}: no output/result.json (${String(error)})`);
      }
    });

    const renewFailures = lab.logs().filter((l) => l.includes('cannot renew the lease'));
    let leaseHeld = 0;
    let deadlineDeletes = 0;
    for (const id of runIds) {
      const podId = podOf.get(id);
      if (podId === undefined) continue;
      const podLog = lab.emulator.podLog(podId);
      if (podLog.includes('deadline passed, lease held by the client')) leaseHeld++;
      if (podLog.includes('delete reason=deadline')) deadlineDeletes++;
      if (lab.podEvents(id).some((s) => s.kind === 'deleting' && s.reason === 'deadline')) {
        deadlineDeletes++;
      }
    }
    // Every run's pod is deleted once its results are verified: none may still bill.
    const ledger = lab.emulator.ledger();
    const podsCreated = ledger.totals.podsCreated;
    const podsLeaked = ledger.pods.filter((p) => p.billing).length;
    problems.push(...lab.emulator.contractViolations(), ...(await lab.secretLeaks()));

    const fifth = Math.max(1, Math.floor(memory.length / 5));
    const head = memory.slice(0, fifth);
    const tail = memory.slice(-fifth);
    const heapFirst = median(head.map((s) => s.heapUsedMb));
    const heapLast = median(tail.map((s) => s.heapUsedMb));
    const rssFirst = median(head.map((s) => s.rssMb));
    const rssLast = median(tail.map((s) => s.rssMb));
    return {
      runs: options.runs,
      simulatedHours: options.simulatedHours,
      timingScale: scale,
      maxHoursSimulated,
      wallMs: Math.round(performance.now() - t0),
      startAllMs: Math.round(startAllMs),
      followMs: Math.round(followMs),
      succeeded,
      failed,
      metricsMin: metricCounts.length > 0 ? Math.min(...metricCounts) : 0,
      metricsMax: metricCounts.length > 0 ? Math.max(...metricCounts) : 0,
      metricsExpected: steps,
      metricsMissed,
      leaseMaxAgeMs: Math.round(leaseMaxAgeMs),
      leaseTtlMs: timing.leaseTtlMs,
      leaseSamples,
      leaseRenewFailures: renewFailures.length,
      leaseRenewFailureSamples: [...new Set(renewFailures)].slice(0, 5),
      podsLeaseHeldPastDeadline: leaseHeld,
      deadlineDeletes,
      podsCreated,
      podsLeaked,
      loopDelayP99Ms: Math.round(loop.percentile(99) / 1e6),
      loopDelayMaxMs: Math.round(loop.max / 1e6),
      memory: {
        samples: memory.length,
        rssFirstMb: round1(rssFirst),
        rssLastMb: round1(rssLast),
        rssMaxMb: round1(Math.max(...memory.map((s) => s.rssMb))),
        heapFirstMb: round1(heapFirst),
        heapLastMb: round1(heapLast),
        heapMaxMb: round1(Math.max(...memory.map((s) => s.heapUsedMb))),
        heapGrowthMb: round1(heapLast - heapFirst),
        rssGrowthMb: round1(rssLast - rssFirst),
      },
      problems,
    };
  } finally {
    if (sampler !== null) clearInterval(sampler);
    await lab.close();
  }
}

/** The figures as a few lines for a test's output or a benchmark's report. */
export function formatLoadFigures(f: LoadFigures): string {
  const s = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
  return [
    `load: ${f.runs} runs followed from one process, ${f.simulatedHours} simulated h at 1/${f.timingScale} (max_hours ${f.maxHoursSimulated} simulated h)`,
    `  wall ${s(f.wallMs)}: all jobs running after ${s(f.startAllMs)}, followed ${s(f.followMs)}`,
    `  runs succeeded ${f.succeeded}/${f.runs}; metrics per run ${f.metricsMin}–${f.metricsMax} of ${f.metricsExpected}`,
    `  leases: oldest seen ${s(f.leaseMaxAgeMs)} (ttl ${s(f.leaseTtlMs)}, ${f.leaseSamples} samples); pods held past max_hours by the lease ${f.podsLeaseHeldPastDeadline}; deadline deletes ${f.deadlineDeletes}`,
    `  lease renewals failed: ${f.leaseRenewFailures}${f.leaseRenewFailureSamples.map((m) => `\n    ${m}`).join('')}`,
    `  pods created ${f.podsCreated}, leaked ${f.podsLeaked}; event loop delay p99 ${f.loopDelayP99Ms} ms, max ${f.loopDelayMaxMs} ms`,
    `  memory (${f.memory.samples} samples): rss ${f.memory.rssFirstMb} → ${f.memory.rssLastMb} MB (max ${f.memory.rssMaxMb}, growth ${f.memory.rssGrowthMb}); heap ${f.memory.heapFirstMb} → ${f.memory.heapLastMb} MB (max ${f.memory.heapMaxMb}, growth ${f.memory.heapGrowthMb})`,
  ].join('\n');
}
