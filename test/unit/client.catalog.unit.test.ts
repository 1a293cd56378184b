/**
 * The Runpod client against the scripted loopback server of test/helpers/runpodClient.ts (waits on
 * its FakeClock, or on a scaled-down Timing for timeouts): catalog, volumes, templates, account
 * secrets, request bodies against the document.
 */
import assert from 'node:assert/strict';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { RunpodClient } from '../../src/core/runpod/client';
import { templateSpec, type TemplateSpec } from '../emulator/catalog';
import {
  DOC,
  EXAMPLE_POD,
  startServer,
  json,
  problem,
  route,
  query,
  makeClient,
  apiError,
  pod,
  body,
} from '../helpers/runpodClient';

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
    const template = (id: string, serverless: boolean): TemplateSpec =>
      templateSpec({ id, name: `t-${id}`, image: 'img:1', serverless });
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
