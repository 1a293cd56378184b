/**
 * The emulator's pure parts: the OpenAPI contract helper (ajv 2020-12 over openapi-v2.json and
 * the live-API extensions), fault bookkeeping, the ledger's billing on a fake clock, catalog
 * arithmetic and the container init script.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FakeClock } from '../helpers/fakeClock';
import { availabilityLevel, bestLevel, compareCuda, cudaAtLeast } from '../emulator/catalog';
import { initScript } from '../emulator/container';
import { applyLiveApiExtensions, type JsonObject } from '../emulator/extensions';
import { FaultBook, parseFault } from '../emulator/faults';
import { Ledger } from '../emulator/ledger';
import { freePort, PORTS_DIR, releasePort, reservePort } from '../emulator/ports';
import { OpenApiContract, OPENAPI_PATH } from '../emulator/openapi';
import { ed25519 } from '../emulator/testing';

const contract = OpenApiContract.load();
const GPU = 'NVIDIA GeForce RTX 4090';

describe('emulator: OpenAPI contract', () => {
  const create = { name: 'x', image: 'img', gpu: { id: GPU, count: 1 } };

  it('accepts cmd on POST /v2/pods (the one request extension) and nothing else unknown', () => {
    assert.deepEqual(
      contract.validateRequestBody('POST', '/v2/pods', { ...create, cmd: ['bash', '-c', 'x'] }),
      [],
    );
    assert.deepEqual(contract.validateRequestBody('POST', '/v2/pods', { ...create, cmd: [] }), [
      '$.cmd: must NOT have fewer than 1 items',
    ]);
    assert.deepEqual(
      contract.validateRequestBody('POST', '/v2/pods', { ...create, command: ['x'] }),
      ["$: additional properties 'command' not allowed"],
    );
    assert.deepEqual(
      contract.validateRequestBody('POST', '/v2/pods', { ...create, gpu: { id: GPU, cmd: ['x'] } }),
      ["$.gpu: additional properties 'cmd' not allowed"],
    );
    assert.deepEqual(contract.validateRequestBody('POST', '/v2/pods', undefined), [
      '$: request body is required',
    ]);
    assert.deepEqual(
      contract.validateRequestBody('POST', '/v2/pods/abc/action', { action: 'start' }),
      [],
    );
  });

  it('validates every example the document gives for the operations the emulator serves', () => {
    const doc = JSON.parse(readFileSync(OPENAPI_PATH, 'utf8')) as JsonObject;
    const paths = doc.paths as Record<
      string,
      Record<string, { responses?: Record<string, unknown> }>
    >;
    let checked = 0;
    for (const [path, methods] of [
      ['/v2/pods', ['get', 'post']],
      ['/v2/pods/{id}', ['get']],
      ['/v2/pods/{id}/action', ['post']],
      ['/v2/catalog/gpus', ['get']],
      ['/v2/catalog/datacenters', ['get']],
      ['/v2/network-volumes', ['get']],
      ['/v2/templates', ['get']],
    ] as const) {
      for (const method of methods) {
        const responses = paths[path]?.[method]?.responses ?? {};
        for (const [status, response] of Object.entries(responses)) {
          const content = (
            response as {
              content?: Record<string, { examples?: Record<string, { value: unknown }> }>;
            }
          ).content;
          for (const [type, media] of Object.entries(content ?? {})) {
            for (const example of Object.values(media.examples ?? {})) {
              const concrete = path.replace('{id}', 'abc');
              assert.deepEqual(
                contract.validateResponse(method.toUpperCase(), concrete, {
                  status: Number(status),
                  contentType: type,
                  body: example.value,
                }),
                [],
                `${method} ${path} ${status}`,
              );
              checked++;
            }
          }
        }
      }
    }
    assert.ok(checked >= 8, `only ${checked} examples`);
  });

  it('checks responses: status, content type, body, empty 204, Retry-After on 429', () => {
    /** What the contract says of a problem document (application/problem+json) answered. */
    const problemAnswer = (
      method: string,
      apiPath: string,
      answer: { status: number; body: unknown; retryAfter?: string },
    ) =>
      contract.validateResponse(method, apiPath, {
        contentType: 'application/problem+json',
        ...answer,
      });
    const notFound = { title: 'Not Found', status: 404, detail: 'pod not found' };
    assert.deepEqual(problemAnswer('GET', '/v2/pods/abc', { status: 404, body: notFound }), []);
    assert.match(
      contract.validateResponse('GET', '/v2/pods/abc', {
        status: 404,
        contentType: 'application/json',
        body: notFound,
      })[0] ?? '',
      /content-type 'application\/json' is not documented/,
    );
    assert.deepEqual(problemAnswer('GET', '/v2/pods/abc', { status: 404, body: { title: 'x' } }), [
      "$: missing property 'status'",
      "$: missing property 'detail'",
    ]);
    // 402 is not listed for createPod: it falls to `default`, a problem document.
    assert.deepEqual(
      problemAnswer('POST', '/v2/pods', {
        status: 402,
        body: { title: 'Payment Required', status: 402, detail: 'x' },
      }),
      [],
    );
    assert.match(
      contract.validateResponse('DELETE', '/v2/pods/abc', { status: 204, body: {} })[0] ?? '',
      /has no body/,
    );
    assert.deepEqual(
      contract.validateResponse('DELETE', '/v2/pods/abc', { status: 204, body: undefined }),
      [],
    );
    const limited = { title: 'Too Many Requests', status: 429, detail: 'slow down' };
    assert.deepEqual(problemAnswer('GET', '/v2/pods', { status: 429, body: limited }), [
      '429 without an integer Retry-After header (seconds)',
    ]);
    assert.deepEqual(
      problemAnswer('GET', '/v2/pods', { status: 429, retryAfter: '3', body: limited }),
      [],
    );
    assert.deepEqual(
      contract.validateResponse('GET', '/v2/pods', {
        status: 200,
        contentType: 'application/json',
        body: { pods: [], pagination: { hasNextPage: false, nextCursor: null } },
      }),
      [],
    );
  });

  it('matches paths (a literal segment beats a parameter) and reports methods', () => {
    const m = contract.match('DELETE', '/v2/registries/delegations/x');
    assert.equal(m.kind === 'operation' && m.operationId, 'revokeDelegation');
    const literal = contract.match('GET', '/v2/registries/delegations');
    assert.equal(literal.kind === 'operation' && literal.operationId, 'listDelegations');
    const param = contract.match('GET', '/v2/pods/p1');
    assert.deepEqual(param.kind === 'operation' && param.pathParams, { id: 'p1' });
    assert.deepEqual(contract.match('PUT', '/v2/pods'), {
      kind: 'method-not-allowed',
      allow: ['GET', 'POST'],
    });
    assert.deepEqual(contract.match('GET', '/v2/nothing'), { kind: 'no-path' });
  });

  it('parses query strings as the document styles them and rejects unknown parameters', () => {
    const q = contract.validateQuery(
      'listGpuTypes',
      new URLSearchParams('include=AVAILABILITY&product=POD,CLUSTER&count=2&minCudaVersion=12'),
    );
    assert.deepEqual(q.errors, []);
    assert.deepEqual(q.values, {
      include: ['AVAILABILITY'],
      product: ['POD', 'CLUSTER'],
      count: 2,
      minCudaVersion: '12',
    });
    assert.deepEqual(
      contract.validateQuery('listGpuTypes', new URLSearchParams('count=0&foo=1')).errors,
      ['query.foo: unknown query parameter', 'query.count: must be >= 1'],
    );
    assert.deepEqual(
      contract.validateQuery('listPods', new URLSearchParams('limit=5&limit=6')).errors,
      ['query.limit: given more than once'],
    );
    assert.deepEqual(contract.validateQuery('listSecrets', new URLSearchParams('name=a')).values, {
      name: 'a',
    });
  });

  it('patches a copy of the document, and refuses to patch one that changed', () => {
    const doc = JSON.parse(readFileSync(OPENAPI_PATH, 'utf8')) as JsonObject;
    const patched = applyLiveApiExtensions(doc);
    assert.ok('/v2/account/secrets' in (patched.paths as JsonObject));
    assert.equal(
      '/v2/account/secrets' in (doc.paths as JsonObject),
      false,
      'the input is untouched',
    );
    assert.throws(
      () => applyLiveApiExtensions(patched),
      /review extensions\.ts|drop the extension/,
    );
  });
});

describe('emulator: faults', () => {
  it('hits the Nth matching call, `times` in a row, then is gone', () => {
    const book = new FaultBook();
    book.addRequestFault(
      parseFault({
        kind: 'request',
        route: 'getPod',
        podId: 'a',
        nth: 2,
        times: 2,
        effect: { type: 'status', status: 503 },
      }) as never,
    );
    const hits = [
      book.onCall({ route: 'getPod', key: 'account', podId: 'a' }),
      book.onCall({ route: 'getPod', key: 'account', podId: 'b' }),
      book.onCall({ route: 'listPods', key: 'account' }),
      book.onCall({ route: 'getPod', key: 'account', podId: 'a' }),
      book.onCall({ route: 'getPod', key: 'account', podId: 'a' }),
      book.onCall({ route: 'getPod', key: 'account', podId: 'a' }),
    ].map((h) => h?.effect.type ?? '-');
    assert.deepEqual(hits, ['-', '-', '-', 'status', 'status', '-']);
    assert.deepEqual(book.pending(), []);
  });

  it("matches by key kind and action; 'always' never runs out; queues count creates", () => {
    const book = new FaultBook();
    book.addRequestFault(
      parseFault({
        kind: 'request',
        route: 'podAction',
        key: 'pod',
        action: 'stop',
        times: 'always',
        effect: { type: 'drop' },
      }) as never,
    );
    assert.equal(book.onCall({ route: 'podAction', key: 'account', action: 'stop' }), undefined);
    assert.equal(book.onCall({ route: 'podAction', key: 'pod', action: 'terminate' }), undefined);
    for (let i = 0; i < 5; i++)
      assert.equal(
        book.onCall({ route: 'podAction', key: 'pod', action: 'stop' })?.effect.type,
        'drop',
      );
    assert.equal(book.pending().length, 1);
    book.addSlowBoot({ provisioningMs: 5 }, 2);
    book.addSshd('closed', undefined, 1);
    assert.deepEqual(
      [book.takeSlowBoot(), book.takeSlowBoot(), book.takeSlowBoot()],
      [{ provisioningMs: 5 }, { provisioningMs: 5 }, undefined],
    );
    assert.deepEqual([book.takeSshdForCreate(), book.takeSshdForCreate()], ['closed', undefined]);
    book.clear();
    assert.deepEqual(book.pending(), []);
  });

  it('refuses malformed faults with every problem named', () => {
    assert.throws(
      () =>
        parseFault({ kind: 'request', route: 'getPods', effect: { type: 'status', status: 302 } }),
      (e: Error) => {
        assert.match(e.message, /route/);
        assert.match(e.message, /status/);
        return true;
      },
    );
    assert.throws(
      () => parseFault({ kind: 'unreachable', forMs: 10, mode: 'refuse', extra: 1 }),
      /extra/,
    );
  });
});

describe('emulator: ledger', () => {
  it('bills GPU time while booting or running, disk time while stopped, nothing once deleted', async () => {
    const clock = new FakeClock();
    const ledger = new Ledger(clock);
    ledger.open(
      {
        id: 'p1',
        name: 'n',
        runId: 'r',
        gpuTypeId: GPU,
        gpuCount: 2,
        dataCenterId: 'EU-RO-1',
        cloud: 'SECURE',
        gpuUsdPerHour: 1.38,
        diskGb: 36,
        diskUsdPerGbMonth: 0.2,
      },
      'PROVISIONING',
    );
    await clock.advanceMs(60_000);
    ledger.status('p1', 'STARTING');
    ledger.status('p1', 'RUNNING');
    await clock.advanceMs(3_540_000);
    assert.equal(ledger.entry('p1')?.costUsd, 1.38);
    ledger.status('p1', 'EXITED');
    await clock.advanceMs(7_200_000);
    assert.equal(ledger.entry('p1')?.costUsd, 1.4, '36 GB × $0.20/720 h × 2 h = $0.02');
    ledger.status('p1', 'RUNNING');
    await clock.advanceMs(1_800_000);
    ledger.close('p1', 'pod');
    await clock.advanceMs(3_600_000);
    const entry = ledger.entry('p1');
    assert.equal(entry?.costUsd, 2.09);
    assert.equal(entry?.gpuBilledSeconds, 5400);
    assert.equal(entry?.gpuSeconds, 10800);
    assert.equal(entry?.diskBilledSeconds, 7200);
    assert.equal(entry?.deletedBy, 'pod');
    assert.equal(entry?.status, 'DELETED');
    assert.deepEqual(ledger.snapshot().totals, {
      podsCreated: 1,
      podsBilling: 0,
      gpuSeconds: 10800,
      costUsd: 2.09,
    });
  });
});

describe('emulator: catalog arithmetic', () => {
  it('compares CUDA versions numerically and reads a bare major as any release of it', () => {
    assert.ok(compareCuda('12.11', '12.2') > 0);
    assert.ok(compareCuda('13.0', '12.8') > 0);
    assert.equal(compareCuda('12.8', '12.8'), 0);
    assert.equal(cudaAtLeast('12.4', '12'), true);
    assert.equal(cudaAtLeast('11.8', '12'), false);
    assert.equal(cudaAtLeast('12.4', '12.8'), false);
  });

  it('turns free GPUs into availability levels for a pod size', () => {
    assert.deepEqual(
      [0, 1, 2, 3, 6, 7].map((free) => availabilityLevel(free, 1)),
      ['NONE', 'LOW', 'LOW', 'MEDIUM', 'MEDIUM', 'HIGH'],
    );
    assert.equal(availabilityLevel(7, 4), 'LOW');
    assert.equal(availabilityLevel(3, 4), 'NONE');
    assert.equal(bestLevel(['LOW', 'NONE', 'MEDIUM']), 'MEDIUM');
    assert.equal(bestLevel([]), 'NONE');
  });
});

describe('emulator: container init script', () => {
  it('quotes every path and ends by becoming the pod command', () => {
    const script = initScript([
      { source: "/tmp/it's here", target: '/workspace' },
      { source: '/tmp/vol', target: '/workspace/data dir' },
    ]);
    assert.match(script, /mount --bind '\/tmp\/it'\\''s here' '\/workspace'/);
    assert.match(script, /mkdir -p '\/workspace\/data dir'/);
    assert.match(script, /mount -t tmpfs .* tmpfs \/run/);
    assert.match(script, /exec "\$@"\n$/);
    const syntax = spawnSync('bash', ['-n'], { input: script });
    assert.equal(syntax.status, 0, syntax.stderr.toString());
  });
});

describe('emulator: test keys', () => {
  it('never hands out an ed25519 key OpenSSH would refuse (ssh2 drops leading zero bytes)', () => {
    // One ssh2 key in 256 has a public key starting with 0x00: 800 draws meet one 96% of the time.
    for (let i = 0; i < 800; i++) {
      const key = ed25519();
      assert.equal(key.blob.length, 51);
      const privateBlob = Buffer.from(
        key.privateKey
          .split('\n')
          .filter((l) => l && !l.startsWith('-----'))
          .join(''),
        'base64',
      );
      assert.ok(
        privateBlob.includes(key.blob.subarray(19)),
        'the private file holds the full public key',
      );
    }
  });
});

describe('the emulator’s ports for pods’ sshd', function () {
  it('are free, not excluded, and below the kernel’s ephemeral range (no outgoing connection takes them)', async () => {
    const low = Number(
      readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0],
    );
    const taken = new Set<number>();
    for (let i = 0; i < 20; i++) {
      const port = await freePort(taken);
      assert.ok(!taken.has(port), `port ${port} was excluded`);
      if (low > 21_000) assert.ok(port >= 20_000 && port < low, `port ${port}, range from ${low}`);
      taken.add(port);
    }
    for (const port of taken) releasePort(port);
  });

  it('are reserved machine-wide: a port another live process picked is never given out, a dead one’s is taken over', async () => {
    // Another process picks a port and keeps living (as another test file's emulator does).
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        "require('./test/emulator/ports.ts').freePort().then((port) => { console.log(port); setInterval(() => {}, 1000); })",
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const port = await new Promise<number>((resolve, reject) => {
      child.stdout.once('data', (chunk: Buffer) => resolve(Number(String(chunk).trim())));
      child.once('exit', (code) => reject(new Error(`the picking process exited (${code})`)));
    });
    try {
      assert.equal(readFileSync(join(PORTS_DIR, String(port)), 'utf8'), String(child.pid));
      assert.equal(reservePort(port), false, 'a live process holds it');
    } finally {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    // Killed, it could not give the port back: its reservation is stale and taken over.
    assert.equal(reservePort(port), true);
    assert.equal(readFileSync(join(PORTS_DIR, String(port)), 'utf8'), String(process.pid));
    assert.equal(reservePort(port), false, 'this process holds it now');
    releasePort(port);
    assert.ok(!existsSync(join(PORTS_DIR, String(port))), 'released, its file is gone');
  });
});
