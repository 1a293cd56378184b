import assert from 'node:assert/strict';
import { notificationFor } from '../../src/ui/runs/notifyModel';

describe('the notification of a recovery on a new pod', () => {
  it('says what the CLI says, once per recovery, with Open Run', () => {
    const message =
      'pod abc died at step 27 (Runpod deleted it); attempt 2 of 3 on a new pod from checkpoint-25 (step 25), lost ≤ 3.2 s of training; spent so far $0.0040';
    const first = notificationFor({
      type: 'warning',
      runId: 'tiny_1',
      code: 'recovering',
      message,
    });
    assert.ok(first !== null);
    assert.equal(first.severity, 'warning');
    assert.equal(first.message, `Run tiny_1: ${message}`);
    assert.deepEqual(first.actions, ['Open Run']);
    const second = notificationFor({
      type: 'warning',
      runId: 'tiny_1',
      code: 'recovering',
      message: message.replace('attempt 2 of 3', 'attempt 3 of 3'),
    });
    assert.notEqual(second?.key, first.key, 'a second recovery is shown too');
  });
});
