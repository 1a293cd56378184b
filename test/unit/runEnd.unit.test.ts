import assert from 'node:assert/strict';
import type { RunState } from '../../src/core/events';
import { endRun, reopenRun } from '../../src/core/runs/runEnd';
import { decodeRunRecord, encodeRunRecord, type RunRecord } from '../../src/core/runs/runRecord';

const RUN: RunRecord = {
  id: 'tiny_20261206-090000',
  target: 'pod',
  created: '2026-12-06T09:00:00Z',
  remoteDir: '/workspace/overbrainer/tiny_20261206-090000',
  job: null,
  state: 'running',
  message: null,
};

/** run.json as an older version wrote it: no `end`. */
function older(state: RunState, message: string | null): string {
  const json = JSON.parse(encodeRunRecord(RUN)) as Record<string, unknown>;
  return JSON.stringify({ ...json, state, message });
}

describe('a run records how it ended (`end` in run.json)', () => {
  it('the end is saved as {cause, message} beside the state and read back', () => {
    const run: RunRecord = { ...RUN };
    endRun(
      run,
      'failed',
      'deadline',
      'max_hours reached: the pod was deleted before the job ended',
    );
    assert.equal(run.state, 'failed');
    assert.equal(run.message, 'max_hours reached: the pod was deleted before the job ended');
    const json = JSON.parse(encodeRunRecord(run)) as Record<string, unknown>;
    assert.deepEqual(json.end, {
      cause: 'deadline',
      message: 'max_hours reached: the pod was deleted before the job ended',
    });
    assert.deepEqual(decodeRunRecord(encodeRunRecord(run), 'run.json').end, run.end);
  });

  it('a run that goes on again (recovered, results still to come) has no end', () => {
    const run: RunRecord = { ...RUN };
    endRun(run, 'failed', 'pod_gone', 'pod p1 no longer exists');
    reopenRun(run, null);
    assert.equal(run.state, 'running');
    assert.equal(run.end, undefined);
    assert.equal('end' in (JSON.parse(encodeRunRecord(run)) as object), false);
  });

  it('the cause is read from `end`, never from the message', () => {
    const run: RunRecord = { ...RUN };
    // A job whose own failure text reads like a limit is still a failed job.
    endRun(
      run,
      'failed',
      'job_failed',
      'max_hours reached: the pod was deleted before the job ended',
    );
    assert.equal(decodeRunRecord(encodeRunRecord(run), 'run.json').end?.cause, 'job_failed');
  });

  it('an older run.json without `end` still reads: its cause is derived from its state and words, else unknown', () => {
    const causeOf = (state: RunState, message: string | null) =>
      decodeRunRecord(older(state, message), 'run.json').end?.cause ?? null;
    assert.equal(causeOf('succeeded', null), 'completed');
    assert.equal(causeOf('cancelled', null), 'cancelled');
    assert.equal(
      causeOf('stopped', 'stopped at step 7 (cost); snapshot output/checkpoint-7'),
      'snapshotted',
    );
    assert.equal(
      causeOf('stopped', 'stopped at step 7 (cost); snapshot c; artifacts not retrieved: x'),
      'not_retrieved',
    );
    assert.equal(
      causeOf('failed', 'exited with code 3; artifacts not retrieved: x'),
      'not_retrieved',
    );
    assert.equal(
      causeOf('failed', 'max_hours reached: the pod was deleted before the job ended'),
      'deadline',
    );
    assert.equal(
      causeOf('failed', 'max_cost_usd reached: the pod was deleted before the job ended'),
      'cost_cap',
    );
    assert.equal(causeOf('failed', 'pod abc123 no longer exists'), 'pod_gone');
    assert.equal(
      causeOf(
        'failed',
        'pod abc no longer exists; not recovered: max_recoveries = 0 turns recovery on a new pod off',
      ),
      'pod_gone',
    );
    assert.equal(
      causeOf('failed', 'pod abc died at step 4 (deleted by Runpod); not recovered: no GPU'),
      'recovery_failed',
    );
    assert.equal(
      causeOf('failed', 'pod deleted by `pod rm` before its results were retrieved'),
      'pod_removed',
    );
    assert.equal(causeOf('failed', 'interrupted before the job started'), 'interrupted');
    assert.equal(causeOf('failed', 'the job could not start: no sh'), 'start_failed');
    assert.equal(causeOf('failed', 'exited with code 3 (see runs/r/job.log)'), 'job_failed');
    assert.equal(causeOf('failed', 'plugin not loaded: the job exited 0 without …'), 'job_failed');
    assert.equal(causeOf('failed', 'stopped without an exit code'), 'job_failed');
    assert.equal(
      causeOf('failed', 'the job succeeded but wrote nothing under output/'),
      'job_failed',
    );
    assert.equal(causeOf('failed', 'Runpod answered 500'), 'unknown');
    assert.equal(causeOf('failed', null), 'unknown');
    assert.equal(causeOf('running', null), null, 'a run going on has no end');
    assert.equal(causeOf('preparing', null), null);
  });

  it('an `end` this version cannot read never fails the record: a cause it does not know is unknown', () => {
    const json = JSON.parse(older('failed', 'pod p no longer exists')) as Record<string, unknown>;
    const read = (end: unknown) =>
      decodeRunRecord(JSON.stringify({ ...json, end }), 'run.json').end ?? null;
    assert.deepEqual(read({ cause: 'exploded_later', message: 'x' }), {
      cause: 'unknown',
      message: 'x',
    });
    // Damaged: read as an older record (derived from its words).
    assert.deepEqual(read(42), { cause: 'pod_gone', message: 'pod p no longer exists' });
    assert.deepEqual(read({ cause: 7 }), { cause: 'pod_gone', message: 'pod p no longer exists' });
  });
});
