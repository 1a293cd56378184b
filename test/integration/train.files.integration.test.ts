/**
 * A new run's files are checked before any pod exists (their copy runs while the pod boots): an
 * upload entry that is missing, or that holds a file the copy cannot take (a FIFO), fails the run
 * with the entry named and the next action, and no pod is ever created.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FlowError, train } from '../../src/core/flow';
import { Lab } from '../helpers/lifecycle';

describe('train: the run files are checked before any pod', function () {
  this.timeout(60_000);
  let lab: Lab | null = null;
  afterEach(async () => {
    await lab?.close();
    lab = null;
  });

  async function refused(setup: (workspace: string) => void): Promise<FlowError> {
    lab = await Lab.start();
    setup(lab.workspace);
    const error = await train(lab.deps, lab.config, lab.workspace).then(
      () => assert.fail('the run started'),
      (caught: unknown) => caught,
    );
    assert.ok(error instanceof FlowError, String(error));
    assert.ok(error.hint, 'a next action');
    assert.deepEqual(lab.emulator.ledger().pods, [], 'no pod was created');
    const run = lab.runJson(lab.onlyRunId());
    assert.equal(run.state, 'failed');
    assert.equal(run.message, error.message);
    return error;
  }

  it('a FIFO in an upload entry: refused, naming it, before any pod', async () => {
    const error = await refused((ws) => execFileSync('mkfifo', [path.join(ws, 'data', 'pipe')]));
    assert.match(error.message, /upload entry data holds data\/pipe, which is not a regular file/);
  });

  it('a missing upload entry: refused, naming it, before any pod', async () => {
    const error = await refused((ws) => fs.rmSync(path.join(ws, 'data'), { recursive: true }));
    assert.match(error.message, /upload entry data does not exist/);
  });
});
