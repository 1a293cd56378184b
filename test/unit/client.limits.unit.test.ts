/**
 * The client's calls under a read-only command's limits (src/core/runpod/callLimits.ts), against
 * a scripted server on loopback, waits on a FakeClock: Runpod's rate limit waited out while the
 * waits add up to the patience, each told first; a longer one not started; a spent quota likewise
 * before anything is sent; a refused connection not retried.
 */
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { CallLimits, type RateLimitWait } from '../../src/core/runpod/callLimits';
import { ApiError } from '../../src/core/runpod/apiErrors';
import { drive, json, makeClient, problem, rejection, startServer } from '../helpers/runpodClient';

describe('RunpodClient under read-only limits', () => {
  it('waits out 429s while their waits add up to the patience, each told first; the next is not started and the call fails rate_limited', async () => {
    const server = await startServer((_hit, res) =>
      problem(res, 429, 'slow down', {}, { 'retry-after': '12' }),
    );
    const { client, clock } = makeClient(server);
    const told: RateLimitWait[] = [];
    const limited = client.withLimits(new CallLimits(30_000, (wait) => told.push(wait)));
    const error = await rejection(drive(clock, limited.listPods()));
    assert.ok(error instanceof ApiError && error.kind === 'rate_limited', String(error));
    assert.equal(error.retryAfterMs, 12_000);
    assert.deepEqual(clock.backoffs, [12_000, 12_000]);
    assert.deepEqual(
      told.map((w) => [w.what, w.why, w.waitMs, w.leftMs]),
      [
        ['GET /pods', 'answered 429', 12_000, 18_000],
        ['GET /pods', 'answered 429', 12_000, 6_000],
      ],
    );
    assert.equal(server.hits.length, 3);
  });

  it("a quota spent for longer than the patience left fails before the call is sent; the client's own calls share that quota", async () => {
    const server = await startServer((_hit, res) =>
      json(res, 200, { pods: [] }, { ratelimit: '"minute";r=0;t=40' }),
    );
    const { client, clock } = makeClient(server);
    const limited = client.withLimits(new CallLimits(30_000));
    assert.deepEqual(await limited.listPods(), []);
    const error = await rejection(limited.listPods());
    assert.ok(error instanceof ApiError && error.kind === 'rate_limited', String(error));
    assert.match(error.message, /spent for 40 s more: GET \/pods was not sent/);
    assert.equal(server.hits.length, 1);
    // The client itself (a lifecycle call) waits for the same reset, then sends.
    assert.deepEqual(await drive(clock, client.listPods()), []);
    assert.deepEqual(clock.backoffs, [40_000]);
    assert.equal(server.hits.length, 2);
  });

  it('a refused connection is not retried, and the error names the base URL', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const server = await startServer((_hit, res) => json(res, 200, { pods: [] }));
    const { client, clock } = makeClient({ ...server, baseUrl: `http://127.0.0.1:${port}/v2` });
    const limited = client.withLimits(new CallLimits(30_000));
    const error = await rejection(drive(clock, limited.listPods()));
    assert.ok(error instanceof ApiError && error.kind === 'transport', String(error));
    assert.equal(
      error.message,
      `could not reach the Runpod API at http://127.0.0.1:${port}/v2: connection refused (ECONNREFUSED)`,
    );
    assert.deepEqual(clock.backoffs, []);
  });
});
