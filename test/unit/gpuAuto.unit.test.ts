/**
 * `gpu_types = "auto"`: the order the types are tried in (in stock in the allowed data centers,
 * within min_vram_gb and max_price_per_hour, cheapest first; ties: more VRAM, then the ID). The
 * catalog read again at each walk: test/integration/gpuAuto.integration.test.ts.
 */
import assert from 'node:assert/strict';
import type { RunpodTargetConfig } from '../../src/core/config/types';
import { autoGpuTypes } from '../../src/core/pod/gpuChoice';
import type { GpuType } from '../../src/core/runpod/catalog';

function gpu(
  id: string,
  priceUsd: number,
  memoryInGb: number,
  stock: Record<string, 'NONE' | 'LOW' | 'MEDIUM' | 'HIGH'>,
  secure = true,
): GpuType {
  const dcs = Object.entries(stock).map(([dc, availability]) => ({
    id: dc,
    name: dc,
    availability,
  }));
  const levels = ['NONE', 'LOW', 'MEDIUM', 'HIGH'];
  const best = dcs.reduce((a, d) => Math.max(a, levels.indexOf(d.availability)), 0);
  return {
    id,
    displayName: id,
    manufacturer: 'NVIDIA',
    memoryInGb,
    secureCloud: secure,
    communityCloud: true,
    securePricePerHourUsd: secure ? priceUsd : null,
    communityPricePerHourUsd: priceUsd / 2,
    maxCountSecure: 8,
    availability: levels[best]!,
    dataCenters: dcs,
    cudaVersions: [],
  };
}

function target(over: Partial<RunpodTargetConfig> = {}): RunpodTargetConfig {
  return {
    gpuTypes: 'auto',
    minVramGb: null,
    maxPricePerHourUsd: null,
    gpuCount: 1,
    dataCenterIds: [],
    ...over,
  } as RunpodTargetConfig;
}

const CATALOG: GpuType[] = [
  gpu('H100', 2.99, 80, { 'EU-RO-1': 'NONE', 'US-KS-2': 'NONE' }),
  gpu('A100', 1.64, 80, { 'US-KS-2': 'LOW' }),
  gpu('4090', 0.69, 24, { 'EU-RO-1': 'HIGH', 'US-TX-3': 'MEDIUM' }),
  gpu('A5000', 0.27, 24, { 'US-TX-3': 'HIGH', 'US-KS-2': 'LOW' }),
  gpu('L4', 0.27, 24, { 'US-TX-3': 'LOW' }),
  gpu('A6000', 0.27, 48, { 'EU-RO-1': 'LOW' }),
  gpu('T4-community', 0.1, 16, { 'US-TX-3': 'HIGH' }, false),
];

describe('gpu_types = "auto": which types, in which order', () => {
  it('in stock anywhere, cheapest first; ties: more VRAM, then the ID; out of stock and community-only left out', () => {
    assert.deepEqual(autoGpuTypes(CATALOG, target()), ['A6000', 'A5000', 'L4', '4090', 'A100']);
  });

  it('with data_center_ids: only types in stock in one of them, in the same order', () => {
    assert.deepEqual(autoGpuTypes(CATALOG, target({ dataCenterIds: ['EU-RO-1'] })), [
      'A6000',
      '4090',
    ]);
    assert.deepEqual(autoGpuTypes(CATALOG, target({ dataCenterIds: ['US-KS-2'] })), [
      'A5000',
      'A100',
    ]);
    // "auto" data centers: any.
    assert.equal(autoGpuTypes(CATALOG, target({ dataCenterIds: 'auto' })).length, 5);
  });

  it('min_vram_gb and max_price_per_hour bound the list', () => {
    assert.deepEqual(autoGpuTypes(CATALOG, target({ minVramGb: 40 })), ['A6000', 'A100']);
    assert.deepEqual(autoGpuTypes(CATALOG, target({ maxPricePerHourUsd: 0.5 })), [
      'A6000',
      'A5000',
      'L4',
    ]);
  });
});
