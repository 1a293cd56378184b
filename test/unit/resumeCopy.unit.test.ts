/**
 * The checkpoint a run resumes from, placed in its directory (`resume/checkpoint-N/`): by
 * `train --resume-from` and by a recovery on a new pod alike. The job's env names it on the pod,
 * and an Axolotl config is told where it is.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { placeResumeCopy } from '../../src/core/train/resumeCopy';
import type { RunRecord } from '../../src/core/runs/runRecord';
import { RESUME_ENV } from '../../src/core/train/job';

describe('resume: the checkpoint placed in the run directory', function () {
  let dir: string;
  const run = { remoteDir: '/workspace/overbrainer/runs/r1' } as RunRecord;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ob-resume-'));
    mkdirSync(join(dir, 'from', 'sub'), { recursive: true });
    writeFileSync(join(dir, 'from', 'model.json'), '{"step":20}');
    writeFileSync(join(dir, 'from', 'sub', 'state.bin'), 'state');
    mkdirSync(join(dir, 'run'));
    writeFileSync(join(dir, 'run', 'axolotl.yaml'), 'base_model: tiny\n');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('copies the checkpoint whole and names it on the pod', async () => {
    const env = await placeResumeCopy(
      join(dir, 'run'),
      run,
      { trainer: 'command', command: 'python3 train.py' },
      join(dir, 'from'),
      'checkpoint-20',
      'why',
    );
    assert.deepEqual(env, { [RESUME_ENV]: `${run.remoteDir}/resume/checkpoint-20` });
    const copy = join(dir, 'run', 'resume', 'checkpoint-20');
    assert.equal(readFileSync(join(copy, 'model.json'), 'utf8'), '{"step":20}');
    assert.equal(readFileSync(join(copy, 'sub', 'state.bin'), 'utf8'), 'state');
    assert.equal(readFileSync(join(dir, 'run', 'axolotl.yaml'), 'utf8'), 'base_model: tiny\n');
  });

  it('tells an Axolotl config where the checkpoint is, and why', async () => {
    await placeResumeCopy(
      join(dir, 'run'),
      run,
      { trainer: 'axolotl', config: 'axolotl.yaml', venv: '/opt/venv' },
      join(dir, 'from'),
      'checkpoint-20',
      'this run goes on on a new pod from step 20',
    );
    assert.equal(
      readFileSync(join(dir, 'run', 'axolotl.yaml'), 'utf8'),
      'base_model: tiny\n\n# Added by Overbrainer: this run goes on on a new pod from step 20.\n' +
        `resume_from_checkpoint: "${run.remoteDir}/resume/checkpoint-20"\n`,
    );
  });
});
