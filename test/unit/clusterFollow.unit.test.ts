/**
 * A cluster node whose host stops answering is found within 2 minutes of production time (issue
 * 37): the follow's look at each node waits at most requestTimeoutMs, every statusPollMs, and
 * MISSES_ALLOWED missed looks in a row end the run's cluster.
 */
import assert from 'node:assert/strict';
import { MISSES_ALLOWED } from '../../src/core/flow/clusterFollow';
import { PRODUCTION_TIMING } from '../../src/core/timing';

describe('a cluster node that stops answering', () => {
  it('is found within 2 minutes with the production timing', () => {
    const boundMs =
      MISSES_ALLOWED * (PRODUCTION_TIMING.requestTimeoutMs + PRODUCTION_TIMING.statusPollMs);
    assert.ok(boundMs <= 120_000, `${boundMs} ms`);
    assert.ok(MISSES_ALLOWED >= 2, 'one missed look is not a lost host');
  });
});
