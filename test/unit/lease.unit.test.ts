import assert from 'node:assert/strict';
import {
  costCapAtUnixS,
  goneBy,
  limitPassed,
  pastCostCap,
  guardFires,
  overrun,
  pastDeadline,
  renewalDue,
  untilDeadlineMs,
  type CostCapView,
  type DeadlineView,
  type EtaSource,
} from '../../src/core/pod/lease';
import { PRODUCTION_TIMING } from '../../src/core/timing';
import { releaseDeadlineUnixS } from '../../src/core/flow/keep';

const T = PRODUCTION_TIMING;
const MIN = 60_000;
const NOW = Date.UTC(2026, 8, 29, 12, 0, 0);

/** A pace of 1 step per 10 s at step 100 of 7300: 20 hours left. */
const slowPace: EtaSource = { etaMs: () => ((7300 - 100) / (10 / 100)) * 1000 };
const noPace: EtaSource = { etaMs: () => null };

/** A pod whose watchdog deletes it `hours` after `nowMs`. */
function podDueIn(hours: number, keep: boolean, nowMs: number): DeadlineView & CostCapView {
  return {
    keep,
    costCapUsd: null,
    costPerHourUsd: 0.69,
    createdUnixS: Math.floor(nowMs / 1000),
    deadlineUnixS: Math.floor((nowMs + hours * 3_600_000) / 1000),
    deadline: '2026-09-29T19:54:50Z',
  };
}

describe('lease and deadline rules', () => {
  it('a job that cannot end before the deadline is warned about', () => {
    assert.equal(
      overrun(slowPace, podDueIn(6, false, NOW), NOW, false),
      "at this pace the job needs about 20.0h more, but the pod's watchdog deletes it by " +
        "2026-09-29T19:54:50Z (max_hours): raise the target's max_hours, or train with " +
        '--keep-pod, to let it finish',
    );
  });

  it('a followed job past the deadline is only noted', () => {
    assert.equal(
      overrun(slowPace, podDueIn(6, false, NOW), NOW, true),
      'at this pace the job needs about 20.0h more, past max_hours ' +
        '(2026-09-29T19:54:50Z): the pod stays while overbrainer follows the job; ' +
        "if it stops following, the pod's watchdog deletes the pod",
    );
  });

  it('the lease is renewed every few minutes while the job progresses', () => {
    const ago = (minutes: number): number => NOW - minutes * MIN;
    assert.equal(renewalDue(T, null, NOW, NOW), true);
    assert.equal(renewalDue(T, ago(1), ago(1), NOW), false);
    assert.equal(renewalDue(T, ago(5), ago(1), NOW), true);
    // A job with no new metric for 30 minutes stalled: no renewal.
    assert.equal(renewalDue(T, ago(5), ago(30), NOW), false);
    assert.equal(renewalDue(T, null, ago(31), NOW), false);
  });

  it('the client guard waits for the lease to run out', () => {
    const ago = (minutes: number): number => NOW - minutes * MIN;
    // Deadline passed an hour ago, well beyond the margin.
    const late = podDueIn(0, false, NOW - 3_600_000);
    assert.equal(guardFires(T, late, ago(1), NOW), false);
    assert.equal(guardFires(T, late, ago(14), NOW), false);
    assert.equal(guardFires(T, late, ago(15), NOW), true);
    assert.equal(guardFires(T, late, null, NOW), true);
    // Before the deadline, or kept: never.
    assert.equal(guardFires(T, podDueIn(1, false, NOW), null, NOW), false);
    assert.equal(guardFires(T, podDueIn(0, true, NOW - 3_600_000), null, NOW), false);
  });

  it('no overrun in time, for a kept pod, or without a pace', () => {
    assert.equal(overrun(slowPace, podDueIn(21, false, NOW), NOW, false), null);
    assert.equal(overrun(slowPace, podDueIn(6, true, NOW), NOW, false), null);
    assert.equal(overrun(noPace, podDueIn(6, false, NOW), NOW, false), null);
  });

  it('the client deadline is the watchdog deadline plus the margin', () => {
    const pod = podDueIn(1, false, NOW);
    assert.equal(untilDeadlineMs(T, pod, NOW), 3_600_000 + 5 * MIN);
    assert.equal(untilDeadlineMs(T, pod, NOW + 2 * 3_600_000), 0);
    assert.equal(untilDeadlineMs(T, { ...pod, keep: true }, NOW), null);
    assert.equal(untilDeadlineMs(T, { ...pod, deadlineUnixS: null }, NOW), null);
  });

  it('a pod found gone after its deadline was deleted by its watchdog', () => {
    const pod = podDueIn(1, false, NOW);
    assert.equal(pastDeadline(pod, NOW), false);
    assert.equal(goneBy(pod, NOW), 'unknown');
    assert.equal(pastDeadline(pod, NOW + 3_600_000), true);
    assert.equal(goneBy(pod, NOW + 3_600_000), 'watchdog');
    assert.equal(pastDeadline({ ...pod, keep: true }, NOW + 7_200_000), false);
  });

  it('the cost cap falls at creation + max_cost_usd / rate hours, and never for a kept or uncapped pod', () => {
    // $1.38 at $0.69/h buys 2 h; max_hours 6.
    const pod = { ...podDueIn(6, false, NOW), costCapUsd: 1.38 };
    const capAt = Math.floor(NOW / 1000) + 2 * 3600;
    assert.equal(costCapAtUnixS(pod), capAt);
    assert.equal(pastCostCap(pod, capAt * 1000 - 1000), false);
    assert.equal(pastCostCap(pod, capAt * 1000), true);
    assert.equal(costCapAtUnixS({ ...pod, keep: true }), null);
    assert.equal(costCapAtUnixS({ ...pod, costCapUsd: null }), null);
    assert.equal(costCapAtUnixS({ ...pod, costPerHourUsd: null }), null);
    assert.equal(costCapAtUnixS({ ...pod, createdUnixS: null }), null);
    assert.equal(pastCostCap({ ...pod, keep: true }, NOW + 10 * 3_600_000), false);
  });

  it('a pod gone past a limit was ended by the limit that came first', () => {
    const capped = { ...podDueIn(6, false, NOW), costCapUsd: 1.38 }; // cap at 2 h, deadline 6 h
    assert.equal(limitPassed(capped, NOW + 3_600_000), null);
    assert.equal(limitPassed(capped, NOW + 3 * 3_600_000), 'cost_cap');
    assert.equal(limitPassed(capped, NOW + 7 * 3_600_000), 'cost_cap');
    assert.equal(goneBy(capped, NOW + 3 * 3_600_000), 'watchdog');
    const late = { ...podDueIn(1, false, NOW), costCapUsd: 1.38 }; // deadline 1 h, cap 2 h
    assert.equal(limitPassed(late, NOW + 90 * MIN), 'deadline');
    assert.equal(limitPassed(late, NOW + 3 * 3_600_000), 'deadline');
  });
});

describe('the release of a pod kept at its creation', () => {
  const created = 1_800_000_000;
  it('gets create + max_hours; once that passed, now + the retrieve grace if the job ended', () => {
    const at = (s: number): number => (created + s) * 1000;
    assert.equal(releaseDeadlineUnixS(created, 2, 3600, false, at(600)), created + 7200);
    assert.equal(releaseDeadlineUnixS(created, 2, 3600, true, at(600)), created + 7200);
    // Passed and ended: the results get the retrieve grace from now.
    assert.equal(releaseDeadlineUnixS(created, 2, 3600, false, at(9000)), created + 9000 + 3600);
    // Passed while the job runs: the deadline stands (only a follower's lease holds it off).
    assert.equal(releaseDeadlineUnixS(created, 2, 3600, true, at(9000)), created + 7200);
  });
});
