/**
 * Small Runpod API v2 stand-ins (no mock library), each on a free loopback port recording every
 * request; `close()` ends it. For the pod scripts' tests, one answering the few calls the
 * watchdog makes with statuses a test sets per call; for the key's tests, one that lists no pod.
 */
import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface StubRequest {
  method: string;
  /** Path and query, e.g. `/v2/pods/abc`. */
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  atMs: number;
}

/**
 * Statuses per call, in order; the last one repeats. Defaults: GET 200 (404 once the pod
 * was deleted or terminated), DELETE 204, actions 200.
 */
export interface StubBehaviour {
  get?: number[];
  delete?: number[];
  terminate?: number[];
  stop?: number[];
  /** GETs wait for this before they answer (to look at the pod between steps). */
  gate?: Promise<void>;
  /** The pod is a member of this cluster (its GET says so, pretty-printed over lines). */
  cluster?: string;
  /** Statuses of `DELETE /v2/clusters/{cluster}` (default 204). */
  clusterDelete?: number[];
}

export interface ApiStub {
  /** `http://127.0.0.1:<port>/v2` */
  baseUrl: string;
  requests: StubRequest[];
  close(): Promise<void>;
}

function next(list: number[] | undefined, count: number, fallback: number): number {
  if (list === undefined || list.length === 0) return fallback;
  return list[Math.min(count, list.length - 1)] ?? fallback;
}

function problem(res: http.ServerResponse, status: number, title: string): void {
  res.writeHead(status, { 'content-type': 'application/problem+json' });
  res.end(JSON.stringify({ title, status, detail: title }));
}

export async function startApiStub(behaviour: StubBehaviour = {}): Promise<ApiStub> {
  const requests: StubRequest[] = [];
  const counts = { get: 0, delete: 0, terminate: 0, stop: 0, clusterDelete: 0 };
  let gone = false;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const path = req.url ?? '';
      requests.push({
        method: req.method ?? '',
        path,
        headers: req.headers,
        body,
        atMs: Date.now(),
      });
      if (req.method === 'DELETE' && path === `/v2/clusters/${behaviour.cluster ?? '-'}`) {
        const status = next(behaviour.clusterDelete, counts.clusterDelete++, 204);
        if (status < 300) gone = true;
        if (status !== 204) return problem(res, status, `status ${status}`);
        res.writeHead(204);
        res.end();
        return;
      }
      const pod = /^\/v2\/pods\/([A-Za-z0-9_-]+)(\/action)?$/.exec(path);
      if (!pod) return problem(res, 404, 'no such route');
      const [, id, action] = pod;
      void (async () => {
        if (req.method === 'GET' && action === undefined) {
          await behaviour.gate;
          const status = gone ? 404 : next(behaviour.get, counts.get++, 200);
          if (status !== 200) return problem(res, status, `status ${status}`);
          res.writeHead(200, { 'content-type': 'application/json' });
          const member = behaviour.cluster
            ? { cluster: { rank: 1, id: behaviour.cluster, ip: '10.65.0.3' } }
            : {};
          res.end(
            JSON.stringify({ id, status: 'RUNNING', ...member }, null, behaviour.cluster ? 2 : 0),
          );
          return;
        }
        if (req.method === 'DELETE' && action === undefined) {
          const status = next(behaviour.delete, counts.delete++, 204);
          if (status < 300) gone = true;
          if (status === 204) {
            res.writeHead(204);
            res.end();
            return;
          }
          return problem(res, status, `status ${status}`);
        }
        if (req.method === 'POST' && action !== undefined) {
          let kind: string;
          try {
            kind = String((JSON.parse(body) as { action?: unknown }).action);
          } catch {
            return problem(res, 400, 'body is not JSON');
          }
          if (kind !== 'terminate' && kind !== 'stop') return problem(res, 400, 'unknown action');
          const status = next(behaviour[kind], counts[kind]++, 200);
          if (status < 300 && kind === 'terminate') gone = true;
          if (status !== 200) return problem(res, status, `status ${status}`);
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ id, status: kind === 'stop' ? 'EXITED' : 'TERMINATED' }));
          return;
        }
        problem(res, 405, 'method not allowed');
      })();
    });
  });
  return { ...(await listenLoopback(server)), requests };
}

/** `server` listening on a free loopback port as the API's `/v2`; `close()` ends it. */
async function listenLoopback(server: http.Server): Promise<Omit<ApiStub, 'requests'>> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v2`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A loopback "Runpod API" that answers every request with an empty pod list and records it: for
 * the tests of where the API key goes, and that no call is made at all.
 */
export async function emptyPodsApi(): Promise<ApiStub> {
  const requests: StubRequest[] = [];
  const server = http.createServer((req, res) => {
    requests.push({
      method: req.method ?? '',
      path: req.url ?? '',
      headers: req.headers,
      body: '',
      atMs: Date.now(),
    });
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ pods: [] }));
  });
  return { ...(await listenLoopback(server)), requests };
}

/**
 * A loopback port nothing listens on. A port bound and released would do but for the tests
 * beside it: the kernel may hand that port to the next `listen(0)` (a CI saw a watchdog meant to
 * find no answer reach another case's stub). A privileged port is never handed out so, and the
 * one taken is one that refuses a connection now.
 */
export async function closedPort(): Promise<number> {
  for (let port = 1023; port > 900; port -= 1) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', (error: NodeJS.ErrnoException) =>
        resolve(error.code === 'ECONNREFUSED'),
      );
    });
    if (refused) return port;
  }
  throw new Error('no privileged loopback port refuses a connection: free one of 901–1023');
}
