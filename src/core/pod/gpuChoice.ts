/**
 * Which GPU types a run's pod is created on, in order: the configured list, or with
 * `gpu_types = "auto"` the in-stock Secure-cloud types within the target's limits, cheapest first.
 */
import type { RunpodTargetConfig } from '../config/types';
import { inStock, type GpuType } from '../runpod/api';
import type { PodCtx } from './context';
import { PodError } from './podError';

/** The GPU types to try, in order: the configured list, or `"auto"` from the catalog. */
export async function resolveGpuTypes(
  ctx: PodCtx,
  target: RunpodTargetConfig,
  signal?: AbortSignal,
): Promise<string[]> {
  if (target.gpuTypes !== 'auto') return [...target.gpuTypes];
  const catalog = await ctx.client.listGpuTypes({
    count: target.gpuCount,
    cloud: 'SECURE',
    includeAvailability: true,
    signal,
  });
  const chosen = autoGpuTypes(catalog, target);
  if (chosen.length === 0) {
    const limits = [
      target.minVramGb !== null ? `at least ${target.minVramGb} GB of VRAM` : null,
      target.maxPricePerHourUsd !== null ? `at most $${target.maxPricePerHourUsd}/h` : null,
      target.dataCenterIds !== 'auto' && target.dataCenterIds.length > 0
        ? `in ${target.dataCenterIds.join(', ')}`
        : null,
    ].filter((part) => part !== null);
    throw new PodError(
      'not_in_stock',
      `no Secure-cloud GPU type is in stock for ${target.gpuCount} GPU${target.gpuCount === 1 ? '' : 's'}${limits.length > 0 ? ` with ${limits.join(', ')}` : ''}: no pod was created`,
      'Relax min_vram_gb or max_price_per_hour, or try again later.',
    );
  }
  return chosen;
}

/** `"auto"`: in-stock Secure types within the limits, cheapest first (ties: more VRAM, then ID). */
export function autoGpuTypes(catalog: readonly GpuType[], target: RunpodTargetConfig): string[] {
  const dcs = target.dataCenterIds === 'auto' ? [] : target.dataCenterIds;
  return catalog
    .filter((gpu) => gpu.secureCloud && gpu.securePricePerHourUsd !== null)
    .filter((gpu) => target.minVramGb === null || gpu.memoryInGb >= target.minVramGb)
    .filter(
      (gpu) =>
        target.maxPricePerHourUsd === null ||
        (gpu.securePricePerHourUsd ?? Infinity) <= target.maxPricePerHourUsd,
    )
    .filter((gpu) =>
      dcs.length === 0
        ? inStock(gpu.availability) || gpu.dataCenters.some((dc) => inStock(dc.availability))
        : gpu.dataCenters.some((dc) => dcs.includes(dc.id) && inStock(dc.availability)),
    )
    .sort(
      (a, b) =>
        (a.securePricePerHourUsd ?? 0) - (b.securePricePerHourUsd ?? 0) ||
        b.memoryInGb - a.memoryInGb ||
        (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    )
    .map((gpu) => gpu.id);
}
