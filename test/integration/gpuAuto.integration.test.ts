/**
 * `gpu_types = "auto"` (issue 36 part 4) against the emulator's live catalog: each provisioning
 * walk reads the catalog again, so a type that ran out of stock since the last walk is not even
 * tried (no create is sent for it), and the next cheapest type in stock is.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadConfig } from '../../src/core/config';
import { train } from '../../src/core/flow';
import { GPU, Lab } from '../helpers/lifecycle';

describe('gpu_types = "auto": the catalog read at each walk', function () {
  this.timeout(240_000);
  let lab: Lab | null = null;
  afterEach(async () => {
    await lab?.close();
    lab = null;
  });

  it('a type out of stock since the last walk is not tried; the next cheapest in stock is', async () => {
    const l = await Lab.start({ steps: 3, stepSeconds: 0.05 });
    lab = l;
    const toml = path.join(l.workspace, 'overbrainer.toml');
    fs.writeFileSync(
      toml,
      fs.readFileSync(toml, 'utf8').replace(/^gpu_types = .*$/m, 'gpu_types = "auto"'),
    );
    const loaded = loadConfig(l.workspace, {});
    assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.errors));
    const walk = async (): Promise<{ gpuType: unknown; tried: unknown[] }> => {
      let runId: string | null = null;
      const result = await l.track(
        train(l.deps, loaded.config, l.workspace, { onRun: (r) => (runId = r.id) }),
      );
      assert.equal(result.run.state, 'succeeded', result.summary);
      const pod = l.podJson(runId!);
      const attempts = pod.attempts as { gpu_type: string }[];
      return { gpuType: pod.gpu_type, tried: attempts.map((a) => a.gpu_type) };
    };
    // The emulator's cheapest Secure type in stock on machines with the image's CUDA: the 4090
    // ($0.69/h; the A5000's machines have an older CUDA, so it is never in stock for it), then
    // the A100 ($1.64/h).
    assert.deepEqual(await walk(), { gpuType: GPU.rtx4090, tried: [GPU.rtx4090] });
    await l.emulator.faults.setStock(GPU.rtx4090, 0);
    assert.deepEqual(await walk(), { gpuType: GPU.a100, tried: [GPU.a100] });
    // Back in stock: the next walk sees it again.
    await l.emulator.faults.setStock(GPU.rtx4090, 4);
    assert.deepEqual(await walk(), { gpuType: GPU.rtx4090, tried: [GPU.rtx4090] });
  });
});
