/**
 * The Runpod client against the scripted loopback server of test/helpers/runpodClient.ts (waits on
 * its FakeClock, or on a scaled-down Timing for timeouts): error classification, redirects and
 * retries of idempotent calls.
 */
import assert from 'node:assert/strict';
import { scaleTiming } from '../../src/core/timing';
import { RunpodClient } from '../../src/core/runpod/client';
import { runMessage, type ApiErrorKind } from '../../src/core/runpod/apiErrors';
import {
  clients,
  startServer,
  json,
  problem,
  route,
  SpyClock,
  realDelay,
  waitFor,
  drive,
  API_KEY,
  fakeTiming,
  makeClient,
  timeoutCountingClock,
  apiError,
  pod,
  body,
} from '../helpers/runpodClient';

describe('RunpodClient: error classification (non-create calls keep Runpod text)', () => {
  const cases: [number, string, ApiErrorKind][] = [
    // Capacity is a create's answer only: a list's 400 is our request's fault.
    [
      400,
      'There are no longer any instances available with the requested specifications.',
      'rejected',
    ],
    [400, 'cpu and gpu are mutually exclusive', 'rejected'],
    [402, 'insufficient balance', 'no_credits'],
    [403, 'access denied', 'forbidden'],
    [404, 'route exists, resource does not', 'rejected'],
    [409, 'pod belongs to a cluster', 'rejected'],
    [418, 'teapot', 'rejected'],
    [422, 'Request validation failed.', 'rejected'],
  ];
  for (const [status, detail, kind] of cases) {
    it(`${status} "${detail.slice(0, 30)}" → ${kind}, once`, async () => {
      const server = await startServer((_hit, res) => problem(res, status, detail));
      const { client } = makeClient(server);
      // A list call: a 404 here is not "gone".
      const error = await apiError(client.listPods(), kind);
      assert.equal(error.status, status);
      assert.ok(error.message.includes(detail), error.message);
      assert.equal(runMessage(error), `Runpod answered ${status}`);
      assert.equal(server.hits.length, 1, 'a 4xx other than 408/429 is never retried');
    });
  }

  it('422 keeps the errors[] list', async () => {
    const server = await startServer((_hit, res) =>
      problem(res, 422, 'Request validation failed.', {
        errors: ["$: additional properties 'bogus' not allowed", '$.gpu.count: must be >= 1'],
      }),
    );
    const { client } = makeClient(server);
    const error = await apiError(client.listTemplates(), 'rejected');
    assert.match(error.message, /additional properties 'bogus' not allowed; \$\.gpu\.count/);
    assert.match(error.message, /invalid request, please report/);
  });

  it('401 is the fixed hint naming the key variable and the command, not Runpod text', async () => {
    const server = await startServer((_hit, res) => problem(res, 401, 'missing bearer token XYZ'));
    const { client } = makeClient(server);
    const error = await apiError(client.listPods(), 'unauthorized');
    assert.match(error.message, /OVERBRAINER_RUNPOD__API_KEY/);
    assert.match(error.message, /"Set Runpod API Key"/);
    assert.ok(!error.message.includes('XYZ'));
    assert.equal(error.status, 401);
  });

  it('a plain-text error body is kept, on one line, capped to 300 characters', async () => {
    const server = await startServer((_hit, res) => {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end('line one\nline\ttwo ' + 'x'.repeat(1000));
    });
    const { client } = makeClient(server);
    const error = await apiError(client.listPods(), 'rejected');
    const text = error.message.replace(/^Runpod answered 400: /, '').replace(/ \(invalid.*$/, '');
    assert.ok(text.startsWith('line one line two x'), text);
    assert.equal(Array.from(text).length, 300);
    assert.ok(!/[\n\t]/.test(error.message));
  });

  const afterRetries: [number, ApiErrorKind][] = [
    [500, 'server'],
    [502, 'server'],
    [503, 'server'],
    [429, 'rate_limited'],
    [408, 'transport'],
  ];
  for (const [status, kind] of afterRetries) {
    it(`${status} → ${kind} once the retries are spent`, async () => {
      const server = await startServer((_hit, res) => problem(res, status, `failed ${status}`));
      const { client, clock } = makeClient(server);
      const error = await drive(clock, apiError(client.listPods(), kind));
      assert.equal(error.status, status);
      assert.equal(server.hits.length, 6, 'first try and 5 retries');
    });
  }

  it('a 2xx body that is not JSON is a decode error with position only, never content', async () => {
    const server = await startServer((_hit, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{\n  "pods": [\n    SECRET_LOOKING_TEXT\n  ]\n}');
    });
    const { client } = makeClient(server);
    const error = await apiError(client.listPods(), 'decode');
    assert.match(error.message, /syntax error at line 3 column 5/);
    assert.ok(!error.message.includes('SECRET'));
    assert.equal(error.status, undefined);
  });

  it('a truncated 2xx body is an unexpected end', async () => {
    const server = await startServer((_hit, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"pods": [');
    });
    const { client } = makeClient(server);
    const error = await apiError(client.listPods(), 'decode');
    assert.match(error.message, /unexpected end at line 1 column 11/);
  });

  it('a 2xx of the wrong shape names the path of the first problem', async () => {
    const server = await startServer((_hit, res) => json(res, 200, { pods: [pod({ name: 7 })] }));
    const { client } = makeClient(server);
    const error = await apiError(client.listPods(), 'decode');
    assert.match(error.message, /data: pods\.0\.name invalid_type/);
  });
});

describe('RunpodClient: redirects are never followed', () => {
  for (const status of [301, 302, 303, 307, 308]) {
    it(`${status} is a redirect error, and the target is never asked`, async () => {
      const server = await startServer((hit, res) => {
        if (route(hit) === '/elsewhere') return json(res, 200, pod());
        res.writeHead(status, { location: '/elsewhere' });
        res.end();
      });
      const { client } = makeClient(server);
      const error = await apiError(client.getPod('abc123'), 'redirect');
      assert.equal(error.status, status);
      assert.match(error.message, /OVERBRAINER_RUNPOD__BASE_URL/);
      await apiError(client.createPod(body()), 'redirect');
      assert.deepEqual(
        server.hits.map((h) => route(h)),
        ['/v2/pods/abc123', '/v2/pods'],
      );
    });
  }
});

describe('RunpodClient: retries of idempotent calls', () => {
  it('retries a 5xx five times with doubling backoff from 1 s, jittered ×0.5–1', async () => {
    const server = await startServer((_hit, res) => problem(res, 503, 'busy'));
    const high = makeClient(server, { random: () => 0.999999 });
    await drive(high.clock, apiError(high.client.listPods(), 'server'));
    assert.deepEqual(high.clock.backoffs, [1000, 2000, 4000, 8000, 16000]);
    const low = makeClient(server, { random: () => 0 });
    await drive(low.clock, apiError(low.client.listPods(), 'server'));
    assert.deepEqual(low.clock.backoffs, [500, 1000, 2000, 4000, 8000]);
    assert.equal(server.hits.length, 12);
    assert.ok(high.logs.some((l) => l.level === 'warn' && /retry 1\/5/.test(l.message)));
  });

  it('caps the backoff at retryMaxMs', async () => {
    const server = await startServer((_hit, res) => problem(res, 500, 'boom'));
    const { client, clock } = makeClient(server, { timing: fakeTiming({ retryMaxMs: 3000 }) });
    await drive(clock, apiError(client.getPod('abc123'), 'server'));
    assert.deepEqual(clock.backoffs, [1000, 2000, 3000, 3000, 3000]);
  });

  it('recovers when a retry succeeds', async () => {
    let n = 0;
    const server = await startServer((_hit, res) =>
      ++n < 3 ? problem(res, 502, 'bad gateway') : json(res, 200, pod()),
    );
    const { client, clock } = makeClient(server);
    const got = await drive(clock, client.getPod('abc123'));
    assert.equal(got?.id, '7h9k2m4n6p');
    assert.equal(server.hits.length, 3);
  });

  it('honours Retry-After in seconds: no retry before it has passed', async () => {
    let n = 0;
    const server = await startServer((_hit, res) =>
      ++n === 1
        ? problem(res, 429, 'rate limit exceeded for the minute window', {}, { 'retry-after': '7' })
        : json(res, 200, { pods: [] }),
    );
    const { client, clock } = makeClient(server);
    const listing = client.listPods();
    await waitFor(() => clock.pendingBackoff() !== undefined, 'the retry wait');
    assert.equal(clock.pendingBackoff()?.ms, 7000);
    await clock.advanceMs(6999);
    await realDelay(20);
    assert.equal(server.hits.length, 1, 'not retried before Retry-After');
    await clock.advanceMs(1);
    assert.deepEqual(await listing, []);
    assert.equal(server.hits.length, 2);
  });

  it('honours Retry-After as an HTTP-date, measured on the injected clock', async () => {
    const clock = new SpyClock();
    let n = 0;
    const server = await startServer((_hit, res) =>
      ++n === 1
        ? problem(
            res,
            503,
            'maintenance',
            {},
            {
              'retry-after': new Date(clock.nowMs() + 12_000).toUTCString(),
            },
          )
        : json(res, 200, { pods: [] }),
    );
    const { client } = makeClient(server, { clock });
    await drive(clock, client.listPods());
    assert.deepEqual(clock.backoffs, [12_000]);
  });

  it('caps Retry-After at 600 s and reports it on the final error', async () => {
    const server = await startServer((_hit, res) =>
      problem(res, 429, 'slow down', {}, { 'retry-after': '100000' }),
    );
    const { client, clock } = makeClient(server);
    const error = await drive(clock, apiError(client.listPods(), 'rate_limited'));
    assert.deepEqual(clock.backoffs, [600_000, 600_000, 600_000, 600_000, 600_000]);
    assert.equal(error.retryAfterMs, 600_000);
  });

  it('retries a connection reset, then gives a transport error', async () => {
    const server = await startServer((_hit, _res, req) => req.socket.destroy());
    const { client, clock } = makeClient(server);
    const error = await drive(clock, apiError(client.getPod('abc123'), 'transport'));
    assert.equal(server.hits.length, 6);
    assert.equal(error.status, undefined);
    assert.equal(runMessage(error), error.message);
    assert.match(error.message, /could not reach the Runpod API/);
    assert.ok(error.message.includes(`at ${client.baseUrl}: `), error.message);
  });

  it('retries a refused connection, then gives a transport error', async () => {
    const server = await startServer((_hit, res) => json(res, 200, {}));
    const baseUrl = server.baseUrl;
    await server.close();
    const clock = new SpyClock();
    const client = new RunpodClient({ baseUrl, apiKey: API_KEY, clock, timing: fakeTiming() });
    clients.push(client);
    const error = await drive(clock, apiError(client.listPods(), 'transport'));
    assert.match(error.message, /connection refused/);
    assert.equal(clock.backoffs.length, 5);
  });

  it('retries a DELETE on 5xx', async () => {
    let n = 0;
    const server = await startServer((_hit, res) => {
      if (++n < 4) return problem(res, 500, 'boom');
      res.writeHead(204);
      res.end();
    });
    const { client, clock } = makeClient(server);
    assert.equal(await drive(clock, client.deletePod('abc123')), true);
    assert.equal(server.hits.length, 4);
  });

  it('never retries a POST action on 5xx or a reset', async () => {
    const server = await startServer((hit, res, req) =>
      hit.url.endsWith('/action') && server.hits.length === 1
        ? problem(res, 500, 'boom')
        : req.socket.destroy(),
    );
    const { client, clock } = makeClient(server);
    await drive(clock, apiError(client.podAction('abc123', 'stop'), 'server'));
    await drive(clock, apiError(client.podAction('abc123', 'stop'), 'transport'));
    assert.equal(server.hits.length, 2);
    assert.deepEqual(clock.backoffs, []);
  });

  it('times out a stalled answer on the request timeout, and retries it', async () => {
    const server = await startServer(() => undefined); // never answers
    const timing = scaleTiming(1, { requestTimeoutMs: 80, retries: 1, retryBaseMs: 1 });
    const { clock, timeouts } = timeoutCountingClock(80);
    const { client } = makeClient(server, { clock, timing });
    const error = await apiError(client.listPods(), 'transport');
    assert.match(error.message, /no answer within 80 ms/);
    assert.equal(timeouts.length, 2, 'one attempt and one retry, each bounded by the timeout');
    assert.ok(server.hits.length >= 1 && server.hits.length <= 2, `${server.hits.length} requests`);
  });
});
