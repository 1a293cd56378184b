import * as assert from 'node:assert/strict';
import type { RunpodTargetConfig } from '../../src/core/config';
import type { GpuType } from '../../src/core/runpod/api';
import { rateText, trainConfirmation } from '../../src/ui/commands/trainConfirm';

function target(over: Partial<RunpodTargetConfig> = {}): RunpodTargetConfig {
  return {
    kind: 'runpod',
    name: 'pod',
    gpuTypes: ['NVIDIA GeForce RTX 4090', 'NVIDIA RTX A5000'],
    minVramGb: null,
    maxPricePerHourUsd: null,
    gpuCount: 1,
    nodes: 1,
    image: 'img',
    venv: '/venv',
    containerDiskGb: 50,
    maxHours: 6,
    maxCostUsd: null,
    maxRecoveries: 2,
    bootGraceS: 600,
    retrieveGraceS: 1800,
    maxRetrieveGb: 200,
    dataCenterIds: [],
    networkVolumeId: null,
    maxVolumeGb: null,
    sshClient: 'openssh',
    ...over,
  };
}

function gpu(id: string, price: number | null): GpuType {
  return {
    id,
    displayName: id,
    manufacturer: 'Nvidia',
    memoryInGb: 24,
    secureCloud: true,
    communityCloud: false,
    securePricePerHourUsd: price,
    communityPricePerHourUsd: null,
    maxCountSecure: 8,
    availability: null,
    dataCenters: [],
    cudaVersions: [],
  };
}

describe("Train's confirmation (model)", function () {
  const catalog = [gpu('NVIDIA GeForce RTX 4090', 0.69), gpu('NVIDIA RTX A5000', null)];

  it('shows the generated Axolotl config and the merge, its time and cost in the quote', function () {
    const now = Date.UTC(2026, 11, 2, 12, 0, 0);
    const plan = {
      lines: [
        'Axolotl config generated from [training] (uploaded as axolotl.yaml):',
        '  base_model: Qwen/Qwen2.5-7B',
        "After training: Axolotl's LoRA merge into output/merged/ (about 5 min), retrieved and verified with the rest",
      ],
      afterS: 280,
    };
    const c = trainConfirmation('pod', target(), catalog, now, [], undefined, plan);
    assert.match(
      c.detail,
      /\n\nAxolotl config generated from \[training\].*\n {2}base_model: Qwen\/Qwen2\.5-7B\n/,
    );
    assert.match(c.detail, /^Merge: about 5 min after training, about \$0\.06 at the first rate/m);
    assert.doesNotMatch(
      trainConfirmation('pod', target(), catalog, now).detail,
      /Merge:|Axolotl config/,
    );
  });

  it('shows GPU types, the hourly rate per type, max_hours and the deadline', function () {
    const now = Date.UTC(2026, 11, 2, 12, 0, 0);
    const c = trainConfirmation('pod', target(), catalog, now);
    assert.equal(c.message, 'Train on "pod"?');
    assert.match(c.detail, /^GPU types: NVIDIA GeForce RTX 4090, NVIDIA RTX A5000$/m);
    assert.match(
      c.detail,
      /^Hourly rate: \$0\.69\/h on NVIDIA GeForce RTX 4090, then price n\/a on NVIDIA RTX A5000$/m,
    );
    assert.match(c.detail, /^max_hours: 6$/m);
    const deadline = new Date(now + 6 * 3_600_000).toLocaleString();
    assert.ok(c.detail.includes(`Deadline: ${deadline}`), c.detail);
    assert.doesNotMatch(c.detail, /max_cost_usd/);
    assert.match(
      trainConfirmation('pod', target({ maxCostUsd: 5 }), catalog, now).detail,
      /max_cost_usd: \$5\.00/,
    );
  });

  it('multiplies by gpu_count, and says when the rate is unknown or chosen at start', function () {
    assert.equal(
      rateText(target({ gpuTypes: ['NVIDIA GeForce RTX 4090'], gpuCount: 2 }), catalog),
      '$1.38/h on NVIDIA GeForce RTX 4090 (2 GPUs)',
    );
    assert.match(rateText(target(), null), /^unknown \(the Runpod catalog could not be read\)$/);
    assert.equal(
      rateText(target({ gpuTypes: 'auto', maxPricePerHourUsd: 1.5 }), catalog),
      'the cheapest GPU type in stock when the run starts, at most $1.50/h',
    );
  });

  it('shows the quote: expected cost (up to max_hours, or from earlier runs) and the worst case', function () {
    const now = Date.UTC(2026, 11, 2, 12, 0, 0);
    const fresh = trainConfirmation('pod', target(), catalog, now).detail;
    assert.match(
      fresh,
      /^Expected: up to \$4\.14 \(no earlier run of this config: up to max_hours\)$/m,
    );
    // 6 h + 10 min + 30 min at $0.69/h (the A5000 has no price).
    assert.match(
      fresh,
      /^Worst case: \$4\.53 \(if every client dies: what the pod's watchdog allows, deadline snapshot and graces included\)$/m,
    );
    assert.match(
      trainConfirmation('pod', target(), catalog, now, [1800, 3600]).detail,
      /^Expected: \$0\.28–\$0\.83 \(from 2 earlier runs of this config\)$/m,
    );
    assert.doesNotMatch(trainConfirmation('pod', target(), null, now).detail, /Expected|Worst/);
  });
});
