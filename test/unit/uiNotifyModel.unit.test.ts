import * as assert from 'node:assert/strict';
import { notificationFor, OnceFilter } from '../../src/ui/notifyModel';

describe('notifications from core events (model)', function () {
  it('an overrun offers Keep Pod and Open Run, keyed once per run', function () {
    const a = notificationFor({ type: 'warning', runId: 'r1', code: 'overrun', message: 'slow' });
    const b = notificationFor({ type: 'warning', runId: 'r1', code: 'overrun', message: 'slower' });
    assert.deepEqual(a?.actions, ['Keep Pod', 'Open Run']);
    assert.equal(a?.severity, 'warning');
    assert.equal(a?.key, b?.key, 'a repeated overrun of the same run is the same notification');
    const once = new OnceFilter();
    assert.equal(once.first(a!.key), true);
    assert.equal(once.first(b!.key), false);
    const other = notificationFor({ type: 'warning', runId: 'r2', code: 'overrun', message: 'x' });
    assert.equal(once.first(other!.key), true);
  });

  it('strays offer Remove Pod, awaiting retrieval offers Attach', function () {
    assert.deepEqual(
      notificationFor({ type: 'warning', runId: 'r', code: 'strays', message: 'm' })?.actions,
      ['Remove Pod'],
    );
    assert.deepEqual(
      notificationFor({ type: 'warning', runId: null, code: 'strays', message: 'm' })?.actions,
      [],
    );
    assert.deepEqual(
      notificationFor({ type: 'warning', runId: 'r', code: 'awaiting_retrieval', message: 'm' })
        ?.actions,
      ['Attach'],
    );
  });

  it('a finished run: success offers its output, failure is an error, preparing is silent', function () {
    const ok = notificationFor({ type: 'runState', runId: 'r', state: 'succeeded', message: null });
    assert.equal(ok?.severity, 'info');
    assert.deepEqual(ok?.actions, ['Open Output']);
    assert.equal(ok?.message, 'Run r succeeded');
    const failed = notificationFor({
      type: 'runState',
      runId: 'r',
      state: 'failed',
      message: 'exit 3',
    });
    assert.equal(failed?.severity, 'error');
    assert.equal(failed?.message, 'Run r failed: exit 3');
    assert.equal(
      notificationFor({ type: 'runState', runId: 'r', state: 'running', message: null }),
      null,
    );
    assert.equal(notificationFor({ type: 'log', level: 'info', message: 'x' }), null);
  });
});
