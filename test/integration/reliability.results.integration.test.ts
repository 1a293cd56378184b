/**
 * Results a hostile job leaves on a real emulated pod (issue 34, items 3 and 4): names Windows
 * reads differently (`..\..\escape.txt`, a drive letter, a device name) and a sparse file far
 * larger than the run's `max_retrieve_gb`. Each case: the retrieval refuses before anything of it
 * is downloaded, with a clear reason naming the file or the size and the next action; the run
 * record says why; nothing lands outside the run folder and nothing partial inside it; the pod
 * keeps the only copy for its retrieve grace (`awaiting_retrieval`), as for any result not home.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { train } from '../../src/core/flow';
import { Lab, type LabOptions } from '../helpers/lifecycle';
import { recordFault, recordLedger, recordResult } from '../helpers/reliability';

/** Every path under `dir` (folders with a trailing /), for a before/after comparison. */
function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const entry of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const child = rel === '' ? entry.name : `${rel}/${entry.name}`;
      out.push(entry.isDirectory() ? `${child}/` : child);
      if (entry.isDirectory()) walk(child);
    }
  };
  if (fs.existsSync(dir)) walk('');
  return out.sort();
}

/** The files under `dir` (relative paths). */
function filesIn(dir: string): string[] {
  return tree(dir).filter((p) => !p.endsWith('/'));
}

/**
 * A case on a lab whose job is `sh data/<name>` (`script`, written in its workspace): `run`
 * trains and checks, its figures and the emulator's ledger are recorded, the lab closed.
 */
async function scriptCase(
  test: Mocha.Context,
  name: string,
  script: string,
  options: LabOptions,
  run: (lab: Lab) => Promise<{ verified: number; lost: number }>,
): Promise<void> {
  const lab = await Lab.start({ command: `sh data/${name}`, ...options });
  try {
    fs.writeFileSync(path.join(lab.workspace, 'data', name), script);
    const figures = await run(lab);
    recordLedger(test, lab.emulator.ledger());
    recordResult(test, figures);
  } finally {
    await lab.close();
  }
}

describe('reliability: hostile results on a real emulated pod', function () {
  this.timeout(200_000);

  it('names Windows reads differently (`..\\..\\escape.txt`, C:, NUL.txt): refused by name before any download, nothing outside the run folder, the pod kept for its retrieve grace', async function () {
    const script = String.raw`set -e
mkdir -p output
printf '{"event":"log","step":1,"loss":1,"time":%s}\n' "$(date +%s)" >>"$OVERBRAINER_METRICS"
echo model >output/model.txt
printf escaped >'output/..\..\..\..\escape.txt'
printf drive >'output/C:evil.txt'
printf device >output/NUL.txt
`;
    await scriptCase(this, 'names.sh', script, { retrieveGraceMinutes: 10 }, async (lab) => {
      const outside = tree(lab.tmp);
      let id: string | null = null;
      recordFault(this, 'input.results_unportable_names', 3);
      const result = await lab.track(
        train(lab.deps, lab.config, lab.workspace, { onRun: (run) => (id = run.id) }),
      );
      assert.ok(id !== null);
      const runDir = lab.runDir(id);
      // The run record says which file and why, and what to do.
      const message = String(result.run.message);
      assert.match(message, /artifacts not retrieved: refusing the pod's file list/, message);
      // The first hostile name the pod listed (its directory order), quoted, and why.
      const named = [
        /"\.\/output\/\.\.\\\\\.\.\\\\\.\.\\\\\.\.\\\\escape\.txt" holds a backslash, which Windows reads as a folder separator/,
        /"\.\/output\/C:evil\.txt" holds a colon, which Windows reads as a drive letter/,
        /"\.\/output\/NUL\.txt" is named NUL, a device name on Windows/,
      ];
      assert.ok(
        named.some((re) => re.test(message)),
        `names a hostile file and why: ${message}`,
      );
      assert.match(message, /Nothing was downloaded/, message);
      assert.match(message, /rename or remove that file on the pod/, message);
      assert.equal(result.run.state, 'running', 'stays running: attach retrieves again');
      assert.equal(
        String(lab.runJson(id).message),
        message,
        'run.json holds the same reason as the result',
      );
      // The pod keeps the only copy for its retrieve grace.
      assert.equal(result.ending, 'awaiting_retrieval', lab.transcript());
      const warning = lab.warnings().find((w) => w.code === 'awaiting_retrieval');
      assert.ok(warning, lab.transcript());
      const podId = String(lab.podJson(id).pod_id);
      assert.equal(lab.podJson(id).state, 'awaiting_retrieval');
      assert.equal(lab.ledgerOf(podId).billing, true, 'the pod keeps the only copy');
      // Nothing of the list came home (not even model.txt: the list is refused as a whole), no
      // staging left, and nothing outside runs/<id> changed.
      assert.equal(fs.existsSync(path.join(runDir, 'output')), false, 'no output/');
      assert.equal(fs.existsSync(path.join(runDir, '.retrieving')), false, 'no staging left');
      const after = tree(lab.tmp).filter(
        (p) => !p.startsWith(`ws/runs/${id}/`) && p !== 'ws/runs/' && p !== `ws/runs/${id}/`,
      );
      assert.deepEqual(after, outside, 'nothing written outside the run folder');
      assert.equal(
        after.some((p) => p.includes('escape')),
        false,
      );
      return { verified: 0, lost: 0 };
    });
  });

  it('a sparse file over max_retrieve_gb: refused before downloading, the run record says the size, the limit and what to do, the pod kept, nothing partial on disk', async function () {
    // 0.01 GB = 10 MB; the job's sparse file is 64 MiB (hashing it on the pod stays cheap).
    const script = String.raw`set -e
mkdir -p output
printf '{"event":"log","step":1,"loss":1,"time":%s}\n' "$(date +%s)" >>"$OVERBRAINER_METRICS"
echo model >output/model.txt
truncate -s 64M output/huge.bin
`;
    await scriptCase(
      this,
      'sparse.sh',
      script,
      { retrieveGraceMinutes: 10, targetExtra: 'max_retrieve_gb = 0.01\n' },
      async (lab) => {
        let id: string | null = null;
        recordFault(this, 'input.results_over_max_retrieve_gb');
        const result = await lab.track(
          train(lab.deps, lab.config, lab.workspace, { onRun: (run) => (id = run.id) }),
        );
        assert.ok(id !== null);
        const runDir = lab.runDir(id);
        const message = String(result.run.message);
        assert.match(message, /artifacts not retrieved: /, message);
        assert.match(message, /0\.07 GB/, `the size: ${message}`);
        assert.match(message, /max_retrieve_gb = 0\.01/, `the limit: ${message}`);
        assert.match(message, /nothing was downloaded/i, message);
        assert.match(message, new RegExp(`overbrainer train attach ${id}`), message);
        assert.match(message, new RegExp(`overbrainer runs logs ${id}`), message);
        assert.match(message, new RegExp(`overbrainer pod rm ${id}`), message);
        assert.equal(String(lab.runJson(id).message), message);
        assert.equal(result.ending, 'awaiting_retrieval', lab.transcript());
        const podId = String(lab.podJson(id).pod_id);
        assert.equal(lab.podJson(id).state, 'awaiting_retrieval');
        assert.equal(lab.ledgerOf(podId).billing, true, 'the pod keeps the only copy');
        // Nothing partial (nor whole) of the results on disk: no output/, no staging.
        assert.deepEqual(filesIn(path.join(runDir, 'output')), []);
        assert.equal(fs.existsSync(path.join(runDir, '.retrieving')), false, 'no staging left');
        return { verified: 0, lost: 0 };
      },
    );
  });

  it('a sparse checkpoint over max_retrieve_gb is not streamed home: said once, nothing partial in checkpoints/, the run still ends with its results', async function () {
    // The checkpoint is a 64 MiB sparse file; the job waits until the test saw the stream
    // refuse it (data/go, written on the pod), then ends with a small result.
    const script = String.raw`set -e
mkdir -p output/.building
printf '{"event":"begin","time":%s,"max_steps":10}\n' "$(date +%s)" >>"$OVERBRAINER_METRICS"
truncate -s 64M output/.building/model.bin
mv output/.building output/checkpoint-5
printf '{"event":"log","step":5,"loss":1,"time":%s}\n' "$(date +%s)" >>"$OVERBRAINER_METRICS"
while [ ! -e data/go ]; do sleep 0.05; done
echo model >output/model.txt
`;
    await scriptCase(
      this,
      'sparseCheckpoint.sh',
      script,
      { targetExtra: 'max_retrieve_gb = 0.01\n', timing: { checkpointPollMs: 200 } },
      async (lab) => {
        let id: string | null = null;
        recordFault(this, 'input.checkpoint_over_max_retrieve_gb');
        const flow = lab.trainOutcome((runId) => (id = runId));
        await lab.jobRunning(() => id);
        const runId = id!;
        await lab.waitFor('the stream to refuse the checkpoint', () =>
          lab.warnings().some((w) => w.code === 'checkpoint_too_big'),
        );
        const podId = String(lab.podJson(runId).pod_id);
        fs.writeFileSync(lab.podFile(podId, runId, 'data/go'), '');
        const outcome = await flow;
        assert.equal(outcome.error, null, `${String(outcome.error)}\n${lab.transcript()}`);
        assert.equal(lab.runJson(runId).state, 'succeeded', lab.transcript());
        const refused = lab.warnings().filter((w) => w.code === 'checkpoint_too_big');
        assert.equal(refused.length, 1, 'said once, not at every look');
        assert.match(refused[0]!.message, /checkpoint output\/checkpoint-5 is not streamed home/);
        assert.match(refused[0]!.message, /0\.07 GB in 1 file\(s\), over max_retrieve_gb = 0\.01/);
        const home = path.join(lab.runDir(runId), 'checkpoints');
        assert.deepEqual(
          tree(home).filter((p) => p.startsWith('checkpoint-') || p.startsWith('.retrieving')),
          [],
          'no copy, no partial file, no staging in checkpoints/',
        );
        assert.equal(fs.existsSync(path.join(home, 'latest.json')), false);
        assert.equal(
          fs.readFileSync(path.join(lab.runDir(runId), 'output', 'model.txt'), 'utf8'),
          'model\n',
        );
        assert.equal(
          lab.ledgerOf(podId).billing,
          false,
          'the pod was deleted once results verified',
        );
        return { verified: 1, lost: 0 };
      },
    );
  });
});
