/**
 * The GPUs of a followed run's pod: each sample the pod's watcher pushes on the metrics stream
 * (train/podWatcher.ts, every `gpuSampleMs`, no SSH session of its own) is parsed, kept in the
 * run's records (`.pod/gpu.jsonl`, `.pod/gpu.json`: runs/gpuRecord.ts) and judged
 * (train/gpuSamples.ts): a GPU idle for `gpuIdleWindowMs`, or a card four times larger than the
 * job's memory, is said once per run as a warning with the rate it wastes. While the stream is
 * down nothing is sampled. It never fails the follow: a record that cannot be written is logged.
 */
import { isAbortError } from '../clock';
import { describeError } from '../errors';
import {
  appendGpuSample,
  readGpuSummary,
  writeGpuSummary,
  type GpuSummary,
} from '../runs/gpuRecord';
import type { RunRecord } from '../runs/runRecord';
import { GpuJudge, parseNvidiaSmi } from '../train/gpuSamples';
import { log, warn, type PodCtx } from './context';
import type { PodHandle } from './podHandle';
import type { PodPushes } from './podPushes';

/** Takes the pod's GPU samples of `run` until `signal` aborts; resolves then, never rejects. */
export async function watchGpus(
  ctx: PodCtx,
  run: RunRecord,
  pod: PodHandle,
  signal: AbortSignal,
  pushes: PodPushes,
): Promise<void> {
  const runDir = ctx.store.runDir(run.id);
  const summary: GpuSummary = readGpuSummary(runDir) ?? { last: null, samples: 0, findings: [] };
  const judge = new GpuJudge(
    ctx.timing.gpuIdleWindowMs,
    pod.limits.costPerHourUsd,
    summary.findings.map((f) => f.code),
  );
  let writeFailed = false;
  for (;;) {
    let next;
    try {
      // Nothing to do while the stream is down: the next push wakes it.
      next = await pushes.gpu.next(6 * ctx.timing.gpuSampleMs, signal);
    } catch (error) {
      if (isAbortError(error) || signal.aborted) return;
      log(ctx, 'debug', `run ${run.id}: GPU samples: ${describeError(error)}`);
      return;
    }
    if (typeof next === 'string') continue;
    const gpus = parseNvidiaSmi(next.value);
    if (gpus.length === 0) continue;
    const sample = { timeMs: ctx.clock.nowMs(), gpus };
    const findings = judge.add(sample);
    summary.last = sample;
    summary.samples += 1;
    for (const finding of findings) summary.findings.push({ ...finding, timeMs: sample.timeMs });
    try {
      appendGpuSample(runDir, sample);
      writeGpuSummary(runDir, summary);
      writeFailed = false;
    } catch (error) {
      if (!writeFailed) {
        log(ctx, 'warn', `run ${run.id}: cannot keep its GPU samples: ${describeError(error)}`);
      }
      writeFailed = true;
    }
    ctx.bus.publish({ type: 'gpu', runId: run.id, sample });
    for (const finding of findings) warn(ctx, run.id, finding.code, finding.message);
  }
}
