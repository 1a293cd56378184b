/**
 * The disk policy's ticking task while a run is followed (src/core/train/disk.ts decides): every
 * `diskPollMs` it takes a sample of the run's disk — pushed by the pod's watcher on the metrics
 * stream, or sampled over the executor while that stream is down — says the warnings, grows the run's
 * network volume through the API (and hands the new size to the pod's watchdog in
 * `.pod/volume_gb`), or asks the job for a snapshot with reason `disk`. It runs alongside the
 * lease holder and never fails the follow: its own failures are logged and tried again at the
 * next sample.
 */
import { isAbortError } from '../clock';
import type { RunRecord } from '../runs/runRecord';
import { DiskPolicy, parseSample, sampleScript, type DiskAction } from '../train/disk';
import { requestSnapshot } from '../train/snapshot';
import { NETWORK_VOLUME_PATH } from '../runpod/api';
import { log, warn, type PodCtx } from './context';
import { isApiError } from '../runpod/apiErrors';
import { VOLUME_GB_FILE } from './podScripts';
import type { PodHandle } from './podHandle';
import type { PodPushes } from './podPushes';
import { describeError } from '../errors';

/** Runpod's answers that refuse a growth outright (no GET will ever show it). */
const REFUSALS = new Set(['rejected', 'forbidden', 'unauthorized', 'no_credits']);

/**
 * Samples the disk of `run` every `diskPollMs` until `signal` aborts (with `pushes`: as the pod
 * pushes its samples, sampling itself only while the stream is down); resolves then, never
 * rejects. With a network volume, its size is read from the API first and written to the pod's
 * `.pod/volume_gb` (the watchdog's disk rule reads it).
 */
export async function watchDisk(
  ctx: PodCtx,
  run: RunRecord,
  pod: PodHandle,
  signal: AbortSignal,
  pushes?: PodPushes,
): Promise<void> {
  const { executor } = pod;
  const volumeId = pod.volume?.id ?? null;
  let policy: DiskPolicy | null =
    volumeId === null ? new DiskPolicy(null, ctx.timing.volumeGbBytes) : null;

  const handOver = async (sizeGb: number): Promise<void> => {
    try {
      await executor.writeFileAtomic(`${run.remoteDir}/${VOLUME_GB_FILE}`, `${sizeGb}\n`);
    } catch (error) {
      log(
        ctx,
        'warn',
        `cannot write the volume's size on the pod of run ${run.id}: ${describeError(error)}`,
      );
    }
  };

  const act = async (current: DiskPolicy, action: DiskAction): Promise<void> => {
    switch (action.kind) {
      case 'warn':
        warn(ctx, run.id, 'disk_full', action.text);
        return;
      case 'grown':
        log(ctx, 'info', `run ${run.id}: ${action.text}`);
        await handOver(action.sizeGb);
        return;
      case 'grow':
        warn(ctx, run.id, 'disk_grow', action.text);
        try {
          await ctx.client.updateNetworkVolume(volumeId!, { size: action.toGb }, { signal });
        } catch (error) {
          if (isAbortError(error) || signal.aborted) throw error;
          if (isApiError(error) && REFUSALS.has(error.kind)) {
            for (const next of current.growthRefused(describeError(error)))
              await act(current, next);
            return;
          }
          // No clear answer: it may have grown. The next samples look it up.
          log(
            ctx,
            'warn',
            `run ${run.id}: growing network volume ${volumeId!} got no clear answer (${describeError(error)}); looking it up at the next samples`,
          );
          return;
        }
        // Seen at once when Runpod shows it already: the watchdog gets the size without waiting
        // for the next sample (else the next two samples look again).
        try {
          const now = await ctx.client.getNetworkVolume(volumeId!, { signal });
          if (now !== null) for (const next of current.seen(now.sizeGb)) await act(current, next);
        } catch (error) {
          if (isAbortError(error) || signal.aborted) throw error;
          log(
            ctx,
            'debug',
            `run ${run.id}: cannot look network volume ${volumeId!} up: ${describeError(error)}`,
          );
        }
        return;
      case 'snapshot': {
        let asked;
        try {
          asked = await requestSnapshot(executor, run.remoteDir, 'disk', { signal });
        } catch (error) {
          if (isAbortError(error) || signal.aborted) throw error;
          current.snapshotFailed();
          log(
            ctx,
            'warn',
            `run ${run.id}: cannot ask the job for a snapshot: ${describeError(error)}`,
          );
          return;
        }
        if (asked.kind === 'requested') warn(ctx, run.id, 'disk_snapshot', action.text);
        else if (asked.kind === 'already_requested') {
          log(
            ctx,
            'info',
            `run ${run.id}: ${action.text}; a snapshot was already asked for (reason ${asked.reason})`,
          );
        }
        return;
      }
    }
  };

  /** The pod's sample line: pushed, else asked for now (null when it gave none). */
  const sampleText = async (pushed: string | null): Promise<string | null> => {
    if (pushed !== null) return pushed;
    const result = await executor.exec(
      sampleScript(run.remoteDir, volumeId === null ? null : NETWORK_VOLUME_PATH),
      { signal, timeoutMs: 5 * 60_000, maxOutputBytes: 4096 },
    );
    if (result.code === 0) return result.stdout.toString('utf8');
    const why = result.stderr.toString('utf8').trim().slice(0, 200);
    log(ctx, 'debug', `run ${run.id}: no disk sample (${why || `exit ${result.code}`})`);
    return null;
  };

  const sampleOnce = async (current: DiskPolicy, pushed: string | null): Promise<void> => {
    const text = await sampleText(pushed);
    const sample = text === null ? null : parseSample(text);
    if (sample === null) {
      if (text !== null)
        log(ctx, 'debug', `run ${run.id}: not a disk sample: ${text.slice(0, 200)}`);
      return;
    }
    let apiSizeGb: number | null = null;
    if (volumeId !== null && current.awaitedGb !== null) {
      try {
        apiSizeGb = (await ctx.client.getNetworkVolume(volumeId, { signal }))?.sizeGb ?? null;
      } catch (error) {
        if (isAbortError(error) || signal.aborted) throw error;
        log(
          ctx,
          'debug',
          `run ${run.id}: cannot look network volume ${volumeId} up: ${describeError(error)}`,
        );
      }
    }
    for (const action of current.decide(sample, apiSizeGb)) await act(current, action);
  };

  while (!signal.aborted) {
    // The pod pushes a sample every diskPollMs; after that long with the stream down, sample here.
    let pushed: string | null = null;
    if (pushes !== undefined) {
      try {
        const next = await pushes.disk.next(ctx.timing.diskPollMs, signal);
        pushed = typeof next === 'string' ? null : next.value;
      } catch {
        return;
      }
    }
    try {
      if (policy === null && volumeId !== null) {
        const volume = await ctx.client.getNetworkVolume(volumeId, { signal });
        if (volume === null) {
          log(
            ctx,
            'warn',
            `run ${run.id}: network volume ${volumeId} is not in the account: its disk use is not watched`,
          );
          return;
        }
        policy = new DiskPolicy(
          { sizeGb: volume.sizeGb, maxGb: pod.volume?.maxGb ?? null },
          ctx.timing.volumeGbBytes,
        );
        await handOver(volume.sizeGb);
      }
      if (policy !== null) await sampleOnce(policy, pushed);
    } catch (error) {
      if (isAbortError(error) || signal.aborted) return;
      log(ctx, 'debug', `run ${run.id}: the disk watch failed this time: ${describeError(error)}`);
    }
    if (pushes !== undefined) continue;
    try {
      await ctx.clock.sleep(ctx.timing.diskPollMs, signal);
    } catch {
      return;
    }
  }
}
