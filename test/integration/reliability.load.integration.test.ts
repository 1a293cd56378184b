/**
 * Load (issue #7): 20 runs trained and followed at once from this one process for at least a
 * simulated hour (production timing / 120 by default: an hour in 30 s), each against its own emulated
 * pod whose real watchdog would delete it at max_hours unless the lease this process renews is
 * fresh: every job runs on a quarter of a simulated hour past its max_hours. Asserts: every run succeeds with every metric, no lease ever grew stale while
 * its job ran, no pod was deleted by a deadline, none is left billing, and this process's memory
 * stays flat. Prints the figures (test/helpers/load.ts computes them; the benchmark reuses it).
 *
 * OVERBRAINER_LOAD_RUNS / OVERBRAINER_LOAD_HOURS change the size for a quick look;
 * OVERBRAINER_LOAD_SCALE the clock (see SCALE).
 */
import assert from 'node:assert/strict';
import { formatLoadFigures, runLoad } from '../helpers/load';
import { recordFault, recordResult } from '../helpers/reliability';

const RUNS = Number(process.env.OVERBRAINER_LOAD_RUNS ?? 20);
const HOURS = Number(process.env.OVERBRAINER_LOAD_HOURS ?? 1);
/**
 * Production timing divided by this: 120 by default (an hour in 30 s; the lease renewed every
 * 2.5 s real and lasting 7.5 s, so a renewal may come 5 s late before the bound
 * `leaseMaxAgeMs < leaseTtlMs` fails; a client that stops renewing still fails it). Alone on the
 * 2-core CI machine the oldest lease seen was 2.5 s and the event loop's longest delay 75 ms.
 * It must run alone: beside the e2e windows the client's event loop stalled 8–11 s.
 */
const SCALE = Number(process.env.OVERBRAINER_LOAD_SCALE ?? 120);

describe('reliability: load', function () {
  // The machine is shared; the run itself is about a minute at SCALE 120.
  this.timeout((300_000 * 60) / SCALE);

  it(`${RUNS} runs followed at once from one process for ${HOURS} simulated hour(s): leases held, no deadline missed, memory flat`, async function () {
    const figures = await runLoad({
      runs: RUNS,
      simulatedHours: HOURS,
      timingScale: SCALE,
      log: (line) => console.log(`      ${line}`),
    });
    console.log(formatLoadFigures(figures).replace(/^/gm, '      '));
    recordFault(this, 'load.runs_followed_at_once', RUNS);
    recordResult(this, { verified: figures.succeeded, lost: RUNS - figures.succeeded });

    assert.deepEqual(figures.problems, [], 'contract violations or secrets on disk');
    assert.deepEqual(figures.failed, [], 'every run succeeds');
    assert.equal(figures.succeeded, RUNS);
    assert.ok(figures.metricsMin >= figures.metricsExpected, 'a run missed metrics');
    assert.deepEqual(figures.metricsMissed, [], 'metrics written by a job but never published');
    // Leases held: no pod's lease got older than its time to live while its job ran, and the
    // watchdogs saw max_hours pass with the lease held (every job runs past max_hours).
    assert.ok(figures.leaseSamples > RUNS, `lease samples: ${figures.leaseSamples}`);
    assert.ok(
      figures.leaseMaxAgeMs < figures.leaseTtlMs,
      `a lease aged ${figures.leaseMaxAgeMs} ms (ttl ${figures.leaseTtlMs} ms)`,
    );
    assert.equal(figures.podsLeaseHeldPastDeadline, RUNS, 'every watchdog saw the lease held');
    assert.equal(figures.deadlineDeletes, 0, 'a pod was deleted at its deadline');
    assert.equal(figures.podsCreated, RUNS, 'one pod per run');
    assert.equal(figures.podsLeaked, 0);
    // Memory flat: the heap between the first and the last fifth of the jobs' run grows by less
    // than 1 MiB per run followed (what an unbounded metric buffer would exceed many times over).
    assert.ok(
      figures.memory.heapGrowthMb < RUNS,
      `heap grew ${figures.memory.heapGrowthMb} MB over the run`,
    );
  });
});
