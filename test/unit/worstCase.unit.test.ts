/**
 * The worst case the quote prices (src/core/pod/worstCase.ts), from the timing constants and
 * the graces, against what the watchdog script really does after the deadline and the cap.
 */
import assert from 'node:assert/strict';
import { watchdogScript } from '../../src/core/pod/podScripts';
import {
  WATCHDOG_CALL_LIMIT_S,
  WATCHDOG_DELETE_CALLS,
  watchdogSpans,
  worstCaseUsd,
} from '../../src/core/pod/worstCase';
import { PRODUCTION_TIMING, scaleTiming } from '../../src/core/timing';

describe('the worst case if every client dies', () => {
  it('past the deadline: the lease TTL, a tick, the deadline snapshot wait, or the retrieve grace; then a tick and the delete', () => {
    // Production: max(900 + 60 + 900, 3600) + 60 + 90 s.
    const spans = watchdogSpans(PRODUCTION_TIMING, { bootGraceS: 1800, retrieveGraceS: 3600 });
    assert.deepEqual(spans, { afterDeadlineS: 3750, afterCapS: 150, neverStartedS: 1950 });
    // A short retrieve grace: the lease and the snapshot wait are the longer hold.
    const short = watchdogSpans(PRODUCTION_TIMING, { bootGraceS: 600, retrieveGraceS: 600 });
    assert.equal(short.afterDeadlineS, 900 + 60 + 900 + 60 + 90);
    // Scaled timing (a test's watchdog): its own lease, tick and snapshot wait; the calls' limit stays.
    const scaled = watchdogSpans(scaleTiming(60), { bootGraceS: 300, retrieveGraceS: 60 });
    assert.deepEqual(scaled, { afterDeadlineS: 60 + 1 + 90, afterCapS: 91, neverStartedS: 391 });
  });

  it('prices max_hours and that span; a cap bounds it with its own tick and delete, never below a pod that never started', () => {
    const spans = watchdogSpans(PRODUCTION_TIMING, { bootGraceS: 1800, retrieveGraceS: 3600 });
    assert.equal(worstCaseUsd(1, 6, null, spans), 6 + 3750 / 3600);
    assert.equal(worstCaseUsd(1, 6, 2, spans), 2 + 150 / 3600);
    // A tiny cap: the boot grace a pod whose job never started gets is more.
    assert.equal(worstCaseUsd(1, 6, 0.1, spans), 1950 / 3600);
    // A cap above max_hours' bound changes nothing.
    assert.equal(worstCaseUsd(1, 6, 100, spans), 6 + 3750 / 3600);
  });

  it('counts the watchdog as it is: each API call limited to 30 s, a delete of DELETE, terminate, stop, its snapshot rules', () => {
    const w = watchdogScript();
    const limits = [...w.matchAll(/--max-time (\d+)/g)].map((m) => Number(m[1]));
    assert.ok(limits.length >= 1);
    assert.deepEqual([...new Set(limits)], [WATCHDOG_CALL_LIMIT_S]);
    const del = w.slice(w.indexOf('wd_delete() {'), w.indexOf('\n}\n', w.indexOf('wd_delete() {')));
    assert.equal([...del.matchAll(/\$\(wd_http /g)].length, WATCHDOG_DELETE_CALLS);
    // The deadline's hold: the snapshot wait from the request, the retrieve grace from the deadline.
    assert.ok(w.includes('[ $((wd_t - wd_snap_deadline_at)) -lt "$WD_SNAPSHOT_WAIT" ]'));
    assert.ok(w.includes('[ "$wd_t" -ge $((wd_deadline + WD_RETRIEVE_GRACE)) ]'));
  });
});
