/**
 * A trial's params as environment variables and as keys of its axolotl.yaml, on emulated pods
 * with the real Optuna: a command with no placeholder gets OVERBRAINER_PARAM_* (a dotted name's
 * dot written `__`, a string quoted as it is); the axolotl trainer's own YAML gets the trial's
 * values at their dotted keys, its other keys kept (the image's stand-in `bin/axolotl` trains
 * examples/sweep on what the YAML says); a parameter under a list of that YAML is refused before
 * any pod, naming it and what to do.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadConfig } from '../../src/core/config';
import { sweep, FlowError } from '../../src/core/flow';
import { ROOT } from '../helpers/cli';
import { Lab } from '../helpers/lifecycle';
import { runpodTarget } from '../helpers/tinyWorkspace';
import { assertTrialResult, PYTHON, sweepJson, sweepLabPerTest } from '../helpers/sweepLab';

const SWEEP = (params: string): string => `max_cost_usd = 0.5

[sweep]
name = "lr-rank"
metric = "eval_loss"
direction = "minimize"
trials = 2
parallel = 2
budget_usd = 5
sampler = "random"
sampler_seed = 5
pruner = "none"

[sweep.params]
${params}
`;

/** The image's stand-in for Axolotl: trains examples/sweep on the YAML's learning_rate and lora.r. */
const FAKE_AXOLOTL = `#!/bin/sh
set -eu
test "$1" = train || exit 2
mkdir -p output
cp "$2" output/used.yaml
lr=$(sed -n 's/^learning_rate: //p' "$2")
r=$(sed -n 's/^  r: //p' "$2")
env | grep '^OVERBRAINER_PARAM_' | sort > output/param_env.txt || true
python3 train.py --steps 10 --step-seconds 0.05 --eval-every 5 --learning-rate "$lr" --lora-r "$r"
`;

const MY_YAML = `# the user's own config
base_model: tiny/linear-1B
lora:
  r: 4
  alpha: 8
datasets:
  - path: data/train.jsonl
    type: chat_template
`;

describe('sweep params as environment variables and axolotl.yaml keys, on emulated pods', function () {
  this.timeout(300_000);
  const labs = sweepLabPerTest();

  it('a command without placeholders gets each param as OVERBRAINER_PARAM_<NAME>', async () => {
    const lab = labs.use(
      await Lab.start({
        command:
          "env | grep '^OVERBRAINER_PARAM_' | sort > param_env.txt && mkdir -p output && mv param_env.txt output/ && python3 train.py --steps 10 --step-seconds 0.05 --eval-every 5",
        targetExtra: SWEEP(
          'learning_rate = { low = 1e-5, high = 1e-2, log = true }\nlora_r = [8, 16]\nopt.tag = ["it\'s a b"]',
        ),
      }),
    );
    fs.copyFileSync(
      path.join(ROOT, 'examples', 'sweep', 'train.py'),
      path.join(lab.workspace, 'train.py'),
    );
    const result = await lab.track(sweep(lab.deps, lab.config, lab.workspace, { python: PYTHON }));
    assert.equal(result.record.end, 'trials', lab.transcript());
    for (const t of result.record.trials) {
      assert.equal(t.state, 'complete', JSON.stringify(t));
      const out = path.join(lab.runDir(t.run_id!), 'output');
      assert.equal(
        fs.readFileSync(path.join(out, 'param_env.txt'), 'utf8'),
        [
          `OVERBRAINER_PARAM_LEARNING_RATE=${String(t.params.learning_rate)}`,
          `OVERBRAINER_PARAM_LORA_R=${String(t.params.lora_r)}`,
          "OVERBRAINER_PARAM_OPT__TAG=it's a b",
          '',
        ].join('\n'),
      );
      // The job read them from its environment (no placeholder, the same values as params.json).
      assertTrialResult(lab, t);
    }
  });

  it("the axolotl trainer's own YAML gets the trial's values at dotted keys; a key under a list is refused before any pod", async () => {
    const lab = labs.use(
      await Lab.start({
        emulator: { imageFiles: { 'fake-axolotl/bin/axolotl': FAKE_AXOLOTL } },
      }),
    );
    const ws = lab.workspace;
    fs.copyFileSync(path.join(ROOT, 'examples', 'sweep', 'train.py'), path.join(ws, 'train.py'));
    fs.writeFileSync(path.join(ws, 'my.yaml'), MY_YAML);
    const toml = (params: string): string => `[project]
name = "tiny"

[training]
target = "pod"
trainer = "axolotl"
config = "my.yaml"
upload = ["train.py", "data"]

${runpodTarget('pod', { targetExtra: `venv = "/workspace/fake-axolotl"\n${SWEEP(params)}` })}`;
    const configOf = (params: string) => {
      fs.writeFileSync(path.join(ws, 'overbrainer.toml'), toml(params));
      const loaded = loadConfig(ws, {});
      assert.ok(loaded.ok, JSON.stringify(loaded));
      return loaded.config;
    };
    const bad = configOf('learning_rate = [0.001]\ndatasets.path = ["x"]');
    await assert.rejects(
      sweep(lab.deps, bad, ws, { python: PYTHON }),
      (error: unknown) =>
        error instanceof FlowError &&
        error.kind === 'bad_config' &&
        /my\.yaml: datasets\.path: datasets holds a list, not a mapping/.test(error.message) &&
        /Rename the parameter/.test(error.hint),
    );
    assert.deepEqual(lab.emulator.ledger().pods, [], 'no pod for a refused sweep');
    const config = configOf(
      'learning_rate = { low = 1e-4, high = 1e-2, log = true }\nlora.r = [8, 32]',
    );
    const result = await lab.track(sweep(lab.deps, config, ws, { python: PYTHON }));
    assert.equal(result.record.end, 'trials', lab.transcript());
    for (const t of sweepJson(lab).trials) {
      assert.equal(t.state, 'complete', JSON.stringify(t));
      const out = path.join(lab.runDir(t.run_id!), 'output');
      const used = fs.readFileSync(path.join(out, 'used.yaml'), 'utf8');
      assert.match(used, /^base_model: tiny\/linear-1B$/m);
      assert.match(
        used,
        new RegExp(`^lora:\\n  r: ${String(t.params['lora.r'])}\\n  alpha: 8$`, 'm'),
      );
      assert.match(used, /^datasets:\n- path: data\/train\.jsonl\n {2}type: chat_template$/m);
      assert.match(used, new RegExp(`^learning_rate: ${String(t.params.learning_rate)}$`, 'm'));
      assertTrialResult(lab, t, { rank: 'lora.r' });
      assert.match(
        fs.readFileSync(path.join(out, 'param_env.txt'), 'utf8'),
        new RegExp(`^OVERBRAINER_PARAM_LORA__R=${String(t.params['lora.r'])}$`, 'm'),
      );
    }
  });
});
