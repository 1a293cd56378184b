/**
 * The job's secrets (issue 36 part 2): the Hugging Face token (OVERBRAINER_HF_TOKEN → HF_TOKEN)
 * and a `[training] secrets` name reach the job's environment on a pod of the emulator over the
 * SSH channel, and never a file or a process argument: not run.json, pod.json or any file under
 * runs/ (the copied job.log included), not the run directory on the pod (the uploaded tree and
 * the job's own log, which is redacted on the pod), not an event on the bus, not a process's
 * command line (sampled every 50 ms over the whole run: the client, ssh, the pod's sshd and
 * the job). The job proves it had the values by printing their SHA-256.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FlowError, train } from '../../src/core/flow';
import { filesUnder, Lab } from '../helpers/lifecycle';

const HF = 'hf_itSecretToken_7f3a9c1e55d0';
const WANDB = 'wandb_itSecret_b81c44e0a9f2';
const sha = (value: string): string => createHash('sha256').update(`${value}\n`).digest('hex');

/** Every process's command line now. */
function cmdlines(): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      out.push(fs.readFileSync(`/proc/${entry}/cmdline`).toString('latin1').replace(/\0/g, ' '));
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

/** Where a needle occurs among `files`. */
function leaks(files: Map<string, Buffer>, needles: string[]): string[] {
  const found: string[] = [];
  for (const [rel, data] of files) {
    const text = data.toString('latin1');
    for (const needle of needles) if (text.includes(needle)) found.push(rel);
  }
  return found;
}

/** The job prints the values' hashes, then says them aloud (its log redacts them on the pod). */
const OPTIONS = {
  command:
    'echo "hf $(printf "%s\\n" "$HF_TOKEN" | sha256sum)"; echo "wandb $(printf "%s\\n" "$WANDB_API_KEY" | sha256sum)"; echo "said aloud: $HF_TOKEN and $WANDB_API_KEY"; python3 train.py --steps 15 --step-seconds 0.05',
  trainingExtra: 'secrets = ["WANDB_API_KEY"]\n',
};

describe('the job secrets: in the job, never in a file or argument', function () {
  this.timeout(180_000);
  let lab: Lab | null = null;
  afterEach(async () => {
    await lab?.close();
    lab = null;
  });

  async function labWith(): Promise<{ lab: Lab; config: Parameters<typeof train>[1] }> {
    const started = await Lab.start(OPTIONS);
    lab = started;
    return { lab: started, config: started.config };
  }

  it('a missing secret stops the run before anything is created, naming it and its fix', async () => {
    const { lab: l, config } = await labWith();
    const error = await train({ ...l.deps, env: { OVERBRAINER_HF_TOKEN: HF } }, config, l.workspace)
      .then(() => assert.fail('the run started'))
      .catch((caught: unknown) => caught);
    assert.ok(error instanceof FlowError, String(error));
    assert.match(error.message, /\[training\] secrets names WANDB_API_KEY, which is not set/);
    assert.match(error.hint ?? '', /Set WANDB_API_KEY .*Set Job Secret/);
    assert.ok(!fs.existsSync(path.join(l.workspace, 'runs')), 'a run directory was made');
    assert.deepEqual(l.emulator.ledger().pods, []);
  });

  it('reaches the job as HF_TOKEN and WANDB_API_KEY; no file, argument or event holds a value', async () => {
    const { lab: l, config } = await labWith();
    const needles = [HF, WANDB];
    const argHits: string[] = [];
    let samples = 0;
    const sampler = setInterval(() => {
      samples++;
      for (const line of cmdlines())
        for (const needle of needles) if (line.includes(needle)) argHits.push(line.slice(0, 80));
    }, 50);
    let runId: string | null = null;
    const onPod = l.capturePodFilesOnDelete(() => runId, '');
    let result;
    try {
      result = await l.track(
        train(
          { ...l.deps, env: { OVERBRAINER_HF_TOKEN: HF, WANDB_API_KEY: WANDB } },
          config,
          l.workspace,
          { onRun: (r) => (runId = r.id) },
        ),
      );
    } finally {
      clearInterval(sampler);
    }
    const runDir = l.runDir(runId!);
    const log = fs.readFileSync(path.join(runDir, 'job.log'), 'utf8');
    assert.equal(result.run.state, 'succeeded', `${result.summary}\n${log}`);
    // The job had both values (their hashes), and what it printed of them was redacted.
    assert.match(log, new RegExp(`^hf ${sha(HF)}`, 'm'));
    assert.match(log, new RegExp(`^wandb ${sha(WANDB)}`, 'm'));
    assert.match(log, /^said aloud: \[redacted\] and \[redacted\]$/m);
    // No file under the workspace: run.json, pod.json, the copied job.log, metrics, ssh/, .pod/.
    assert.deepEqual(leaks(filesUnder(l.workspace), needles), []);
    assert.ok(
      fs.existsSync(path.join(runDir, 'run.json')) && fs.existsSync(path.join(runDir, 'pod.json')),
    );
    // Nor the run directory on the pod (the uploaded tree, the job's log there), as the pod
    // held it when the client deleted it.
    assert.equal(onPod.size, 1);
    for (const files of onPod.values()) {
      assert.ok(files.has('job.log') && files.has('train.py'), [...files.keys()].join(' '));
      assert.deepEqual(leaks(files, needles), []);
    }
    // No event, no process argument.
    const events = JSON.stringify(l.events);
    for (const needle of needles) assert.ok(!events.includes(needle), 'an event holds a secret');
    assert.ok(samples > 10, `only ${samples} samples of the process table`);
    assert.deepEqual(argHits, []);
  });
});
