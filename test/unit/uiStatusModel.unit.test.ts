import * as assert from 'node:assert/strict';
import { PRODUCTION_TIMING } from '../../src/core/timing';
import {
  etaFromNow,
  LAST_STRETCH_MS,
  statusForPod,
  statusView,
} from '../../src/ui/runs/statusModel';

const MIN = 60_000;
const HOUR = 60 * MIN;

describe('status bar countdown (model)', function () {
  it('shows the time left and the ETA as the product text', function () {
    const view = statusView({
      runId: 'tiny_1',
      untilDeadlineMs: 4 * HOUR + 12 * MIN + 30_000,
      etaMs: 3 * HOUR + 5 * MIN,
    });
    assert.equal(view.text, '$(watch) 4h 12m left · ETA 3h 05m');
    assert.equal(view.background, 'none');
    assert.match(view.tooltip, /tiny_1/);
  });

  it('warns when the ETA passes the deadline', function () {
    const view = statusView({ runId: 'r', untilDeadlineMs: 1 * HOUR, etaMs: 2 * HOUR });
    assert.equal(view.text, '$(watch) 1h 00m left · ETA 2h 00m');
    assert.equal(view.background, 'warning');
    assert.match(view.tooltip, /after the deadline/);
  });

  it('turns to the error background in the last 15 minutes, even with an ETA in time', function () {
    assert.equal(
      statusView({ runId: 'r', untilDeadlineMs: LAST_STRETCH_MS, etaMs: MIN }).background,
      'error',
    );
    assert.equal(
      statusView({ runId: 'r', untilDeadlineMs: LAST_STRETCH_MS + 1000, etaMs: MIN }).background,
      'none',
    );
    assert.equal(
      statusView({ runId: 'r', untilDeadlineMs: 0, etaMs: null }).text,
      '$(watch) 0s left',
    );
  });

  it('has no deadline for a kept pod and no ETA while the pace is unknown', function () {
    const kept = statusView({ runId: 'r', untilDeadlineMs: null, etaMs: 5 * MIN });
    assert.equal(kept.text, '$(watch) following · ETA 5m 00s');
    assert.equal(kept.background, 'none');
    assert.equal(
      statusView({ runId: 'r', untilDeadlineMs: 20 * MIN, etaMs: null }).text,
      '$(watch) 20m 00s left',
    );
  });

  it('shows seconds in the last hour, so the countdown moves every second', function () {
    const at = (ms: number): string =>
      statusView({ runId: 'r', untilDeadlineMs: ms, etaMs: null }).text;
    assert.equal(at(59 * MIN + 58_900), '$(watch) 59m 58s left');
    assert.equal(at(59 * MIN + 57_100), '$(watch) 59m 57s left');
    assert.equal(at(HOUR + 30_000), '$(watch) 1h 00m left');
    assert.equal(at(61_000), '$(watch) 1m 01s left');
    assert.equal(at(59_999), '$(watch) 59s left');
  });

  it('counts the ETA from now, not from the latest metric', function () {
    assert.equal(etaFromNow(null, 1000), null);
    assert.equal(etaFromNow(10_000, 4_000), 6_000);
    assert.equal(etaFromNow(10_000, 60_000), 0);
    assert.equal(etaFromNow(10_000, -5), 10_000);
  });

  it('counts down to the deadline the watchdog enforces (create + max_hours), not the client guard', function () {
    const nowMs = Date.UTC(2026, 11, 3, 12, 0, 0);
    const pod = {
      keep: false,
      deadlineUnixS: nowMs / 1000 + 3600,
      deadline: '2026-12-03T13:00:00Z',
    };
    // The run view says "1h until the deadline" for this pod: the status bar must agree.
    const view = statusForPod('r', pod, nowMs, null);
    assert.equal(view.text, '$(watch) 1h 00m left');
    assert.match(
      view.tooltip,
      /1h 00m until the watchdog's deadline \(max_hours, 2026-12-03T13:00:00Z\)/,
    );
    assert.match(view.tooltip, /At 0 the pod's watchdog deletes the pod/);
    assert.doesNotMatch(view.tooltip, /Keep Pod/);
    assert.ok(PRODUCTION_TIMING.deadlineMarginMs > 0, 'the guard margin this must not add');
    const late = statusForPod('r', pod, nowMs, 2 * HOUR);
    assert.equal(late.background, 'warning');
    assert.doesNotMatch(late.tooltip, /Keep Pod/);
    assert.equal(statusForPod('r', { ...pod, keep: true }, nowMs, null).text, '$(watch) following');
  });
});
