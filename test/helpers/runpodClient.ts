/**
 * The scripted Runpod API the client unit tests run against: a node:http server per test on a
 * free loopback port (every status, header, reset and stall is what the test says), the
 * document's example pod, a FakeClock that records the waits asked for, and a client made on them.
 * What a test made here is closed after it (one `afterEach` for every file that imports this).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { systemClock, type Clock } from '../../src/core/clock';
import { scaleTiming, type Timing } from '../../src/core/timing';
import { createPodBody, type CreatePodBody } from '../../src/core/runpod/api';
import { RunpodClient, type RunpodLogLevel } from '../../src/core/runpod/client';
import { ApiError, type ApiErrorKind } from '../../src/core/runpod/apiErrors';
import { FakeClock } from './fakeClock';

// ---------------------------------------------------------------------------
// The document
// ---------------------------------------------------------------------------

export function openapiPath(): string {
  // The repository's copy: a missing file must fail this suite, not send it elsewhere.
  return path.join(__dirname, '..', 'emulator', 'openapi-v2.json');
}
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the OpenAPI document is walked dynamically
export const DOC: any = JSON.parse(fs.readFileSync(openapiPath(), 'utf8'));
/** The document's own example of a running pod (GET /v2/pods/{id} → 200). */
export const EXAMPLE_POD: Record<string, unknown> =
  DOC.paths['/v2/pods/{id}'].get.responses['200'].content['application/json'].examples.pod.value;

// ---------------------------------------------------------------------------
// A scripted server
// ---------------------------------------------------------------------------

export interface Hit {
  method: string;
  /** Path and query, relative to the server root (`/v2/pods?x=1`). */
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export type Handler = (hit: Hit, res: http.ServerResponse, req: http.IncomingMessage) => void;

export interface Server {
  baseUrl: string;
  hits: Hit[];
  handle: Handler;
  close(): Promise<void>;
}

export const servers: Server[] = [];
export const clients: RunpodClient[] = [];

export async function startServer(handle: Handler): Promise<Server> {
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

export function json(res: http.ServerResponse, status: number, body: unknown, headers = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

export function problem(
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

export function route(hit: Hit): string {
  return hit.url.replace(/\?.*$/, '');
}

export function query(hit: Hit): URLSearchParams {
  return new URL(hit.url, 'http://x').searchParams;
}

// ---------------------------------------------------------------------------
// Clocks and clients
// ---------------------------------------------------------------------------

/** Attempt timers in FakeClock tests: far beyond any backoff, so advancing never fires them. */
export const TIMER_MS = 1_000_000_000;

/** A FakeClock that records every wait it is asked for. */
export class SpyClock extends FakeClock {
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

export const realDelay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function waitFor(
  condition: () => boolean,
  what: string,
  limitMs = 3000,
): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > limitMs) throw new Error(`timed out waiting for ${what}`);
    await realDelay(2);
  }
}

/** Runs `promise` to its end, moving the clock over each retry wait as soon as it is asked for. */
export async function drive<T>(clock: SpyClock, promise: Promise<T>): Promise<T> {
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

export const API_KEY = 'rpa_TESTKEY0123456789ABCDEFGHIJKLMNOPQRSTUV';

/** FakeClock timing: production retry rules, attempt timers that never fire. */
export function fakeTiming(overrides: Partial<Timing> = {}): Timing {
  return scaleTiming(1, {
    requestTimeoutMs: TIMER_MS,
    createTimeoutMs: TIMER_MS + 1,
    ...overrides,
  });
}

export interface Made {
  client: RunpodClient;
  clock: SpyClock;
  logs: { level: RunpodLogLevel; message: string }[];
}

/**
 * The system clock, counting the sleeps of `timeoutMs`: each attempt of a call is bounded by one
 * (its request or create timeout), so `timeouts.length` is how many attempts the client made,
 * which the server's hits cannot tell on a loaded machine (an attempt's few ms can pass before
 * its request reaches the loopback server in the same process).
 */
export function timeoutCountingClock(timeoutMs: number): { clock: Clock; timeouts: number[] } {
  const timeouts: number[] = [];
  const clock: Clock = {
    nowMs: systemClock.nowMs,
    sleep: (ms, signal) => {
      if (ms === timeoutMs) timeouts.push(ms);
      return systemClock.sleep(ms, signal);
    },
  };
  return { clock, timeouts };
}

export function makeClient(
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

export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('expected a rejection');
}

export async function apiError(promise: Promise<unknown>, kind: ApiErrorKind): Promise<ApiError> {
  const error = await rejection(promise);
  assert.ok(error instanceof ApiError, `expected an ApiError, got ${String(error)}`);
  assert.equal(error.kind, kind, `kind of "${error.message}"`);
  return error;
}

export function pod(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...EXAMPLE_POD, ...overrides };
}

export function body(overrides: Partial<Parameters<typeof createPodBody>[0]> = {}): CreatePodBody {
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

/** Disposes the clients and closes the servers a test made. */
async function cleanupClients(): Promise<void> {
  for (const client of clients.splice(0)) client.dispose();
  await Promise.all(servers.splice(0).map((s) => s.close()));
}

// A root hook, registered once however many files import this: after every test.
afterEach(cleanupClients);
