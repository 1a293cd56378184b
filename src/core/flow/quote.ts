/**
 * The quote of a run on a Runpod target, built one way for every caller (`train --dry-run`,
 * VS Code's Train confirmation, the budget gate at train start): the GPU types in the order
 * they would be tried, with the live catalog's price and stock, the target's limits and graces,
 * and the durations of earlier runs of the target.
 */
import type { OverbrainerConfig, RunpodTargetConfig } from '../config/types';
import { mergeEstimateS } from '../train/mergeEstimate';
import type { GpuType } from '../runpod/api';
import { autoGpuTypes } from '../pod/gpuChoice';
import { heldByEarlierRuns, quote, type Quote } from '../pod/quote';
import type { RunpodClient } from '../runpod/client';
import type { RunStore } from '../runs/store';
import { watchdogSpans } from '../pod/worstCase';
import type { Timing } from '../timing';

/**
 * The quote of `target` at the catalog's rates; `historyS`: how long earlier runs held their
 * pod; `timing`: what the pod's watchdog will be given (its tick, lease and snapshot wait).
 */
export function quoteForTarget(
  target: RunpodTargetConfig,
  catalog: readonly GpuType[],
  historyS: readonly number[],
  timing: Timing,
  /** The cost cap to quote with instead of the target's (a budget's fitted cap). */
  maxCostUsd: number | null = target.maxCostUsd,
  /** Seconds of work after training ({@link afterTrainingS}). */
  afterS = 0,
): Quote {
  const order = target.gpuTypes === 'auto' ? autoGpuTypes(catalog, target) : target.gpuTypes;
  const byId = new Map(catalog.map((g) => [g.id, g]));
  return quote({
    candidates: order.map((id) => ({
      gpuType: id,
      pricePerHourUsd: byId.get(id)?.securePricePerHourUsd ?? null,
      availability: byId.get(id)?.availability ?? null,
    })),
    gpuCount: target.gpuCount,
    nodes: target.nodes,
    maxHours: target.maxHours,
    maxCostUsd,
    spans: watchdogSpans(timing, target),
    historyS,
    afterS,
  });
}

/**
 * The quote of `target` from the live catalog (its GPU types in stock for its GPU count on
 * Secure Cloud) and the durations of its earlier runs in `store`, with its own cost cap.
 */
export async function liveQuote(
  client: RunpodClient,
  store: RunStore,
  timing: Timing,
  target: RunpodTargetConfig,
  options: { signal?: AbortSignal; afterS?: number } = {},
): Promise<Quote> {
  const catalog = await client.listGpuTypes({
    count: target.gpuCount,
    cloud: 'SECURE',
    includeAvailability: true,
    signal: options.signal,
  });
  const historyS = heldByEarlierRuns(store, target.name);
  return quoteForTarget(target, catalog, historyS, timing, target.maxCostUsd, options.afterS);
}

/** Seconds of work the job does after training: the LoRA merge's estimate with `merge = true`. */
export function afterTrainingS(config: OverbrainerConfig): number {
  const training = config.training;
  if (!training?.merge || training.trainer.kind !== 'axolotl') return 0;
  return mergeEstimateS(training.trainer.model?.baseModel ?? null);
}

/** The quote in lines (the CLI's dry run, the Train confirmation) and the history it rests on. */
export { heldByEarlierRuns, quoteLines, type Quote } from '../pod/quote';
