/**
 * The Runpod client against the scripted loopback server of test/helpers/runpodClient.ts (waits on
 * its FakeClock, or on a scaled-down Timing for timeouts): createPod never sent twice blindly,
 * quota waits, abort, the API key never leaks.
 */
import assert from 'node:assert/strict';
import { systemClock, isAbortError } from '../../src/core/clock';
import { scaleTiming } from '../../src/core/timing';
import type { CreatePodBody } from '../../src/core/runpod/api';
import { rateLimitResetMs, RunpodClient } from '../../src/core/runpod/client';
import { CREATE_MESSAGES, runMessage, type ApiErrorKind } from '../../src/core/runpod/apiErrors';
import {
  clients,
  startServer,
  json,
  problem,
  realDelay,
  waitFor,
  drive,
  API_KEY,
  fakeTiming,
  Made,
  makeClient,
  timeoutCountingClock,
  rejection,
  apiError,
  pod,
  body,
} from '../helpers/runpodClient';

describe('RunpodClient: createPod is never sent twice blindly', () => {
  it('creates: posts the body once and reads the pod', async () => {
    const server = await startServer((_hit, res) =>
      json(res, 201, pod({ status: 'PROVISIONING', env: { OVERBRAINER_RUN_ID: 'run1' } })),
    );
    const { client } = makeClient(server);
    const created = await client.createPod(body());
    assert.equal(created.status, 'PROVISIONING');
    assert.equal(created.runMarker, 'run1');
    assert.equal(server.hits.length, 1);
    assert.equal(server.hits[0]?.method, 'POST');
    assert.equal(server.hits[0]?.url, '/v2/pods');
    assert.deepEqual(JSON.parse(server.hits[0]?.body ?? ''), body());
  });

  const fixed: [number, string, ApiErrorKind, string][] = [
    [
      400,
      'There are no longer any instances available with the requested specifications.',
      'capacity',
      CREATE_MESSAGES.capacity,
    ],
    // The document: a 400 to a create is "this GPU and data center could not be placed", whatever
    // its detail says (capacity has no machine-readable code): try the next candidate.
    [400, 'SERVER-TEXT cannot combine', 'capacity', CREATE_MESSAGES.capacity],
    [400, 'request could not be processed', 'capacity', CREATE_MESSAGES.capacity],
    [402, 'SERVER-TEXT balance', 'no_credits', CREATE_MESSAGES.noCredits],
    [403, 'SERVER-TEXT denied', 'forbidden', CREATE_MESSAGES.forbidden],
    [404, 'SERVER-TEXT template not found', 'rejected', CREATE_MESSAGES.rejected],
    [408, 'SERVER-TEXT timeout', 'ambiguous', CREATE_MESSAGES.timeout408],
    [422, 'SERVER-TEXT validation', 'rejected', CREATE_MESSAGES.rejected],
    [500, 'SERVER-TEXT boom', 'ambiguous', CREATE_MESSAGES.server],
    [502, 'SERVER-TEXT gateway', 'ambiguous', CREATE_MESSAGES.server],
    [503, 'SERVER-TEXT unavailable', 'ambiguous', CREATE_MESSAGES.server],
  ];
  for (const [status, detail, kind, message] of fixed) {
    it(`${status} → ${kind} with a fixed message, sent once`, async () => {
      const server = await startServer((_hit, res) =>
        problem(res, status, detail, {}, { 'retry-after': '1' }),
      );
      const { client, clock } = makeClient(server);
      const error = await drive(clock, apiError(client.createPod(body()), kind));
      assert.equal(error.message, message);
      assert.ok(!error.message.includes('SERVER-TEXT'));
      assert.equal(error.status, status);
      assert.equal(runMessage(error), `Runpod answered ${status}`);
      assert.equal(server.hits.length, 1);
      assert.deepEqual(clock.backoffs, []);
    });
  }

  it("a 400 that is not Runpod's problem document (a proxy page) is rejected, not capacity", async () => {
    const server = await startServer((_hit, res) => {
      res.writeHead(400, { 'content-type': 'text/html' });
      res.end('<html>Bad Request</html>');
    });
    const { client } = makeClient(server);
    const error = await apiError(client.createPod(body()), 'rejected');
    assert.equal(error.message, CREATE_MESSAGES.rejected);
    assert.equal(server.hits.length, 1);
  });

  it('a 5xx with Retry-After is still never re-sent (ambiguous: reconcile first)', async () => {
    const server = await startServer((_hit, res) =>
      problem(res, 503, 'busy', {}, { 'retry-after': '3', ratelimit: '"minute";r=0;t=3' }),
    );
    const { client, clock } = makeClient(server);
    await drive(clock, apiError(client.createPod(body()), 'ambiguous'));
    assert.equal(server.hits.length, 1);
  });

  it('401 on create is the fixed key hint', async () => {
    const server = await startServer((_hit, res) => problem(res, 401, 'bad'));
    const { client } = makeClient(server);
    const error = await apiError(client.createPod(body()), 'unauthorized');
    assert.match(error.message, /OVERBRAINER_RUNPOD__API_KEY/);
  });

  it('a connection reset is ambiguous, sent once', async () => {
    const server = await startServer((_hit, _res, req) => req.socket.destroy());
    const { client, clock } = makeClient(server);
    const error = await drive(clock, apiError(client.createPod(body()), 'ambiguous'));
    assert.ok(error.message.startsWith(CREATE_MESSAGES.transport));
    assert.equal(error.status, undefined);
    assert.equal(server.hits.length, 1);
  });

  it('a reset after the headers (body cut short) is ambiguous, sent once', async () => {
    const server = await startServer((_hit, res) => {
      res.writeHead(201, { 'content-type': 'application/json', 'content-length': '5000' });
      res.write('{"id":"abc123",');
      setTimeout(() => res.socket?.destroy(), 10);
    });
    const { client, clock } = makeClient(server);
    await drive(clock, apiError(client.createPod(body()), 'ambiguous'));
    assert.equal(server.hits.length, 1);
  });

  it('a timeout is ambiguous, sent once', async () => {
    const server = await startServer(() => undefined);
    const timing = scaleTiming(1, { createTimeoutMs: 80, retryBaseMs: 1 });
    const { clock, timeouts } = timeoutCountingClock(80);
    const { client } = makeClient(server, { clock, timing });
    const error = await apiError(client.createPod(body()), 'ambiguous');
    assert.match(error.message, /no answer within 80 ms/);
    assert.equal(timeouts.length, 1, 'one attempt: a create is never sent again blindly');
    assert.ok(server.hits.length <= 1, `${server.hits.length} creates reached the server`);
  });

  it('an unreadable 201 is ambiguous: the pod may exist', async () => {
    const server = await startServer((_hit, res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end('<html>created</html>');
    });
    const { client } = makeClient(server);
    const error = await apiError(client.createPod(body()), 'ambiguous');
    assert.equal(error.message, CREATE_MESSAGES.unreadable);
    assert.equal(error.status, undefined);
    assert.equal(server.hits.length, 1);
  });

  it('a 201 without a valid pod ID is ambiguous', async () => {
    const server = await startServer((_hit, res) => json(res, 201, pod({ id: '' })));
    const { client } = makeClient(server);
    await apiError(client.createPod(body()), 'ambiguous');
  });

  it('a 429 is never re-sent by the client: rate_limited with the wait Runpod asked for (its caller reconciles first)', async () => {
    const server = await startServer((_hit, res) =>
      problem(res, 429, 'slow down', {}, { 'retry-after': '3' }),
    );
    const { client, clock } = makeClient(server);
    const error = await drive(clock, apiError(client.createPod(body()), 'rate_limited'));
    assert.equal(error.message, CREATE_MESSAGES.rateLimited);
    assert.equal(error.retryAfterMs, 3000);
    assert.deepEqual(clock.backoffs, []);
    assert.equal(server.hits.length, 1);
  });

  it('a 429 without Retry-After carries the wait its RateLimit headers say (both drafts), and the next call waits for it', async () => {
    const answers: Record<string, string>[] = [
      { ratelimit: '"default";r=0;t=7', 'ratelimit-policy': '"default";q=100;w=60' },
      { ratelimit: 'limit=100, remaining=0, reset=4' },
      { 'ratelimit-limit': '100', 'ratelimit-remaining': '0', 'ratelimit-reset': '5' },
    ];
    let n = 0;
    const server = await startServer((_hit, res) =>
      n < answers.length ? problem(res, 429, 'slow down', {}, answers[n++]) : json(res, 201, pod()),
    );
    const { client, clock } = makeClient(server);
    const waits: (number | undefined)[] = [];
    for (let i = 0; i < answers.length; i++) {
      const error = await drive(clock, apiError(client.createPod(body()), 'rate_limited'));
      waits.push(error.retryAfterMs);
    }
    assert.deepEqual(waits, [7000, 4000, 5000]);
    const created = await drive(clock, client.createPod(body()));
    assert.equal(created.id, '7h9k2m4n6p');
    // Each create after a spent quota waited for its reset before it was sent.
    assert.deepEqual(clock.backoffs, [7000, 4000, 5000]);
    assert.equal(server.hits.length, 4);
    assert.deepEqual(rateLimitResetMs({ ratelimit: '"a";r=5;t=9' }), undefined, 'quota left');
  });

  it('refuses a body with a field the API does not know, without sending it', async () => {
    const server = await startServer((_hit, res) => json(res, 201, pod()));
    const { client } = makeClient(server);
    const bad = { ...body(), args: 'sleep 1' } as unknown as CreatePodBody;
    await apiError(client.createPod(bad), 'rejected');
    assert.equal(server.hits.length, 0);
  });

  it('an abort in flight is ambiguous and marked aborted; before sending it is an AbortError', async () => {
    const server = await startServer(() => undefined);
    const { client } = makeClient(server);
    const controller = new AbortController();
    const creating = client.createPod(body(), { signal: controller.signal });
    await waitFor(() => server.hits.length === 1, 'the create to arrive');
    controller.abort();
    const error = await apiError(creating, 'ambiguous');
    assert.equal(error.aborted, true);
    const early = await rejection(client.createPod(body(), { signal: AbortSignal.abort() }));
    assert.ok(isAbortError(early));
    assert.equal(server.hits.length, 1);
  });
});

describe('RunpodClient: a quota spent in a 2xx answer is waited out before the next call', () => {
  // Runpod sends RateLimit (remaining r, seconds to reset t, per window) on every answer, not only
  // on 429: when a window is spent, the next call waits for its reset instead of drawing a 429.
  const SPENT = { ratelimit: '"minute";r=0;t=12, "hour";r=2800;t=1812' };
  const POLICY = { 'ratelimit-policy': '"minute";q=60;w=60, "hour";q=3000;w=3600' };

  it('a GET after a 200 whose minute window is spent waits 12 s, then is sent once', async () => {
    const server = await startServer((_hit, res) =>
      json(res, 200, pod(), server.hits.length === 1 ? { ...SPENT, ...POLICY } : {}),
    );
    const { client, clock } = makeClient(server);
    await client.getPod('7h9k2m4n6p');
    assert.deepEqual(clock.backoffs, []);
    const second = client.getPod('7h9k2m4n6p');
    await waitFor(() => clock.pendingBackoff() !== undefined, 'the quota wait');
    assert.equal(server.hits.length, 1, 'nothing sent before the reset');
    await drive(clock, second);
    assert.deepEqual(clock.backoffs, [12_000]);
    assert.equal(server.hits.length, 2);
    // The reset passed: the next call goes at once.
    await client.getPod('7h9k2m4n6p');
    assert.deepEqual(clock.backoffs, [12_000]);
  });

  it('a create after a spent quota waits, and is sent exactly once', async () => {
    const server = await startServer((hit, res) =>
      hit.method === 'GET'
        ? json(res, 200, { pods: [] }, { ratelimit: 'limit=60, remaining=0, reset=5' })
        : json(res, 201, pod()),
    );
    const { client, clock } = makeClient(server);
    await client.listPods();
    const created = await drive(clock, client.createPod(body()));
    assert.equal(created.id, '7h9k2m4n6p');
    assert.deepEqual(clock.backoffs, [5000]);
    assert.equal(server.hits.filter((h) => h.method === 'POST').length, 1);
  });

  it('the wait is capped and aborts with the call', async () => {
    const server = await startServer((_hit, res) =>
      json(res, 200, pod(), { ratelimit: '"day";r=0;t=45012' }),
    );
    const { client, clock } = makeClient(server);
    await client.getPod('7h9k2m4n6p');
    const controller = new AbortController();
    const second = client.getPod('7h9k2m4n6p', { signal: controller.signal });
    await waitFor(() => clock.pendingBackoff() !== undefined, 'the quota wait');
    assert.equal(clock.pendingBackoff()?.ms, fakeTiming().retryAfterCapMs);
    controller.abort();
    assert.ok(isAbortError(await rejection(second)));
    assert.equal(server.hits.length, 1);
  });
});

describe('RunpodClient: abort', () => {
  it('an abort during a retry wait rejects with an AbortError and sends nothing more', async () => {
    const server = await startServer((_hit, res) => problem(res, 503, 'busy'));
    const { client, clock } = makeClient(server);
    const controller = new AbortController();
    const listing = client.listPods({ signal: controller.signal });
    await waitFor(() => clock.pendingBackoff() !== undefined, 'the retry wait');
    controller.abort();
    assert.ok(isAbortError(await rejection(listing)));
    await realDelay(20);
    assert.equal(server.hits.length, 1);
  });

  it('an abort in flight rejects a GET with an AbortError', async () => {
    const server = await startServer(() => undefined);
    const { client } = makeClient(server);
    const controller = new AbortController();
    const getting = client.getPod('abc123', { signal: controller.signal });
    await waitFor(() => server.hits.length === 1, 'the request');
    controller.abort();
    assert.ok(isAbortError(await rejection(getting)));
  });
});

describe('RunpodClient: the API key never leaks', () => {
  const windows = (secret: string): string[] =>
    Array.from({ length: secret.length - 15 }, (_, i) => secret.slice(i, i + 16));

  function assertClean(texts: string[], secret = API_KEY): void {
    for (const text of texts) {
      assert.ok(!text.includes(secret), `the secret appears in: ${text}`);
      for (const w of windows(secret)) {
        assert.ok(!text.includes(w), `a 16-character window of the secret appears in: ${text}`);
      }
    }
  }

  function exposed(error: unknown, logs: Made['logs']): string[] {
    const e = error as Error;
    return [
      e.message,
      String(e),
      e.stack ?? '',
      JSON.stringify(e),
      JSON.stringify(Object.values(e)),
      ...logs.map((l) => l.message),
    ];
  }

  /** The key, echoed by a server every way it might be. */
  const echoes: [string, (key: string) => string][] = [
    [
      'in detail',
      (key) => JSON.stringify({ title: 'Bad', status: 400, detail: `key ${key} refused` }),
    ],
    ['in title', (key) => JSON.stringify({ title: `Bearer ${key}`, status: 400 })],
    ['in errors[]', (key) => JSON.stringify({ status: 400, errors: [`$.auth: ${key}`] })],
    [
      'JSON-escaped',
      (key) =>
        `{"status":400,"detail":"${Array.from(key, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"}`,
    ],
    [
      'as a 16-character window',
      (key) => JSON.stringify({ status: 400, detail: `…${key.slice(7, 23)}…` }),
    ],
    [
      'split across a JSON escape',
      (key) =>
        `{"status":400,"detail":"${key.slice(0, 20)}\\u00${key.charCodeAt(20).toString(16)}${key.slice(21)}"}`,
    ],
    ['in a plain-text body', (key) => `Authorization: Bearer ${key}\n`],
  ];
  for (const [name, render] of echoes) {
    it(`redacts the key echoed ${name}`, async () => {
      const server = await startServer((hit, res) => {
        const key = String(hit.headers.authorization).replace(/^Bearer /, '');
        res.writeHead(400, { 'content-type': 'application/problem+json' });
        res.end(render(key));
      });
      const { client, logs } = makeClient(server);
      const error = await apiError(client.listPods(), 'rejected');
      assertClean(exposed(error, logs));
      assert.match(error.message, /\[redacted\]/);
      const created = await rejection(client.createPod(body()));
      assertClean(exposed(created, logs));
    });
  }

  it('redacts the key from retry logs and the final 5xx error', async () => {
    const server = await startServer((hit, res) =>
      problem(res, 503, `down for ${String(hit.headers.authorization)}`),
    );
    const { client, clock, logs } = makeClient(server);
    const error = await drive(clock, apiError(client.listPods(), 'server'));
    assert.ok(logs.length > 0);
    assertClean(exposed(error, logs));
  });

  it('keeps the key out of the client object itself', () => {
    const client = new RunpodClient({
      baseUrl: 'https://api.runpod.io/v2',
      apiKey: API_KEY,
      clock: systemClock,
      timing: fakeTiming(),
    });
    clients.push(client);
    assertClean([JSON.stringify(client), JSON.stringify(Object.values(client)), String(client)]);
  });

  it('redacts a secret value echoed back when storing it', async () => {
    const value = 'LS0tLS1CRUdJTiBPUEVOU1NIIFBSSVZBVEUgS0VZLS0tLS0K';
    const server = await startServer((hit, res) => {
      const sent = JSON.parse(hit.body) as { value: string };
      problem(res, 422, `value ${sent.value} too long`);
    });
    const { client, logs } = makeClient(server);
    const error = await apiError(
      client.createSecret('overbrainer_host_key_run1', value),
      'rejected',
    );
    assertClean(exposed(error, logs), value);
  });
});
