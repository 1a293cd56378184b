/**
 * The emulator's API against openapi-v2.json: every request these tests send and every response
 * they read is validated by `ApiClient` (ajv, 2020-12 dialect); these tests check what the
 * document cannot: auth, strict validation, Runpod's rules and errors, catalog filters, secrets,
 * pagination and the ledger's arithmetic.
 */
import assert from 'node:assert/strict';
import { FakeClock } from '../helpers/fakeClock';
import { NO_CAPACITY_DETAIL, startEmulator, type Emulator } from '../emulator/emulator';
import {
  adminHeaders,
  ApiClient,
  waitForPod,
  type PodBody,
  type Problem,
} from '../emulator/testing';

const GPU = 'NVIDIA GeForce RTX 4090';
const OUT_OF_STOCK = 'NVIDIA H100 80GB HBM3';

interface GpuTypeBody {
  id: string;
  price: { secure: number; community: number };
  availability?: string;
  dataCenters?: { id: string; availability: string }[];
  cudaVersions?: { version: string; available: boolean }[];
}

function pod(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    image: 'runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404',
    gpu: { id: GPU, count: 1 },
    cmd: ['sleep', 'infinity'],
    ...extra,
  };
}

describe('Runpod emulator: API v2 contract', function () {
  this.timeout(60_000);
  let emulator: Emulator;
  let api: ApiClient;

  before(async () => {
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 20, starting: 20 } });
    api = new ApiClient(emulator.baseUrl, emulator.apiKey);
  });
  after(async () => {
    await emulator?.close();
    assert.deepEqual(emulator.contractViolations(), []);
  });
  afterEach(async () => {
    emulator.faults.clear();
    for (const p of emulator.pods()) await api.delete(`/pods/${p.id}`);
  });

  describe('auth', () => {
    it('answers 401 without a key, with a wrong key and with a malformed header', async () => {
      for (const key of [null, 'rpa_WRONG']) {
        const r = await api.get<Problem>('/pods', { key });
        assert.equal(r.status, 401);
        assert.equal(r.contentType, 'application/problem+json');
      }
      assert.equal(
        (await api.get<Problem>('/pods', { key: null })).body.detail,
        'missing bearer token',
      );
      const basic = await api.get<Problem>('/pods', {
        key: null,
        headers: { authorization: 'Basic abc' },
      });
      assert.equal(basic.status, 401);
      assert.deepEqual(
        emulator
          .requests()
          .slice(-4)
          .map((r) => r.key),
        ['none', 'invalid', 'none', 'invalid'],
      );
    });
  });

  describe('strict validation', () => {
    const cases: [string, unknown, RegExp][] = [
      [
        'an unknown field',
        pod('x', { bogus: 1 }),
        /^\$: additional properties 'bogus' not allowed$/,
      ],
      [
        'an unknown nested field',
        pod('x', { gpu: { id: GPU, colour: 'red' } }),
        /^\$\.gpu: additional properties 'colour'/,
      ],
      ['a wrong type', pod('x', { disk: '20' }), /^\$\.disk: must be integer$/],
      [
        'a count below 1',
        pod('x', { gpu: { id: GPU, count: 0 } }),
        /^\$\.gpu\.count: must be >= 1$/,
      ],
      [
        'a malformed CUDA floor',
        pod('x', { gpu: { id: GPU, minCudaVersion: '13' } }),
        /^\$\.gpu\.minCudaVersion: must match pattern/,
      ],
      ['no name', { image: 'x', gpu: { id: GPU } }, /^\$: missing property 'name'$/],
      [
        'no image without a template',
        { name: 'x', gpu: { id: GPU } },
        /^\$: missing property 'image'$/,
      ],
      [
        'cmd as a string (the old args style)',
        pod('x', { cmd: 'sleep 1' }),
        /^\$\.cmd: must be array$/,
      ],
      ['a non-string env value', pod('x', { env: { A: 1 } }), /^\$\.env\.A: must be string$/],
      [
        'an unknown cloud',
        pod('x', { cloud: 'PRIVATE' }),
        /^\$\.cloud: must be one of "SECURE", "COMMUNITY"$/,
      ],
    ];
    for (const [what, body, expected] of cases) {
      it(`answers 422 with errors[] for ${what}`, async () => {
        const before = emulator.ledger().pods.length;
        const r = await api.post<Problem>('/pods', body, { invalidRequest: true });
        assert.equal(r.status, 422);
        assert.equal(r.body.title, 'Unprocessable Entity');
        assert.ok(
          r.body.errors?.some((e) => expected.test(e)),
          JSON.stringify(r.body.errors),
        );
        assert.equal(emulator.ledger().pods.length, before, 'nothing was created');
      });
    }

    it('accepts cmd (the live API extension) and the fields the project sends', async () => {
      const r = await api.post<PodBody>(
        '/pods',
        pod('full', {
          cloud: 'SECURE',
          gpu: { id: GPU, count: 1, minCudaVersion: '13.0' },
          disk: 40,
          ports: ['22/tcp'],
          startSsh: false,
          env: { OVERBRAINER_RUN_ID: 'run-1' },
          dataCenterIds: ['EU-RO-1', 'US-TX-3'],
          mounts: { network: [{ volumeId: 'agv6w2qcg7', path: '/workspace/data' }] },
        }),
      );
      assert.equal(r.status, 201);
      assert.equal(r.body.dataCenterId, 'EU-RO-1', 'placed with its network volume');
      assert.equal(emulator.ledger().pods[0]?.runId, 'run-1');
    });

    it('rejects unknown and malformed query parameters (422), and malformed JSON (400)', async () => {
      const unknown = await api.get<Problem>('/pods?includeClusterPod=true');
      assert.equal(unknown.status, 422);
      assert.deepEqual(unknown.body.errors, ['query.includeClusterPod: unknown query parameter']);
      const badLimit = await api.get<Problem>('/pods?limit=0');
      assert.equal(badLimit.status, 422);
      const json = await api.call<Problem>('POST', '/pods', {
        rawBody: '{"name":',
        invalidRequest: true,
      });
      assert.equal(json.status, 400);
      const action = await api.post<Problem>(
        '/pods/abc/action',
        { action: 'reboot' },
        { invalidRequest: true },
      );
      assert.equal(action.status, 422);
    });

    it('answers 404, 405 and 501 in the problem shape for unknown routes, methods and unemulated operations', async () => {
      const raw = await fetch(`${emulator.baseUrl}/nope`, {
        headers: { authorization: `Bearer ${emulator.apiKey}` },
      });
      assert.equal(raw.status, 404);
      assert.equal(raw.headers.get('content-type'), 'application/problem+json');
      const put = await fetch(`${emulator.baseUrl}/pods`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${emulator.apiKey}` },
      });
      assert.equal(put.status, 405);
      assert.equal(put.headers.get('allow'), 'GET, POST');
      const patch = await api.call<Problem>('PATCH', '/pods/abc', { body: { name: 'renamed' } });
      assert.equal(patch.status, 501);
    });
  });

  describe('create rules', () => {
    it('answers 400 "no longer any instances available" for a GPU type out of stock', async () => {
      const r = await api.post<Problem>('/pods', pod('h100', { gpu: { id: OUT_OF_STOCK } }));
      assert.equal(r.status, 400);
      assert.equal(r.body.detail, NO_CAPACITY_DETAIL);
      assert.match(r.body.detail, /no longer any instances available/);
    });

    it('answers 400 for rules the schema cannot state', async () => {
      const before = emulator.ledger().pods.length;
      const rules: [Record<string, unknown>, RegExp][] = [
        [{ gpu: { id: 'NVIDIA Imaginary 9000' } }, /does not exist/],
        [{ gpu: { id: GPU, count: 9 } }, /at most 8 GPUs/],
        [{ dataCenterIds: ['MARS-1'] }, /unknown data center/],
        [{ ports: ['22'] }, /invalid port/],
        [
          { gpu: { id: GPU, allowedCudaVersions: ['12.8'], minCudaVersion: '12.4' } },
          /mutually exclusive/,
        ],
        [{ env: { K: '{{ RUNPOD_SECRET_missing }}' } }, /secret 'missing'.*does not exist/],
        [{ cpu: { id: 'cpu5c', vcpuCount: 2 }, gpu: undefined }, /GPU pods only/],
        [
          { mounts: { network: [{ volumeId: 'nope', path: '/workspace/data' }] } },
          /network volume 'nope' not found/,
        ],
        [
          {
            mounts: { network: [{ volumeId: 'agv6w2qcg7', path: '/d' }] },
            dataCenterIds: ['US-TX-3'],
          },
          /is in EU-RO-1/,
        ],
      ];
      for (const [extra, detail] of rules) {
        const r = await api.post<Problem>('/pods', pod('rule', extra));
        assert.equal(r.status, 400, JSON.stringify(extra));
        assert.match(r.body.detail, detail);
      }
      const capacity: Record<string, unknown>[] = [
        { gpu: { id: GPU, minCudaVersion: '13.1' } }, // no machine that new
        { gpu: { id: 'NVIDIA A100 80GB PCIe' }, cloud: 'COMMUNITY' }, // not on community
        { gpu: { id: GPU }, dataCenterIds: ['US-KS-2'] }, // not offered there
      ];
      for (const extra of capacity) {
        const r = await api.post<Problem>('/pods', pod('capacity', extra));
        assert.equal(r.status, 400, JSON.stringify(extra));
        assert.equal(r.body.detail, NO_CAPACITY_DETAIL);
      }
      assert.equal(emulator.ledger().pods.length, before, 'nothing was created');
    });

    it('takes stock when it places a pod and gives it back on delete', async () => {
      await emulator.faults.setStock('NVIDIA A100 80GB PCIe', 2);
      const first = await api.post<PodBody>(
        '/pods',
        pod('a1', { gpu: { id: 'NVIDIA A100 80GB PCIe', count: 2 } }),
      );
      assert.equal(first.status, 201);
      const second = await api.post<Problem>(
        '/pods',
        pod('a2', { gpu: { id: 'NVIDIA A100 80GB PCIe' } }),
      );
      assert.equal(second.status, 400);
      assert.equal(second.body.detail, NO_CAPACITY_DETAIL);
      assert.equal(first.body.cost, 3.28, 'price × count');
      await api.delete(`/pods/${first.body.id}`);
      assert.equal(
        (await api.post('/pods', pod('a3', { gpu: { id: 'NVIDIA A100 80GB PCIe' } }))).status,
        201,
      );
    });

    it('answers 409 for an action the status does not allow, 404 for an unknown pod', async () => {
      // Still provisioning when the action comes, however loaded the machine (20 ms otherwise).
      await emulator.faults.slowBoot({ provisioningMs: 60_000 });
      const created = await api.post<PodBody>('/pods', pod('acts'));
      assert.deepEqual(created.body.actions, ['stop', 'terminate']);
      const start = await api.post<Problem>(`/pods/${created.body.id}/action`, { action: 'start' });
      assert.equal(start.status, 409);
      assert.match(start.body.detail, /not valid for a pod in status (PROVISIONING|STARTING)/);
      for (const method of ['GET', 'DELETE'] as const) {
        const r = await api.call<Problem>(method, '/pods/doesnotexist00');
        assert.equal(r.status, 404);
        assert.deepEqual(r.body, { title: 'Not Found', status: 404, detail: 'pod not found' });
      }
    });
  });

  describe('catalog', () => {
    it('lists GPU types with prices, and availability only with include=AVAILABILITY&product=POD', async () => {
      const plain = await api.get<{ gpus: GpuTypeBody[] }>('/catalog/gpus');
      assert.equal(plain.status, 200);
      assert.equal(plain.body.gpus.length, 4);
      assert.ok(plain.body.gpus.every((g) => g.availability === undefined));
      assert.equal((await api.get<Problem>('/catalog/gpus?include=AVAILABILITY')).status, 400);
      assert.equal((await api.get<Problem>('/catalog/gpus?count=2')).status, 400);
      assert.equal((await api.get<Problem>('/catalog/gpus?product=POD')).status, 400);
      assert.equal(
        (await api.get<Problem>('/catalog/gpus?include=AVAILABILITY&product=POD&minCudaVersion=x'))
          .status,
        422,
      );
      const avail = await api.get<{ gpus: GpuTypeBody[] }>(
        '/catalog/gpus?include=AVAILABILITY&product=POD',
      );
      const byId = new Map(avail.body.gpus.map((g) => [g.id, g]));
      assert.equal(byId.get(GPU)?.availability, 'HIGH');
      assert.deepEqual(
        byId.get(GPU)?.dataCenters?.map((d) => d.id),
        ['EU-RO-1', 'US-TX-3'],
      );
      assert.equal(byId.get(OUT_OF_STOCK)?.availability, 'NONE');
      assert.equal(byId.get(OUT_OF_STOCK)?.dataCenters, undefined);
      const four = await api.get<{ gpus: GpuTypeBody[] }>(
        '/catalog/gpus?include=AVAILABILITY&product=POD&count=4&cloud=SECURE&minCudaVersion=13.0',
      );
      const f = new Map(four.body.gpus.map((g) => [g.id, g]));
      assert.equal(f.get(GPU)?.availability, 'LOW', '8 free in EU-RO-1: two pods of 4');
      assert.deepEqual(f.get(GPU)?.cudaVersions, [{ version: '13.0', available: true }]);
      assert.equal(f.get('NVIDIA RTX A5000')?.availability, 'NONE', 'no CUDA 13 machines');
      const community = await api.get<{ gpus: GpuTypeBody[] }>(
        '/catalog/gpus?include=AVAILABILITY&product=POD&cloud=COMMUNITY',
      );
      assert.equal(
        community.body.gpus.find((g) => g.id === 'NVIDIA A100 80GB PCIe')?.availability,
        'NONE',
      );
      const france = await api.get<{ gpus: GpuTypeBody[] }>(
        '/catalog/gpus?include=AVAILABILITY&product=POD&countryCodes=RO',
      );
      assert.deepEqual(
        france.body.gpus.map((g) => g.id),
        [GPU, OUT_OF_STOCK],
      );
    });

    it('lists data centers with filters and GPU availability, network volumes and templates', async () => {
      const all = await api.get<{ dataCenters: { id: string; gpuAvailability?: unknown[] }[] }>(
        '/catalog/datacenters',
      );
      assert.equal(all.body.dataCenters.length, 3);
      const eu = await api.get<{
        dataCenters: { id: string; gpuAvailability?: { id: string; availability: string }[] }[];
      }>('/catalog/datacenters?regions=EUROPE&include=GPU_AVAILABILITY');
      assert.deepEqual(
        eu.body.dataCenters.map((d) => d.id),
        ['EU-RO-1'],
      );
      assert.deepEqual(eu.body.dataCenters[0]?.gpuAvailability, [
        { id: GPU, name: 'RTX 4090', availability: 'HIGH' },
        { id: OUT_OF_STOCK, name: 'H100 SXM', availability: 'NONE' },
      ]);
      const hp = await api.get<{ dataCenters: { id: string }[] }>(
        '/catalog/datacenters?networkVolumeTypes=STANDARD,HIGH_PERFORMANCE',
      );
      assert.deepEqual(
        hp.body.dataCenters.map((d) => d.id),
        ['US-TX-3'],
      );
      const volumes = await api.get<{ networkVolumes: { id: string; dataCenter: string }[] }>(
        '/network-volumes',
      );
      assert.deepEqual(
        volumes.body.networkVolumes.map((v) => [v.id, v.dataCenter]),
        [['agv6w2qcg7', 'EU-RO-1']],
      );
      const templates = await api.get<{ templates: { id: string; serverless: boolean }[] }>(
        '/templates',
      );
      assert.deepEqual(
        templates.body.templates.map((t) => t.serverless),
        [false, true],
      );
    });

    it('creates from a template (body fields win, env merged); a serverless template is 422, an unknown one 404', async () => {
      const r = await api.post<PodBody>('/pods', {
        name: 't',
        templateId: '9x4m2p7v',
        gpu: { id: GPU },
        cmd: ['sleep', 'infinity'],
        env: { A: '1' },
      });
      assert.equal(r.status, 201);
      assert.equal(
        (r.body as unknown as { image: string }).image,
        'runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404',
      );
      assert.equal((r.body as unknown as { template: null }).template, null);
      assert.equal(
        (await api.post('/pods', { name: 't', templateId: 'q0w2n8sl3x', gpu: { id: GPU } })).status,
        422,
      );
      assert.equal(
        (await api.post('/pods', { name: 't', templateId: 'nope', gpu: { id: GPU } })).status,
        404,
      );
    });
  });

  describe('secrets (live API extension)', () => {
    it('creates, finds by name, refuses a duplicate (409), updates, deletes; values are never returned', async () => {
      const created = await api.post<{ id: string; name: string }>('/account/secrets', {
        name: 'overbrainer_host_key_r1',
        value: 'AAAA',
      });
      assert.equal(created.status, 201);
      assert.equal('value' in created.body, false);
      assert.equal(
        (
          await api.post<Problem>('/account/secrets', {
            name: 'overbrainer_host_key_r1',
            value: 'B',
          })
        ).status,
        409,
      );
      const found = await api.get<{ secrets: { id: string }[] }>(
        '/account/secrets?name=overbrainer_host_key_r1',
      );
      assert.deepEqual(
        found.body.secrets.map((s) => s.id),
        [created.body.id],
      );
      assert.equal(
        (await api.get<{ secrets: unknown[] }>('/account/secrets?name=other')).body.secrets.length,
        0,
      );
      const patched = await api.call('PATCH', `/account/secrets/${created.body.id}`, {
        body: { value: 'BBBB' },
      });
      assert.equal(patched.status, 200);
      assert.equal(
        (
          await api.call('PATCH', `/account/secrets/${created.body.id}`, {
            body: {},
            invalidRequest: true,
          })
        ).status,
        422,
      );
      assert.equal((await api.delete(`/account/secrets/${created.body.id}`)).status, 204);
      assert.equal((await api.delete(`/account/secrets/${created.body.id}`)).status, 404);
      assert.equal(
        (
          await api.post(
            '/account/secrets',
            { name: 'bad name!', value: 'x' },
            { invalidRequest: true },
          )
        ).status,
        422,
      );
    });
  });

  describe('GET /v2/pods', () => {
    it('lists every pod without limit, and pages with limit/cursor (pagination extension)', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++)
        ids.push((await api.post<PodBody>('/pods', pod(`p${i}`))).body.id);
      const all = await api.get<{
        pods: PodBody[];
        pagination: { hasNextPage: boolean; nextCursor: string | null };
      }>('/pods');
      assert.deepEqual(all.body.pods.map((p) => p.id).sort(), [...ids].sort());
      assert.deepEqual(all.body.pagination, { hasNextPage: false, nextCursor: null });
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page: {
          body: {
            pods: PodBody[];
            pagination: { hasNextPage: boolean; nextCursor: string | null };
          };
        } = await api.get(`/pods?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        seen.push(...page.body.pods.map((p) => p.id));
        cursor = page.body.pagination.nextCursor;
        pages++;
      } while (cursor);
      assert.equal(pages, 3);
      assert.deepEqual(seen.sort(), [...ids].sort());
      assert.equal((await api.get<Problem>('/pods?cursor=garbage')).status, 400);
    });
  });

  describe('ledger', () => {
    it('bills the GPU rate from create to stop, the disk rate while stopped, nothing after delete (injected clock)', async () => {
      const clock = new FakeClock();
      const billed = await startEmulator({ clock, bootDelaysMs: { provisioning: 0, starting: 0 } });
      try {
        const c = new ApiClient(billed.baseUrl, billed.apiKey);
        const r = await c.post<PodBody>(
          '/pods',
          pod('billed', {
            gpu: { id: GPU, count: 2 },
            disk: 72,
            env: { OVERBRAINER_RUN_ID: 'r9' },
          }),
        );
        await waitForPod(c, r.body.id, (p) => p.status === 'RUNNING');
        await clock.advanceMs(3_600_000);
        assert.equal(billed.ledger().pods[0]?.costUsd, 1.38, '2 × $0.69 for an hour');
        assert.equal((await c.post(`/pods/${r.body.id}/action`, { action: 'stop' })).status, 200);
        await clock.advanceMs(10 * 3_600_000);
        // 72 GB × $0.20 / (30 × 24 h) = $0.02 per hour stopped.
        assert.equal(billed.ledger().pods[0]?.costUsd, 1.58);
        assert.equal((await c.delete(`/pods/${r.body.id}`)).status, 204);
        await clock.advanceMs(3_600_000);
        const entry = billed.ledger().pods[0];
        assert.equal(entry?.costUsd, 1.58);
        assert.equal(entry?.gpuSeconds, 7200);
        assert.equal(entry?.diskBilledSeconds, 36000);
        assert.equal(entry?.deletedBy, 'account');
        assert.equal(entry?.runId, 'r9');
        assert.equal(billed.ledger().totals.podsBilling, 0);
      } finally {
        await billed.close();
      }
    });

    it('is served at /_emulator/ledger and the request log at /_emulator/requests', async () => {
      const r = await api.post<PodBody>('/pods', pod('logged'));
      const ledger = (await (
        await fetch(`${emulator.origin}/_emulator/ledger`, { headers: adminHeaders(emulator) })
      ).json()) as {
        pods: { id: string; billing: boolean }[];
      };
      assert.ok(ledger.pods.some((p) => p.id === r.body.id && p.billing));
      const log = (await (
        await fetch(`${emulator.origin}/_emulator/requests`, { headers: adminHeaders(emulator) })
      ).json()) as {
        requests: { route: string; status: number; key: string }[];
      };
      assert.deepEqual(log.requests[log.requests.length - 1], {
        ...log.requests[log.requests.length - 1],
        route: 'createPod',
        status: 201,
        key: 'account',
      });
    });

    it("answers 401 on every admin route without the account key (a pod's own key included), and changes nothing", async () => {
      const r = await api.post<PodBody>('/pods', pod('admin-key'));
      const podKey = emulator.pod(r.body.id)?.apiKey ?? '';
      assert.ok(podKey !== '');
      const routes: [string, string][] = [
        ['GET', '/_emulator/ledger'],
        ['GET', '/_emulator/requests'],
        ['GET', '/_emulator/pods'],
        ['GET', '/_emulator/violations'],
        ['GET', '/_emulator/faults'],
        ['DELETE', '/_emulator/faults'],
        ['POST', '/_emulator/faults'],
      ];
      const fault = JSON.stringify({ kind: 'podDies', podId: r.body.id });
      for (const authorization of [undefined, 'Bearer rpa_wrong', `Bearer ${podKey}`]) {
        for (const [method, route] of routes) {
          const answer = await fetch(`${emulator.origin}${route}`, {
            method,
            headers: {
              'content-type': 'application/json',
              ...(authorization === undefined ? {} : { authorization }),
            },
            ...(method === 'POST' ? { body: fault } : {}),
          });
          assert.equal(answer.status, 401, `${method} ${route} with ${authorization ?? 'no key'}`);
          assert.match(await answer.text(), /account key/);
        }
      }
      assert.deepEqual(emulator.faults.pending(), [], 'a fault was installed without the key');
      const allowed = await fetch(`${emulator.origin}/_emulator/faults`, {
        headers: adminHeaders(emulator),
      });
      assert.equal(allowed.status, 200);
    });
  });
});
