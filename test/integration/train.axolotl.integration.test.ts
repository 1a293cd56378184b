/**
 * A run of the Axolotl config generated from `[training]`'s model keys, with `merge = true`, on a
 * pod of the emulator: the generated `axolotl.yaml` is what the pod trains on, Axolotl's LoRA
 * merge runs after training into `output/merged/`, and the merged model comes home verified with
 * the rest. The pods have no GPU and no Axolotl: the image ships a stand-in `bin/axolotl` that
 * checks the config it is given, runs examples/tiny's trainer for `train`, and writes
 * `output/merged/` for `merge-lora`.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadConfig } from '../../src/core/config';
import { train } from '../../src/core/flow';
import { runCliProcess } from '../helpers/cli';
import { Lab } from '../helpers/lifecycle';
import { emulatorEnv, runpodTarget } from '../helpers/tinyWorkspace';

/** The image's stand-in for Axolotl, at /workspace/fake-axolotl/bin/axolotl. */
const FAKE_AXOLOTL = `#!/bin/sh
set -eu
echo "fake axolotl: $*"
case "$1" in
  train)
    grep -q '^base_model: tiny/linear-1B$' "$2" || { echo "not the generated config" >&2; exit 7; }
    grep -q '^  - overbrainer_metrics.OverbrainerMetricsPlugin$' "$2" || exit 8
    test -s data/train.jsonl || exit 9
    python3 train.py --steps 12 --step-seconds 0.02
    ;;
  merge-lora)
    test -e output/model.json || exit 10
    mkdir -p output/merged
    cp output/model.json output/merged/model.json
    printf '%s\\n' "$OVERBRAINER_AFTER_S" > output/merged/after_s
    ;;
  *) exit 2 ;;
esac
`;

/** An overbrainer.toml as the overbrainer CLI's users write it: model keys and merge. */
function toml(targetExtra: string): string {
  return `[project]
name = "tiny"

[training]
target = "pod"
trainer = "axolotl"
base_model = "tiny/linear-1B"
epochs = 1
merge = true
upload = ["train.py", "data"]

${runpodTarget('pod', { targetExtra })}`;
}

describe('train: the generated Axolotl config, and merge = true', function () {
  this.timeout(120_000);
  let lab: Lab | null = null;
  afterEach(async () => {
    await lab?.close();
    lab = null;
  });

  it('train --dry-run prints the generated config in full, the merge and its cost', async () => {
    lab = await Lab.start();
    const ws = lab.workspace;
    fs.writeFileSync(path.join(ws, 'data', 'train.jsonl'), '{"messages":[]}\n');
    fs.writeFileSync(path.join(ws, 'overbrainer.toml'), toml(''));
    const ran = await runCliProcess(['-C', ws, 'train', '--dry-run'], {
      env: emulatorEnv(lab.emulator),
    });
    assert.equal(ran.code, 0, ran.stderr);
    const lines = ran.stdout.trimEnd().split('\n');
    const start = lines.indexOf(
      'Axolotl config generated from [training] (uploaded as axolotl.yaml):',
    );
    assert.ok(start > 0, ran.stdout);
    assert.ok(lines.includes('  base_model: tiny/linear-1B'), ran.stdout);
    assert.ok(lines.includes('  num_epochs: 1'), ran.stdout);
    assert.ok(
      lines.some((l) =>
        /^After training: Axolotl's LoRA merge into output\/merged\/ \(about 2 min\)/.test(l),
      ),
      ran.stdout,
    );
    // $0.69/h for the 120 s of the merge: $0.023, up to the cent.
    assert.ok(
      lines.some((l) =>
        /^Merge: about 2 min after training, about \$0\.03 at the first rate/.test(l),
      ),
      ran.stdout,
    );
    assert.ok(!fs.existsSync(path.join(ws, 'runs')), 'a run directory was created');
  });

  it('trains on the generated config, merges into output/merged/ and brings it home verified', async () => {
    lab = await Lab.start({
      emulator: { imageFiles: { 'fake-axolotl/bin/axolotl': FAKE_AXOLOTL } },
    });
    const ws = lab.workspace;
    fs.writeFileSync(path.join(ws, 'data', 'train.jsonl'), '{"messages":[]}\n');
    fs.writeFileSync(path.join(ws, 'overbrainer.toml'), toml('venv = "/workspace/fake-axolotl"\n'));
    const loaded = loadConfig(ws, {});
    assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.errors));
    let runId = '';
    const result = await lab.track(
      train(lab.deps, loaded.config, ws, { onRun: (r) => (runId = r.id) }),
    );
    const runDir = lab.runDir(runId);
    const log = fs.readFileSync(path.join(runDir, 'job.log'), 'utf8');
    assert.equal(result.run.state, 'succeeded', `${result.summary}\n${log}`);
    assert.match(log, /fake axolotl: train axolotl\.yaml/);
    assert.match(log, /fake axolotl: merge-lora axolotl\.yaml/);
    // The merged model came home with the adapter, byte for byte (the run's retrieval verified
    // every file against the pod's SHA-256 manifest before the pod was deleted).
    assert.deepEqual(
      fs.readFileSync(path.join(runDir, 'output', 'merged', 'model.json')),
      fs.readFileSync(path.join(runDir, 'output', 'model.json')),
    );
    // The merge's estimate reached the job (the metrics plugin adds it to the ETA): 1 B → 2 min.
    assert.equal(
      fs.readFileSync(path.join(runDir, 'output', 'merged', 'after_s'), 'utf8'),
      '120\n',
    );
    assert.match(
      fs.readFileSync(path.join(runDir, 'metrics.jsonl'), 'utf8'),
      /\{"event":"stage","time":\d+,"stage":"merge"\}/,
    );
    lab.assertDeletedAfterRetrieval(String(lab.podJson(runId).pod_id));
  });
});
