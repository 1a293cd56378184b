/**
 * The disk policy's ticking task while a run is followed (src/core/train/disk.ts decides): every
 * `diskPollMs` it samples the run's disk over the executor, says the warnings, grows the run's
 * network volume through the API (and hands the new size to the pod's watchdog in
 * `.pod/volume_gb`), or asks the job for a snapshot with reason `disk`. It runs alongside the
 * lease holder and never fails the follow: its own failures are logged and tried again at the
 * next sample.
 */
import { isAbortError } from '../clock';
import type { Executor } from '../exec/executor';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import { DiskPolicy, parseSample, sampleScript, type DiskAction } from '../train/disk';
import { requestSnapshot } from '../train/snapshot';
import { NETWORK_VOLUME_PATH } from './api';
import { log, warn, type PodCtx } from './context';
import { isApiError } from './errors';
import { VOLUME_GB_FILE } from './podScripts';
import { messageOf } from './remove';

/** Runpod's answers that refuse a growth outright (no GET will ever show it). */
const REFUSALS = new Set(['rejected', 'forbidden', 'unauthorized', 'no_credits']);

/**
 * Samples the disk of `run` every `diskPollMs` until `signal` aborts; resolves then, never
 * rejects. With a network volume, its size is read from the API first and written to the pod's
 * `.pod/volume_gb` (the watchdog's disk rule reads it).
 */
export async function watchDisk(
  ctx: PodCtx,
  executor: Executor,
  run: RunRecord,
  pod: PodRecord,
  signal: AbortSignal,
): Promise<void> {
  const volumeId = pod.networkVolumeId;
  let policy: DiskPolicy | null =
    volumeId === null ? new DiskPolicy(null, ctx.timing.volumeGbBytes) : null;

  const handOver = async (sizeGb: number): Promise<void> => {
    try {
      await executor.writeFileAtomic(`${run.remoteDir}/${VOLUME_GB_FILE}`, `${sizeGb}\n`);
    } catch (error) {
      log(
        ctx,
        'warn',
        `cannot write the volume's size on the pod of run ${run.id}: ${messageOf(error)}`,
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
            for (const next of current.growthRefused(messageOf(error))) await act(current, next);
            return;
          }
          // No clear answer: it may have grown. The next samples look it up.
          log(
            ctx,
            'warn',
            `run ${run.id}: growing network volume ${volumeId!} got no clear answer (${messageOf(error)}); looking it up at the next samples`,
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
            `run ${run.id}: cannot look network volume ${volumeId!} up: ${messageOf(error)}`,
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
          log(ctx, 'warn', `run ${run.id}: cannot ask the job for a snapshot: ${messageOf(error)}`);
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

  const sampleOnce = async (current: DiskPolicy): Promise<void> => {
    const result = await executor.exec(
      sampleScript(run.remoteDir, volumeId === null ? null : NETWORK_VOLUME_PATH),
      { signal, timeoutMs: 5 * 60_000, maxOutputBytes: 4096 },
    );
    const sample = result.code === 0 ? parseSample(result.stdout.toString('utf8')) : null;
    if (sample === null) {
      const why = result.stderr.toString('utf8').trim().slice(0, 200);
      log(ctx, 'debug', `run ${run.id}: no disk sample (${why || `exit ${result.code}`})`);
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
          `run ${run.id}: cannot look network volume ${volumeId} up: ${messageOf(error)}`,
        );
      }
    }
    for (const action of current.decide(sample, apiSizeGb)) await act(current, action);
  };

  while (!signal.aborted) {
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
          { sizeGb: volume.sizeGb, maxGb: pod.maxVolumeGb },
          ctx.timing.volumeGbBytes,
        );
        await handOver(volume.sizeGb);
      }
      if (policy !== null) await sampleOnce(policy);
    } catch (error) {
      if (isAbortError(error) || signal.aborted) return;
      log(ctx, 'debug', `run ${run.id}: the disk watch failed this time: ${messageOf(error)}`);
    }
    try {
      await ctx.clock.sleep(ctx.timing.diskPollMs, signal);
    } catch {
      return;
    }
  }
}
