/**
 * A trial's config for the axolotl trainer with a config generated from `[training]`'s model
 * keys: its params deep-merged at their (dotted) keys of the generated axolotl.yaml, over the
 * model keys; a dotted name under a list of the generated config is refused as a config error
 * naming the parameter and what to do.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { FlowError, generatedAxolotlConfig } from '../../src/core/flow';
import { trialConfig } from '../../src/core/flow/sweepTrial';
import type { RunStore } from '../../src/core/flow';
import { axolotlToml, ok } from '../helpers/configFixture';

describe('sweep trial config: a generated Axolotl config', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-trial-config-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const deps = { store: { runsDir: path.join(dir, 'runs') } as RunStore };
  const sweep = { name: 's', number: 0, python: null };

  it('sets the params at their keys of the generated YAML, over the model keys', async () => {
    const config = ok(axolotlToml());
    const own = await trialConfig(deps, config, dir, sweep, {
      lora_r: 32,
      learning_rate: 0.0002,
      'special_tokens.pad_token': '<pad>',
    });
    const yaml = generatedAxolotlConfig(own, dir) ?? '';
    assert.match(yaml, /^lora_r: 32$/m);
    assert.match(yaml, /^learning_rate: 0\.0002$/m);
    assert.match(yaml, /^special_tokens:\n {2}pad_token: "?<pad>"?$/m);
    assert.match(yaml, /^base_model: Qwen\/Qwen2\.5-7B-Instruct$/m);
    assert.doesNotMatch(generatedAxolotlConfig(config, dir) ?? '', /^lora_r: 32$/m);
  });

  it('refuses a dotted name under a list of the generated config, naming it', async () => {
    await assert.rejects(
      trialConfig(deps, ok(axolotlToml()), dir, sweep, { 'datasets.path': 'x' }),
      (error: unknown) =>
        error instanceof FlowError &&
        error.kind === 'bad_config' &&
        /sweep\.params\.datasets\.path: datasets in axolotl\.yaml holds a list/.test(error.message),
    );
  });
});
