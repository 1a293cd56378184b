/**
 * `gpu_types = "auto"`: the VRAM a job needs per GPU, from `[training]`'s base model and adapter
 * (src/core/train/vram.ts), and the target a train gets with it as its `min_vram_gb`.
 */
import assert from 'node:assert/strict';
import { ok, pod } from '../helpers/configFixture';
import { chooseTarget } from '../../src/core/flow/deps';
import { vramNeededGb } from '../../src/core/train/vram';

describe('gpu_types = "auto": the VRAM the base model and adapter need', () => {
  it('gives ⌈B × bytes × 1.2 + 4⌉ GB per GPU: lora 2 bytes, qlora 0.5, full 16 shared by the GPUs', () => {
    assert.equal(vramNeededGb('meta-llama/Llama-3.1-8B', 'lora'), 24);
    assert.equal(vramNeededGb('meta-llama/Llama-3.1-8B', 'qlora'), 9);
    assert.equal(vramNeededGb('Qwen/Qwen2.5-0.5B-Instruct', 'lora'), 6);
    assert.equal(vramNeededGb('meta-llama/Llama-3.1-8B', 'full'), 158);
    assert.equal(vramNeededGb('meta-llama/Llama-3.1-8B', 'full', 2), 81);
    assert.equal(
      vramNeededGb('meta-llama/Llama-3.1-8B', 'lora', 2),
      24,
      'each GPU holds the model',
    );
    assert.equal(vramNeededGb('some/model', 'lora'), null);
    assert.equal(vramNeededGb('mistralai/Mixtral-8x7B-v0.1', 'qlora'), 38);
    assert.equal(vramNeededGb('HuggingFaceTB/SmolLM-135M', 'full'), 7);
  });

  const toml = (gpuTypes: string, extra = ''): string => `[training]
trainer = "axolotl"
base_model = "meta-llama/Llama-3.1-8B"
adapter = "qlora"

[targets.pod]
kind = "runpod"
gpu_types = ${gpuTypes}
max_hours = 6
${extra}`;

  it("a train's target gets the estimate as min_vram_gb, only with auto and no min_vram_gb of its own", () => {
    const auto = chooseTarget(ok(toml('"auto"')), undefined).target;
    assert.ok(auto?.kind === 'runpod');
    assert.equal(auto.minVramGb, 9);
    const own = chooseTarget(ok(toml('"auto"', 'min_vram_gb = 48')), undefined).target;
    assert.ok(own?.kind === 'runpod');
    assert.equal(own.minVramGb, 48);
    const listed = ok(toml('["NVIDIA A40"]'));
    assert.equal((chooseTarget(listed, undefined).target as typeof auto).minVramGb, null);
    assert.equal(pod(ok(toml('"auto"'))).minVramGb, null, 'the config itself is left as written');
  });
});
