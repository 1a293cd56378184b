/**
 * The Runpod client against a real HTTP server on a free loopback port: a
 * scripted node:http server per test, so every status, header, reset and
 * stall is exactly what the test says. Waits run on a FakeClock (retries and
 * Retry-After are measured on it) or on a scaled-down Timing (timeouts).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { systemClock, isAbortError, type Clock } from '../../src/core/clock';
import { scaleTiming, type Timing } from '../../src/core/timing';
import { createPodBody, type CreatePodBody, type Pod } from '../../src/core/runpod/api';
import {
  CLIENT_VERSION,
  MAX_PAGES,
  rateLimitResetMs,
  RunpodClient,
  type RunpodLogLevel,
} from '../../src/core/runpod/client';
import {
  ApiError,
  CREATE_MESSAGES,
  RunpodConfigError,
  runMessage,
  type ApiErrorKind,
} from '../../src/core/runpod/errors';
import { FakeClock } from '../helpers/fakeClock';

// ---------------------------------------------------------------------------
// The document
// ---------------------------------------------------------------------------

function openapiPath(): string {
  // The repository's copy: a missing file must fail this suite, not send it elsewhere.
  return path.join(__dirname, '..', 'emulator', 'openapi-v2.json');
}
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the OpenAPI document is walked dynamically
const DOC: any = JSON.parse(fs.readFileSync(openapiPath(), 'utf8'));
/** The document's own example of a running pod (GET /v2/pods/{id} → 200). */
const EXAMPLE_POD: Record<string, unknown> =
  DOC.paths['/v2/pods/{id}'].get.responses['200'].content['application/json'].examples.pod.value;

// ---------------------------------------------------------------------------
// A scripted server
// ---------------------------------------------------------------------------

interface Hit {
  method: string;
  /** Path and query, relative to the server root (`/v2/pods?x=1`). */
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

type Handler = (hit: Hit, res: http.ServerResponse, req: http.IncomingMessage) => void;

interface Server {
  baseUrl: string;
  hits: Hit[];
  handle: Handler;
  close(): Promise<void>;
}

const servers: Server[] = [];
const clients: RunpodClient[] = [];

async function startServer(handle: Handler): Promise<Server> {
  const hits: Hit[] = [];
  const state: Server = {
    baseUrl: '',
    hits,
    handle,
    close: async () => undefined,
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const hit: Hit = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      hits.push(hit);
      state.handle(hit, res, req);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  state.baseUrl = `http://127.0.0.1:${port}/v2`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  servers.push(state);
  return state;
}

function json(res: http.ServerResponse, status: number, body: unknown, headers = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function problem(
  res: http.ServerResponse,
  status: number,
  detail: string,
  extra: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/problem+json', ...headers });
  res.end(
    JSON.stringify({ title: http.STATUS_CODES[status] ?? 'Error', status, detail, ...extra }),
  );
}

function route(hit: Hit): string {
  return hit.url.replace(/\?.*$/, '');
}

function query(hit: Hit): URLSearchParams {
  return new URL(hit.url, 'http://x').searchParams;
}

// ---------------------------------------------------------------------------
// Clocks and clients
// ---------------------------------------------------------------------------

/** Attempt timers in FakeClock tests: far beyond any backoff, so advancing never fires them. */
const TIMER_MS = 1_000_000_000;

/** A FakeClock that records every wait it is asked for. */
class SpyClock extends FakeClock {
  readonly waits: { ms: number; dueMs: number; settled: boolean }[] = [];

  override sleep(ms: number, signal?: AbortSignal): Promise<void> {
    const entry = { ms, dueMs: this.nowMs() + ms, settled: false };
    this.waits.push(entry);
    const sleeping = super.sleep(ms, signal);
    sleeping.then(
      () => (entry.settled = true),
      () => (entry.settled = true),
    );
    return sleeping;
  }

  /** The retry waits asked for (attempt timers left out). */
  get backoffs(): number[] {
    return this.waits.filter((w) => w.ms < TIMER_MS).map((w) => w.ms);
  }

  pendingBackoff(): { ms: number; dueMs: number; settled: boolean } | undefined {
    return this.waits.find((w) => !w.settled && w.ms < TIMER_MS);
  }
}

const realDelay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function waitFor(condition: () => boolean, what: string, limitMs = 3000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > limitMs) throw new Error(`timed out waiting for ${what}`);
    await realDelay(2);
  }
}

/** Runs `promise` to its end, moving the clock over each retry wait as soon as it is asked for. */
async function drive<T>(clock: SpyClock, promise: Promise<T>): Promise<T> {
  let settled = false;
  const watched = promise.finally(() => {
    settled = true;
  });
  watched.catch(() => undefined);
  while (!settled) {
    await realDelay(1);
    const next = clock.pendingBackoff();
    if (next) await clock.advanceMs(Math.max(0, next.dueMs - clock.nowMs()));
  }
  return watched;
}

const API_KEY = 'rpa_TESTKEY0123456789ABCDEFGHIJKLMNOPQRSTUV';

/** FakeClock timing: production retry rules, attempt timers that never fire. */
function fakeTiming(overrides: Partial<Timing> = {}): Timing {
  return scaleTiming(1, {
    requestTimeoutMs: TIMER_MS,
    createTimeoutMs: TIMER_MS + 1,
    ...overrides,
  });
}

interface Made {
  client: RunpodClient;
  clock: SpyClock;
  logs: { level: RunpodLogLevel; message: string }[];
}

function makeClient(
  server: Server,
  options: { timing?: Timing; clock?: Clock; random?: () => number; version?: string } = {},
): Made {
  const clock = new SpyClock();
  const logs: Made['logs'] = [];
  const client = new RunpodClient({
    baseUrl: server.baseUrl,
    apiKey: API_KEY,
    clock: options.clock ?? clock,
    timing: options.timing ?? fakeTiming(),
    random: options.random ?? (() => 0.999999),
    log: (level, message) => logs.push({ level, message }),
    ...(options.version ? { version: options.version } : {}),
  });
  clients.push(client);
  return { client, clock, logs };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('expected a rejection');
}

async function apiError(promise: Promise<unknown>, kind: ApiErrorKind): Promise<ApiError> {
  const error = await rejection(promise);
  assert.ok(error instanceof ApiError, `expected an ApiError, got ${String(error)}`);
  assert.equal(error.kind, kind, `kind of "${error.message}"`);
  return error;
}

function pod(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...EXAMPLE_POD, ...overrides };
}

function body(overrides: Partial<Parameters<typeof createPodBody>[0]> = {}): CreatePodBody {
  return createPodBody({
    name: 'overbrainer-run1-1',
    image: 'axolotlai/axolotl-cloud-term:0.19.0',
    gpuTypeId: 'NVIDIA GeForce RTX 4090',
    gpuCount: 1,
    containerDiskGb: 50,
    env: { OVERBRAINER_RUN_ID: 'run1', OVERBRAINER_WORKDIR: '/workspace/overbrainer' },
    cmd: ['bash', '-c', 'exec sleep infinity'],
    ...overrides,
  });
}

afterEach(async () => {
  for (const client of clients.splice(0)) client.dispose();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

// ---------------------------------------------------------------------------

describe('RunpodClient: requests', () => {
  it('sends the bearer key, its User-Agent and JSON, to the paths under the base URL', async () => {
    const server = await startServer((_hit, res) => json(res, 200, pod()));
    const { client } = makeClient(server);
    await client.getPod('7h9k2m4n6p');
    const hit = server.hits[0];
    assert.ok(hit);
    assert.equal(hit.method, 'GET');
    assert.equal(hit.url, '/v2/pods/7h9k2m4n6p');
    assert.equal(hit.headers.authorization, `Bearer ${API_KEY}`);
    assert.equal(hit.headers['user-agent'], `overbrainer-vscode/${CLIENT_VERSION}`);
    assert.match(String(hit.headers.accept), /application\/json/);
  });

  it('names the version it is given in the User-Agent', async () => {
    const server = await startServer((_hit, res) => json(res, 200, { pods: [] }));
    const { client } = makeClient(server, { version: '9.8.7' });
    await client.listPods();
    assert.equal(server.hits[0]?.headers['user-agent'], 'overbrainer-vscode/9.8.7');
  });

  it('refuses a key that cannot be a header value, naming the variable but not the key', () => {
    const error = (() => {
      try {
        new RunpodClient({
          baseUrl: 'https://api.runpod.io/v2',
          apiKey: 'abc\r\nX-Evil: 1',
          clock: systemClock,
          timing: fakeTiming(),
        });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    assert.ok(error instanceof RunpodConfigError);
    assert.equal(error.variable, 'OVERBRAINER_RUNPOD__API_KEY');
    assert.ok(!error.message.includes('X-Evil'));
  });

  it('refuses an http base URL that is not loopback before sending anything', () => {
    assert.throws(
      () =>
        new RunpodClient({
          baseUrl: 'http://api.runpod.io/v2',
          apiKey: API_KEY,
          clock: systemClock,
          timing: fakeTiming(),
        }),
      (e: unknown) =>
        e instanceof RunpodConfigError &&
        e.variable === 'OVERBRAINER_RUNPOD__BASE_URL' &&
        e.message.includes('OVERBRAINER_RUNPOD__BASE_URL'),
    );
  });
});

describe('RunpodClient: pods', () => {
  it("reads the document's example pod into the Pod shape, keeping nothing of its env", async () => {
    const server = await startServer((_hit, res) => json(res, 200, pod()));
    const { client } = makeClient(server);
    const got = await client.getPod('7h9k2m4n6p');
    const expected: Pod = {
      id: '7h9k2m4n6p',
      name: 'pytorch-training',
      status: 'RUNNING',
      costPerHourUsd: 0.44,
      dataCenterId: 'US-KS-2',
      gpu: { id: 'NVIDIA GeForce RTX 4090', count: 1 },
      sshDirect: { host: '195.26.233.3', port: 34446, username: 'root' },
      runMarker: null,
      createdAt: '2026-06-01T12:00:00Z',
    };
    assert.deepEqual(got, expected);
    assert.ok(!JSON.stringify(got).includes('llama-3'));
  });

  it('tolerates unknown fields and keeps an unknown status as sent; reads only the run marker of env', async () => {
    const server = await startServer((_hit, res) =>
      json(
        res,
        200,
        pod({
          status: 'HIBERNATING',
          brandNewField: { nested: [1, 2, 3] },
          ssh: { proxy: null, direct: null, extra: true },
          env: {
            OVERBRAINER_RUN_ID: 'proj_20260929-120000',
            OVERBRAINER_HOST_KEY: 'LS0tLS1CRUdJTi1QUklWQVRF',
          },
          gpu: { id: 'NVIDIA H100 80GB HBM3', count: 2, extra: 'x' },
        }),
      ),
    );
    const { client } = makeClient(server);
    const got = await client.getPod('7h9k2m4n6p');
    assert.ok(got);
    assert.equal(got.status, 'HIBERNATING');
    assert.equal(got.runMarker, 'proj_20260929-120000');
    assert.equal(got.sshDirect, null);
    assert.deepEqual(got.gpu, { id: 'NVIDIA H100 80GB HBM3', count: 2 });
    assert.ok(!JSON.stringify(got).includes('LS0tLS1'), 'the rest of env is not kept');
    assert.ok(!('brandNewField' in got));
  });

  it('refuses a pod whose ID could not be one (control characters), as an unreadable answer', async () => {
    const server = await startServer((_hit, res) => json(res, 200, pod({ id: 'a\u001b[2Jb' })));
    const { client } = makeClient(server);
    const error = await apiError(client.getPod('7h9k2m4n6p'), 'decode');
    assert.match(error.message, /data: id /);
  });

  it('never sends a malformed pod ID', async () => {
    const server = await startServer((_hit, res) => json(res, 200, pod()));
    const { client } = makeClient(server);
    await apiError(client.getPod('..'), 'rejected');
    await apiError(client.deletePod('abc\nx'), 'rejected');
    await apiError(client.podAction('', 'terminate'), 'rejected');
    assert.equal(server.hits.length, 0);
  });

  describe('404: gone only when it is Runpod that says so', () => {
    const runpodShaped: [string, string][] = [
      [
        'problem document',
        JSON.stringify({ title: 'Not Found', status: 404, detail: 'pod not found' }),
      ],
      ['numeric status only', JSON.stringify({ status: 404 })],
      ['detail only', JSON.stringify({ detail: 'no such pod' })],
      ['title only', JSON.stringify({ title: 'Not Found' })],
    ];
    for (const [name, text] of runpodShaped) {
      it(`getPod is null and deletePod false for a ${name}`, async () => {
        const server = await startServer((_hit, res) => {
          res.writeHead(404, { 'content-type': 'application/problem+json' });
          res.end(text);
        });
        const { client } = makeClient(server);
        assert.equal(await client.getPod('abc123'), null);
        assert.equal(await client.deletePod('abc123'), false);
        assert.equal(server.hits.length, 2, 'a 404 is not retried');
      });
    }

    const foreign: [string, string, string][] = [
      ['an HTML proxy page', 'text/html', '<html><body><h1>404 Not Found</h1>nginx</body></html>'],
      ['an empty body', 'text/plain', ''],
      ['JSON without status/title/detail', 'application/json', '{"message":"no route"}'],
      ['JSON with another status', 'application/json', '{"status":"404"}'],
      ['a JSON array', 'application/json', '[{"title":"x"}]'],
    ];
    for (const [name, type, text] of foreign) {
      it(`getPod and deletePod fail with not_found for ${name}`, async () => {
        const server = await startServer((_hit, res) => {
          res.writeHead(404, { 'content-type': type });
          res.end(text);
        });
        const { client } = makeClient(server);
        const error = await apiError(client.getPod('abc123'), 'not_found');
        assert.match(error.message, /OVERBRAINER_RUNPOD__BASE_URL/);
        assert.equal(runMessage(error), 'Runpod answered 404');
        await apiError(client.deletePod('abc123'), 'not_found');
      });
    }
  });

  it('deletePod is true for a 2xx', async () => {
    const server = await startServer((hit, res) => {
      assert.equal(hit.method, 'DELETE');
      res.writeHead(204);
      res.end();
    });
    const { client } = makeClient(server);
    assert.equal(await client.deletePod('abc123'), true);
    assert.equal(server.hits[0]?.url, '/v2/pods/abc123');
  });

  it('podAction posts {action} and reads the pod, or null on 204', async () => {
    const server = await startServer((hit, res) => {
      const { action } = JSON.parse(hit.body) as { action: string };
      if (action === 'terminate') {
        res.writeHead(204);
        res.end();
      } else {
        json(res, 200, pod({ status: 'EXITED' }));
      }
    });
    const { client } = makeClient(server);
    const stopped = await client.podAction('abc123', 'stop');
    assert.equal(stopped?.status, 'EXITED');
    assert.equal(await client.podAction('abc123', 'terminate'), null);
    assert.equal(server.hits[0]?.url, '/v2/pods/abc123/action');
    assert.equal(server.hits[0]?.headers['content-type'], 'application/json');
  });
});

describe('RunpodClient: list pagination', () => {
  it('follows every page and filters by run marker on this side', async () => {
    const pages: Record<string, unknown> = {
      '': {
        pods: [pod({ id: 'a1', env: { OVERBRAINER_RUN_ID: 'r1' } }), pod({ id: 'a2', env: {} })],
        pagination: { hasNextPage: true, nextCursor: 'c1' },
      },
      c1: {
        pods: [pod({ id: 'b1', env: { OVERBRAINER_RUN_ID: 'r2' } })],
        pagination: { hasNextPage: true, nextCursor: 'c2' },
      },
      c2: {
        pods: [pod({ id: 'c1', env: { OVERBRAINER_RUN_ID: 'r1' } })],
        pagination: { hasNextPage: false, nextCursor: null },
      },
    };
    const server = await startServer((hit, res) =>
      json(res, 200, pages[query(hit).get('cursor') ?? '']),
    );
    const { client } = makeClient(server);
    const all = await client.listPods();
    assert.deepEqual(
      all.map((p) => p.id),
      ['a1', 'a2', 'b1', 'c1'],
    );
    assert.deepEqual(
      server.hits.map((h) => h.url),
      ['/v2/pods', '/v2/pods?cursor=c1', '/v2/pods?cursor=c2'],
    );
    const marked = await client.listPods({ runMarker: 'r1' });
    assert.deepEqual(
      marked.map((p) => p.id),
      ['a1', 'c1'],
    );
  });

  it('takes pod IDs as the schema allows (any string): one unusual ID never breaks a list', async () => {
    const server = await startServer((hit, res) => {
      if (hit.url === '/v2/pods') {
        json(res, 200, { pods: [pod({ id: 'usual1' }), pod({ id: 'pod-7_x.y' })] });
      } else {
        json(res, 200, pod({ id: 'pod-7_x.y' }));
      }
    });
    const { client } = makeClient(server);
    assert.deepEqual(
      (await client.listPods()).map((p) => p.id),
      ['usual1', 'pod-7_x.y'],
    );
    // In a path, an ID is one encoded segment.
    assert.equal((await client.getPod('pod-7_x.y'))?.id, 'pod-7_x.y');
    await client.getPod('a/b c');
    assert.deepEqual(
      server.hits.slice(1).map((h) => h.url),
      ['/v2/pods/pod-7_x.y', '/v2/pods/a%2Fb%20c'],
    );
  });

  it('reads a list without pagination (the stored document) as one page', async () => {
    const server = await startServer((_hit, res) => json(res, 200, { pods: [pod()] }));
    const { client } = makeClient(server);
    assert.equal((await client.listPods()).length, 1);
    assert.equal(server.hits.length, 1);
  });

  it('stops with an error when a cursor comes back a second time', async () => {
    const server = await startServer((hit, res) => {
      const cursor = query(hit).get('cursor');
      const next = cursor === null ? 'c1' : cursor === 'c1' ? 'c2' : 'c1';
      json(res, 200, { pods: [pod()], pagination: { hasNextPage: true, nextCursor: next } });
    });
    const { client } = makeClient(server);
    const error = await apiError(client.listPods(), 'server');
    assert.match(error.message, /repeated a page cursor/);
    assert.equal(server.hits.length, 3);
  });

  it(`stops with an error after ${MAX_PAGES} pages`, async () => {
    let n = 0;
    const server = await startServer((_hit, res) =>
      json(res, 200, { pods: [], pagination: { hasNextPage: true, nextCursor: `c${++n}` } }),
    );
    const { client } = makeClient(server);
    const error = await apiError(client.listPods(), 'server');
    assert.match(error.message, /more than 100 pages/);
    assert.equal(server.hits.length, MAX_PAGES);
  });

  it('stops with an error when another page is announced without a cursor', async () => {
    const server = await startServer((_hit, res) =>
      json(res, 200, { pods: [], pagination: { hasNextPage: true } }),
    );
    const { client } = makeClient(server);
    await apiError(client.listPods(), 'server');
  });
});

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
    const { client } = makeClient(server, { clock: systemClock, timing });
    const error = await apiError(client.listPods(), 'transport');
    assert.match(error.message, /no answer within 80 ms/);
    assert.equal(server.hits.length, 2);
  });
});

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
    const { client } = makeClient(server, { clock: systemClock, timing });
    const error = await apiError(client.createPod(body()), 'ambiguous');
    assert.match(error.message, /no answer within 80 ms/);
    assert.equal(server.hits.length, 1);
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

describe('RunpodClient: catalog, volumes, templates', () => {
  it('lists GPU types with stock for a count on Secure, CUDA ≥ 13.0, using only documented parameters', async () => {
    const server = await startServer((_hit, res) =>
      json(res, 200, {
        gpus: [
          {
            id: 'NVIDIA GeForce RTX 4090',
            name: 'RTX 4090',
            pool: 'ADA_24',
            manufacturer: 'NVIDIA',
            memory: 24,
            secure: true,
            community: true,
            price: { secure: 0.69, community: 0.34 },
            maxCount: { secure: 8, community: 4 },
            availability: 'LOW',
            dataCenters: [
              { id: 'EU-RO-1', name: 'EU Romania 1', availability: 'LOW' },
              { id: 'US-TX-3', name: 'US Texas 3', availability: 'SPARSE' },
            ],
            cudaVersions: [{ version: '13.0', available: true }],
            futureField: 1,
          },
        ],
      }),
    );
    const { client } = makeClient(server);
    const gpus = await client.listGpuTypes({ count: 2, includeAvailability: true });
    assert.deepEqual(gpus, [
      {
        id: 'NVIDIA GeForce RTX 4090',
        displayName: 'RTX 4090',
        manufacturer: 'NVIDIA',
        memoryInGb: 24,
        secureCloud: true,
        communityCloud: true,
        securePricePerHourUsd: 0.69,
        communityPricePerHourUsd: 0.34,
        maxCountSecure: 8,
        availability: 'LOW',
        dataCenters: [
          { id: 'EU-RO-1', name: 'EU Romania 1', availability: 'LOW' },
          { id: 'US-TX-3', name: 'US Texas 3', availability: 'SPARSE' },
        ],
        cudaVersions: [{ version: '13.0', available: true }],
      },
    ]);
    const hit = server.hits[0];
    assert.ok(hit);
    assert.equal(route(hit), '/v2/catalog/gpus');
    const params = query(hit);
    assert.deepEqual(Object.fromEntries(params), {
      include: 'AVAILABILITY',
      product: 'POD',
      cloud: 'SECURE',
      count: '2',
      minCudaVersion: '13.0',
    });
    assertDocumentedQuery('/v2/catalog/gpus', params);
  });

  it('lists GPU types without availability parameters when stock is not asked for', async () => {
    const server = await startServer((_hit, res) => json(res, 200, { gpus: [] }));
    const { client } = makeClient(server);
    await client.listGpuTypes({ includeAvailability: false, count: 4 });
    assert.equal(server.hits[0]?.url, '/v2/catalog/gpus');
  });

  it('lists data centers with GPU stock', async () => {
    const server = await startServer((_hit, res) =>
      json(res, 200, {
        dataCenters: [
          {
            id: 'EU-RO-1',
            name: 'EU Romania 1',
            region: 'EUROPE',
            globalNetwork: false,
            networkVolumeTypes: ['STANDARD'],
            compliance: ['GDPR'],
            gpuAvailability: [{ id: 'NVIDIA A40', name: 'A40', availability: 'HIGH' }],
          },
        ],
      }),
    );
    const { client } = makeClient(server);
    const dcs = await client.listDataCenters();
    assert.deepEqual(dcs, [
      {
        id: 'EU-RO-1',
        name: 'EU Romania 1',
        region: 'EUROPE',
        globalNetwork: false,
        networkVolumeTypes: ['STANDARD'],
        gpuAvailability: [{ id: 'NVIDIA A40', name: 'A40', availability: 'HIGH' }],
      },
    ]);
    const hit = server.hits[0];
    assert.ok(hit);
    assert.equal(hit.url, '/v2/catalog/datacenters?include=GPU_AVAILABILITY');
    assertDocumentedQuery('/v2/catalog/datacenters', query(hit));
  });

  it('lists, reads and grows network volumes', async () => {
    const volume = {
      id: 'agv6w2qcg7',
      name: 'data',
      size: 50,
      dataCenter: 'EU-RO-1',
      type: 'STANDARD',
    };
    const server = await startServer((hit, res) => {
      if (hit.method === 'PATCH') {
        const { size } = JSON.parse(hit.body) as { size: number };
        return json(res, 200, { ...volume, size });
      }
      if (route(hit) === '/v2/network-volumes/gone') return problem(res, 404, 'not found');
      if (route(hit) === '/v2/network-volumes') return json(res, 200, { networkVolumes: [volume] });
      json(res, 200, volume);
    });
    const { client } = makeClient(server);
    const expected = {
      id: 'agv6w2qcg7',
      name: 'data',
      sizeGb: 50,
      dataCenterId: 'EU-RO-1',
      type: 'STANDARD',
    };
    assert.deepEqual(await client.listNetworkVolumes(), [expected]);
    assert.deepEqual(await client.getNetworkVolume('agv6w2qcg7'), expected);
    assert.equal(await client.getNetworkVolume('gone'), null);
    assert.equal((await client.resizeNetworkVolume('agv6w2qcg7', 80)).sizeGb, 80);
    assert.deepEqual(JSON.parse(server.hits[3]?.body ?? ''), { size: 80 });
    await apiError(client.resizeNetworkVolume('agv6w2qcg7', 5), 'rejected');
    assert.equal(server.hits.length, 4);
    assert.equal((await client.updateNetworkVolume('agv6w2qcg7', { size: 120 })).sizeGb, 120);
    assert.deepEqual(JSON.parse(server.hits[4]?.body ?? ''), { size: 120 });
    await apiError(client.updateNetworkVolume('agv6w2qcg7', {}), 'rejected');
    await apiError(client.updateNetworkVolume('agv6w2qcg7', { size: 5000 }), 'rejected');
    assert.equal(server.hits.length, 5);
  });

  it('lists pod templates: serverless ones dropped, duplicates once', async () => {
    const template = (id: string, serverless: boolean): Record<string, unknown> => ({
      id,
      name: `t-${id}`,
      image: 'img:1',
      args: '',
      disk: 20,
      mounts: {},
      ports: [],
      env: {},
      registry: null,
      serverless,
      public: false,
      category: 'NVIDIA',
      startSsh: false,
      startJupyter: false,
      allowedCudaVersions: [],
    });
    const server = await startServer((_hit, res) =>
      json(res, 200, {
        templates: [
          template('a', false),
          template('s', true),
          template('b', false),
          template('a', false),
        ],
      }),
    );
    const { client } = makeClient(server);
    const templates = await client.listTemplates();
    assert.deepEqual(
      templates.map((t) => t.id),
      ['a', 'b'],
    );
    assert.deepEqual(templates[0], {
      id: 'a',
      name: 't-a',
      image: 'img:1',
      isPublic: false,
      category: 'NVIDIA',
    });
  });
});

describe('RunpodClient: account secrets', () => {
  const secret = (id: string, name: string): Record<string, unknown> => ({
    id,
    name,
    description: null,
    createdAt: '2026-09-29T12:00:00Z',
  });

  it('finds a secret by exact name through ?name=', async () => {
    const server = await startServer((_hit, res) =>
      json(res, 200, {
        secrets: [
          secret('s1', 'overbrainer_host_key_run10'),
          secret('s2', 'overbrainer_host_key_run1'),
        ],
      }),
    );
    const { client } = makeClient(server);
    const found = await client.findSecret('overbrainer_host_key_run1');
    assert.equal(found?.id, 's2');
    assert.equal(server.hits[0]?.url, '/v2/account/secrets?name=overbrainer_host_key_run1');
    assert.equal(await client.findSecret('other'), null);
  });

  it('creates a secret with {name, value}', async () => {
    const server = await startServer((hit, res) => {
      const sent = JSON.parse(hit.body) as { name: string };
      json(res, 201, secret('s9', sent.name));
    });
    const { client } = makeClient(server);
    const created = await client.createSecret('overbrainer_host_key_run1', 'c2VjcmV0');
    assert.deepEqual(created, {
      id: 's9',
      name: 'overbrainer_host_key_run1',
      description: null,
      createdAt: '2026-09-29T12:00:00Z',
    });
    assert.deepEqual(JSON.parse(server.hits[0]?.body ?? ''), {
      name: 'overbrainer_host_key_run1',
      value: 'c2VjcmV0',
    });
  });

  it('on 409 finds the existing secret by name and replaces its value', async () => {
    const server = await startServer((hit, res) => {
      if (hit.method === 'POST') return problem(res, 409, 'secret name already exists');
      if (hit.method === 'GET')
        return json(res, 200, { secrets: [secret('s7', 'overbrainer_host_key_run1')] });
      json(res, 200, secret('s7', 'overbrainer_host_key_run1'));
    });
    const { client } = makeClient(server);
    const stored = await client.createSecret('overbrainer_host_key_run1', 'bmV3');
    assert.equal(stored.id, 's7');
    assert.deepEqual(
      server.hits.map((h) => `${h.method} ${h.url}`),
      [
        'POST /v2/account/secrets',
        'GET /v2/account/secrets?name=overbrainer_host_key_run1',
        'PATCH /v2/account/secrets/s7',
      ],
    );
    assert.deepEqual(JSON.parse(server.hits[2]?.body ?? ''), { value: 'bmV3' });
  });

  it('a 403 on create is forbidden (the key may not manage secrets)', async () => {
    const server = await startServer((_hit, res) => problem(res, 403, 'access denied'));
    const { client } = makeClient(server);
    await apiError(client.createSecret('overbrainer_host_key_run1', 'eA=='), 'forbidden');
  });

  it('refuses names Runpod refuses, without sending', async () => {
    const server = await startServer((_hit, res) => json(res, 201, secret('x', 'x')));
    const { client } = makeClient(server);
    await apiError(client.createSecret('RUNPOD_mine', 'v'), 'rejected');
    await apiError(client.createSecret('1abc', 'v'), 'rejected');
    await apiError(client.createSecret('a b', 'v'), 'rejected');
    await apiError(client.createSecret('ok', ''), 'rejected');
    assert.equal(server.hits.length, 0);
  });

  it('deletes a secret: true, or false when Runpod says it is gone', async () => {
    let n = 0;
    const server = await startServer((_hit, res) => {
      if (++n === 1) {
        res.writeHead(204);
        return res.end();
      }
      problem(res, 404, 'secret not found');
    });
    const { client } = makeClient(server);
    assert.equal(await client.deleteSecret('s7'), true);
    assert.equal(await client.deleteSecret('s7'), false);
    assert.deepEqual(
      server.hits.map((h) => `${h.method} ${h.url}`),
      ['DELETE /v2/account/secrets/s7', 'DELETE /v2/account/secrets/s7'],
    );
  });
});

describe('RunpodClient: request bodies match openapi-v2.json', () => {
  function validator(schemaName: string, allowCmd: boolean) {
    const doc = structuredClone(DOC);
    if (allowCmd) {
      // The one extension (api.ts): `cmd`, an array of strings, evaluated at
      // the level of CreatePodRequest's `unevaluatedProperties: false`.
      doc.components.schemas.CreatePodRequest.properties = {
        cmd: { type: 'array', items: { type: 'string' } },
      };
    }
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema(doc, 'openapi.json');
    const validate = ajv.getSchema(`openapi.json#/components/schemas/${schemaName}`);
    assert.ok(validate, schemaName);
    return validate;
  }

  async function sentBodies(send: (client: RunpodClient) => Promise<unknown>): Promise<unknown[]> {
    const server = await startServer((hit, res) =>
      hit.url.endsWith('/action') ? json(res, 200, pod()) : json(res, 201, pod()),
    );
    const { client } = makeClient(server);
    await send(client);
    return server.hits.map((h) => JSON.parse(h.body) as unknown);
  }

  it('the create bodies the client sends are CreatePodRequest plus cmd', async () => {
    const validate = validator('CreatePodRequest', true);
    const strict = validator('CreatePodRequest', false);
    const sent = await sentBodies(async (client) => {
      await client.createPod(body());
      await client.createPod(
        body({ dataCenterIds: ['EU-RO-1'], networkVolumeId: 'agv6w2qcg7', gpuCount: 2 }),
      );
    });
    assert.equal(sent.length, 2);
    for (const b of sent) {
      assert.ok(validate(b), JSON.stringify(validate.errors));
      // Without the extension the document refuses it: cmd is the only deviation.
      assert.equal(strict(b), false);
      const withoutCmd = { ...(b as Record<string, unknown>) };
      delete withoutCmd.cmd;
      assert.ok(strict(withoutCmd), JSON.stringify(strict.errors));
    }
    const withVolume = sent[1] as Record<string, unknown>;
    assert.deepEqual(withVolume.mounts, {
      network: [{ volumeId: 'agv6w2qcg7', path: '/workspace/data' }],
    });
    assert.deepEqual(withVolume.dataCenterIds, ['EU-RO-1']);
    // The validator can fail: an unknown field is refused.
    assert.equal(validate({ ...(sent[0] as object), bogus: 1 }), false);
  });

  it('the pod action body is a PodActionRequest', async () => {
    const validate = validator('PodActionRequest', false);
    const sent = await sentBodies((client) => client.podAction('abc123', 'terminate'));
    assert.ok(validate(sent[0]), JSON.stringify(validate.errors));
  });

  it('the network volume resize body is an UpdateNetworkVolumeRequest', async () => {
    const validate = validator('UpdateNetworkVolumeRequest', false);
    const server = await startServer((_hit, res) =>
      json(res, 200, { id: 'v', name: 'v', size: 60, dataCenter: 'EU-RO-1', type: 'STANDARD' }),
    );
    const { client } = makeClient(server);
    await client.resizeNetworkVolume('v', 60);
    assert.ok(validate(JSON.parse(server.hits[0]?.body ?? '')), JSON.stringify(validate.errors));
  });

  it("the document's example pod is a valid Pod, so the fixtures above are realistic", () => {
    const validate = validator('Pod', false);
    assert.ok(validate(EXAMPLE_POD), JSON.stringify(validate.errors));
  });
});

/** Every query parameter sent is one the document defines for `path`'s GET. */
function assertDocumentedQuery(pathName: string, params: URLSearchParams): void {
  const operation = DOC.paths[pathName].get;
  const names = new Set<string>(
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- OpenAPI parameters, resolved by hand
    (operation.parameters ?? []).map((p: any) => {
      if (p.$ref) return DOC.components.parameters[String(p.$ref).split('/').pop() ?? ''].name;
      return p.name;
    }),
  );
  for (const name of params.keys()) {
    assert.ok(names.has(name), `${name} is not a documented parameter of GET ${pathName}`);
  }
}
