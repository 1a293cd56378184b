import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { decodeRunRecord, encodeRunRecord, type RunRecord } from '../../src/core/runs/runRecord';
import { metricsUpTo } from '../../src/core/pod/checkpointHome';
import { attemptLine, attemptsText, readAttempts } from '../../src/ui/runs/runAttempts';

const RECORD: RunRecord = {
  id: 'tiny_20261204-090000',
  target: 'pod',
  created: '2026-12-04T09:00:00Z',
  remoteDir: '/workspace/overbrainer/tiny_20261204-090000',
  job: null,
  state: 'succeeded',
  message: null,
};

type Attempt = NonNullable<RunRecord['attempts']>[number];

/** Pod abc from the start, ended with `first`; then pod def from step 20's checkpoint, `second`. */
function twoAttempts(
  first: Pick<Attempt, 'reason' | 'costUsd'>,
  second: Pick<Attempt, 'endedAt' | 'costUsd'>,
): Attempt[] {
  return [
    {
      podId: 'abc',
      startedAt: '2026-12-04T09:00:01Z',
      endedAt: '2026-12-04T09:10:00Z',
      resumedFromStep: null,
      resumedFromCheckpoint: null,
      ...first,
    },
    {
      podId: 'def',
      startedAt: '2026-12-04T09:10:05Z',
      reason: null,
      resumedFromStep: 20,
      resumedFromCheckpoint: 'checkpoints/checkpoint-20',
      ...second,
    },
  ];
}

describe('run attempts (recovery on a new pod)', () => {
  it('run.json round-trips attempts in snake_case, and a record without them still reads', () => {
    const withAttempts: RunRecord = {
      ...RECORD,
      attempts: twoAttempts(
        { reason: 'pod_exited', costUsd: 0.12 },
        { endedAt: null, costUsd: null },
      ),
    };
    const text = encodeRunRecord(withAttempts);
    assert.match(text, /"resumed_from_checkpoint": "checkpoints\/checkpoint-20"/);
    assert.deepEqual(decodeRunRecord(text, 'run.json').attempts, withAttempts.attempts);
    assert.equal(decodeRunRecord(encodeRunRecord(RECORD), 'run.json').attempts, undefined);
    assert.throws(() => decodeRunRecord(text.replace('"pod_exited"', '"exploded"'), 'run.json'));
  });

  it('the Runs tree rows say the pod, where it started, how it ended and what it cost', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attempts-'));
    try {
      fs.writeFileSync(
        path.join(dir, 'run.json'),
        encodeRunRecord({
          ...RECORD,
          attempts: twoAttempts(
            { reason: 'pod_deleted', costUsd: 0.0123 },
            { endedAt: '2026-12-04T09:20:00Z', costUsd: 0.02 },
          ),
        }),
      );
      const attempts = await readAttempts(dir);
      assert.deepEqual(attemptLine(attempts[0]!, 0), {
        label: 'Attempt 1: pod abc',
        description: 'from the start · pod deleted by Runpod · about $0.0123',
      });
      assert.deepEqual(attemptLine(attempts[1]!, 1), {
        label: 'Attempt 2: pod def',
        description: 'from step 20 · the run ended on it · about $0.0200',
      });
      assert.deepEqual(await readAttempts(path.join(dir, 'none')), []);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the new pod's metrics start with the mirrored lines up to the checkpoint's step", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mirror-'));
    try {
      fs.mkdirSync(path.join(dir, 'checkpoints'));
      const lines = [
        '{"event":"begin","max_steps":30}',
        ...[5, 10, 15].map((step) => `{"event":"log","step":${step},"loss":1}`),
        '{"event":"log","st',
      ];
      fs.writeFileSync(path.join(dir, 'checkpoints', 'metrics.jsonl'), lines.join('\n'));
      assert.equal(metricsUpTo(dir, 10).toString('utf8'), `${lines.slice(0, 3).join('\n')}\n`);
      assert.equal(metricsUpTo(dir, null).length, 0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the run page line of the attempts', () => {
  it('lists every attempt, or nothing for a run that never lost a pod', () => {
    assert.equal(attemptsText(undefined), null);
    assert.equal(
      attemptsText(
        twoAttempts({ reason: 'pod_exited', costUsd: 0.5 }, { endedAt: null, costUsd: null }),
      ),
      'Attempt 1: pod abc (from the start · pod died (EXITED) · about $0.5000) · Attempt 2: pod def (from step 20 · running)',
    );
  });
});
