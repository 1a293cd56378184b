/**
 * The Runpod client against the scripted loopback server of test/helpers/runpodClient.ts (waits on
 * its FakeClock, or on a scaled-down Timing for timeouts): requests, pods and list pagination.
 */
import assert from 'node:assert/strict';
import { systemClock } from '../../src/core/clock';
import type { Pod } from '../../src/core/runpod/api';
import { CLIENT_VERSION, MAX_PAGES, RunpodClient } from '../../src/core/runpod/client';
import { RunpodConfigError, runMessage } from '../../src/core/runpod/apiErrors';
import {
  startServer,
  json,
  query,
  API_KEY,
  fakeTiming,
  makeClient,
  apiError,
  pod,
} from '../helpers/runpodClient';

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
      cluster: null,
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
