/**
 * A cluster node whose host stops answering is found within 2 minutes of production time (issue
 * 37): the follow's look at each node waits at most requestTimeoutMs, every statusPollMs, and
 * MISSES_ALLOWED missed looks in a row end the run's cluster. A client that follows the run
 * again (attach) connects to each member, at most connectTimeoutMs each, every podPollMs, and as
 * many failed connects in a row name the node (cluster.attachSilent.integration shows it end to
 * end at scaled timing).
 */
import assert from 'node:assert/strict';
import { MISSES_ALLOWED } from '../../src/core/flow/clusterFollow';
import { HOST_MISSES_ALLOWED } from '../../src/core/pod/cluster';
import { PRODUCTION_TIMING } from '../../src/core/timing';

describe('a cluster node that stops answering', () => {
  it('is found within 2 minutes with the production timing', () => {
    const boundMs =
      MISSES_ALLOWED * (PRODUCTION_TIMING.requestTimeoutMs + PRODUCTION_TIMING.statusPollMs);
    assert.ok(boundMs <= 120_000, `${boundMs} ms`);
    assert.ok(MISSES_ALLOWED >= 2, 'one missed look is not a lost host');
  });

  it('is found within 2 minutes with the production timing by a client that follows the run again', () => {
    // SshExecutor waits at least 2 s for a connect, whatever the timing says.
    const connectMs = Math.max(2_000, PRODUCTION_TIMING.connectTimeoutMs);
    const boundMs = HOST_MISSES_ALLOWED * (connectMs + PRODUCTION_TIMING.podPollMs);
    assert.ok(boundMs <= 120_000, `${boundMs} ms`);
    assert.ok(boundMs < PRODUCTION_TIMING.readyTimeoutMs, 'no wait for a first boot');
    assert.equal(HOST_MISSES_ALLOWED, MISSES_ALLOWED, 'the same missed looks as the follow');
  });
});
