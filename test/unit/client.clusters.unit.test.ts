/**
 * The Runpod client's Instant Cluster calls against a scripted loopback server (every status,
 * reset and page is what the test says), with every body sent and every answer given checked
 * against Runpod's own document (the emulator's contract: openapi-v2.json and its extensions).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { CLUSTER_CREATE_MESSAGES, runMessage } from '../../src/core/runpod/apiErrors';
import {
  createClusterBody,
  type CreateClusterBody,
  type CreateClusterParams,
} from '../../src/core/runpod/clusters';
import { Agent } from 'undici';
import { RunpodClient } from '../../src/core/runpod/client';
import { OpenApiContract } from '../emulator/openapi';
import {
  API_KEY,
  apiError,
  drive,
  DOC,
  fakeTiming,
  json,
  makeClient,
  pod,
  problem,
  query,
  route,
  SpyClock,
  startServer,
  waitFor,
} from '../helpers/runpodClient';

const contract = OpenApiContract.load();

function params(overrides: Partial<CreateClusterParams> = {}): CreateClusterParams {
  return {
    name: 'overbrainer-run1-1',
    image: 'runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404',
    gpuTypeId: 'NVIDIA H100 80GB HBM3',
    gpuCountPerPod: 8,
    podCount: 2,
    containerDiskGb: 50,
    env: { OVERBRAINER_RUN_ID: 'run1' },
    cmd: ['bash', '-c', `echo "it's $HOME" && exec sleep infinity`],
    ports: ['22/tcp'],
    ...overrides,
  };
}

/** A cluster as the document describes it (checked against it in the first test). */
function cluster(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 'cl7h9k2m4n',
    name: 'overbrainer-run1-1',
    type: 'TRAINING',
    compute: { gpuTypeId: 'NVIDIA H100 80GB HBM3', gpuCountPerPod: 8, podCount: 2 },
    dataCenterId: 'US-TX-3',
    pods: { total: 2, byStatus: { RUNNING: 1, PROVISIONING: 1 } },
    network: { cidr: '10.65.0.0/16' },
    primary: { podId: 'pod0', status: 'RUNNING', sshEndpoint: '1.2.3.4:22001' },
    createdAt: '2026-06-29T20:00:00Z',
    ...overrides,
  };
}

function member(id: string, rank: number | null): Record<string, unknown> {
  return pod({ id, cluster: { id: 'cl7h9k2m4n', rank, ip: `10.65.0.${(rank ?? 9) + 2}` } });
}

function sentBody(raw: string | undefined): CreateClusterBody {
  return JSON.parse(raw ?? '') as CreateClusterBody;
}

describe('Runpod client: the cluster create body', () => {
  it("is the document's CreateClusterRequest, with and without a network volume", () => {
    for (const body of [
      createClusterBody(params()),
      createClusterBody(params({ networkVolumeId: 'vol1', dataCenterIds: ['US-TX-3'] })),
    ]) {
      assert.deepEqual(contract.validateRequestBodyOf('createCluster', body), []);
    }
    const withVolume = createClusterBody(params({ networkVolumeId: 'vol1' }));
    assert.deepEqual(withVolume.mounts, {
      network: [{ volumeId: 'vol1', path: '/workspace/data' }],
    });
    assert.deepEqual(
      contract.validateResponseOf('createCluster', {
        status: 201,
        contentType: 'application/json',
        body: cluster(),
      }),
      [],
      'the test fixture is a cluster the document allows',
    );
  });

  it("sends every member's command as one shell line in args that gives back the same argv", () => {
    const cmd = ['bash', '-c', `printf '%s\\n' "a b" 'c'"d" && echo $HOME; exit 0`, '--', 'x y'];
    const body = createClusterBody(params({ cmd }));
    const words = spawnSync('bash', ['-c', `eval "set -- $ARGS"; printf '%s\\0' "$@"`], {
      env: { ARGS: body.args },
      encoding: 'utf8',
    });
    assert.equal(words.status, 0, words.stderr);
    assert.deepEqual(words.stdout.split('\0').slice(0, -1), cmd);
  });

  it('refuses a body outside the document (one node) before anything is sent', async () => {
    const server = await startServer((_hit, res) => json(res, 201, cluster()));
    const { client } = makeClient(server);
    const body = { ...createClusterBody(params()), compute: { ...params(), podCount: 1 } };
    const error = await apiError(client.createCluster(body as CreateClusterBody), 'rejected');
    assert.match(error.message, /invalid cluster create body \(compute/);
    assert.equal(server.hits.length, 0);
  });
});

describe('Runpod client: cluster calls', () => {
  it('creates a cluster: posts the body once and reads the cluster', async () => {
    const server = await startServer((_hit, res) => json(res, 201, cluster()));
    const { client } = makeClient(server);
    const made = await client.createCluster(createClusterBody(params()));
    assert.equal(server.hits.length, 1);
    assert.equal(server.hits[0]?.url, '/v2/clusters');
    assert.deepEqual(sentBody(server.hits[0]?.body), createClusterBody(params()));
    assert.deepEqual(made, {
      id: 'cl7h9k2m4n',
      name: 'overbrainer-run1-1',
      type: 'TRAINING',
      gpuTypeId: 'NVIDIA H100 80GB HBM3',
      gpuCountPerPod: 8,
      podCount: 2,
      dataCenterId: 'US-TX-3',
      podsTotal: 2,
      podsByStatus: { RUNNING: 1, PROVISIONING: 1 },
      networkCidr: '10.65.0.0/16',
      primary: { podId: 'pod0', status: 'RUNNING', sshEndpoint: '1.2.3.4:22001' },
      createdAt: '2026-06-29T20:00:00Z',
    });
  });

  it("tells when the create's bytes are about to leave, not when it was called", async () => {
    // One connection: the create waits behind a look the server holds, while the clock moves on.
    let release = (): void => undefined;
    const server = await startServer((hit, res) => {
      if (hit.method === 'GET') release = () => json(res, 200, cluster());
      else json(res, 201, cluster());
    });
    const dispatcher = new Agent({ connections: 1 });
    const clock = new SpyClock();
    const client = new RunpodClient({
      baseUrl: server.baseUrl,
      apiKey: API_KEY,
      clock,
      timing: fakeTiming(),
      dispatcher,
    });
    try {
      const look = client.getCluster('cl7h9k2m4n');
      await waitFor(() => server.hits.length === 1, 'the held look');
      const told: number[] = [];
      const calledMs = clock.nowMs();
      const made = client.createCluster(createClusterBody(params()), {
        onSending: (atMs) => told.push(atMs),
      });
      await clock.advanceMs(5_000);
      assert.deepEqual(told, [], 'nothing written while the connection is busy');
      release();
      await look;
      await made;
      assert.deepEqual(told, [calledMs + 5_000]);
      assert.equal(server.hits[1]?.method, 'POST');
    } finally {
      client.dispose();
      await dispatcher.close();
    }
  });

  const failures: [number, 'capacity' | 'forbidden' | 'ambiguous' | 'rejected', string][] = [
    [400, 'capacity', CLUSTER_CREATE_MESSAGES.capacity],
    [403, 'forbidden', CLUSTER_CREATE_MESSAGES.forbidden],
    [422, 'rejected', CLUSTER_CREATE_MESSAGES.rejected],
    [500, 'ambiguous', CLUSTER_CREATE_MESSAGES.server],
    [503, 'ambiguous', CLUSTER_CREATE_MESSAGES.server],
  ];
  for (const [status, kind, message] of failures) {
    it(`a create's ${status} is ${kind} with the cluster's fixed message, sent once`, async () => {
      const server = await startServer((_hit, res) => problem(res, status, 'SERVER-TEXT'));
      const { client, clock } = makeClient(server);
      const error = await drive(
        clock,
        apiError(client.createCluster(createClusterBody(params())), kind),
      );
      assert.equal(error.message, message);
      assert.equal(runMessage(error), `Runpod answered ${status}`);
      assert.equal(server.hits.length, 1);
    });
  }

  it('a create whose connection is reset is ambiguous (the cluster may exist), sent once', async () => {
    const server = await startServer((_hit, _res, req) => req.socket.destroy());
    const { client, clock } = makeClient(server);
    const error = await drive(
      clock,
      apiError(client.createCluster(createClusterBody(params())), 'ambiguous'),
    );
    assert.ok(error.message.startsWith(CLUSTER_CREATE_MESSAGES.transport));
    assert.match(error.message, /the cluster may exist/);
    assert.equal(server.hits.length, 1);
  });

  it("gets a cluster; Runpod's 404 is null, another 404 is not_found", async () => {
    let answer: 'ok' | 'runpod404' | 'proxy404' = 'ok';
    const server = await startServer((_hit, res) => {
      if (answer === 'ok') json(res, 200, cluster());
      else if (answer === 'runpod404') problem(res, 404, 'cluster not found');
      else {
        res.writeHead(404, { 'content-type': 'text/html' });
        res.end('<html>nope</html>');
      }
    });
    const { client } = makeClient(server);
    assert.equal((await client.getCluster('cl7h9k2m4n'))?.primary?.podId, 'pod0');
    assert.equal(route(server.hits[0]!), '/v2/clusters/cl7h9k2m4n');
    answer = 'runpod404';
    assert.equal(await client.getCluster('cl7h9k2m4n'), null);
    answer = 'proxy404';
    await apiError(client.getCluster('cl7h9k2m4n'), 'not_found');
    await apiError(client.getCluster('..'), 'rejected');
  });

  it('reads a cluster not yet placed: no data center, network, primary', async () => {
    const server = await startServer((_hit, res) => {
      const bare = cluster({ pods: { total: 0, byStatus: {} } });
      delete bare.dataCenterId;
      delete bare.network;
      delete bare.primary;
      json(res, 200, bare);
    });
    const { client } = makeClient(server);
    const got = await client.getCluster('cl7h9k2m4n');
    assert.equal(got?.dataCenterId, null);
    assert.equal(got?.networkCidr, null);
    assert.equal(got?.primary, null);
  });

  it('lists clusters, every page, and finds an attempt by its exact name', async () => {
    const server = await startServer((hit, res) => {
      if (query(hit).get('cursor') === null) {
        json(res, 200, {
          clusters: [cluster({ id: 'a', name: 'overbrainer-run1-1' })],
          pagination: { hasNextPage: true, nextCursor: 'p2' },
        });
      } else {
        json(res, 200, {
          clusters: [cluster({ id: 'b', name: 'overbrainer-run1-10' })],
          pagination: { hasNextPage: false, nextCursor: null },
        });
      }
    });
    const { client } = makeClient(server);
    assert.deepEqual(
      (await client.listClusters()).map((c) => c.id),
      ['a', 'b'],
    );
    assert.deepEqual(
      (await client.listClusters({ name: 'overbrainer-run1-1' })).map((c) => c.id),
      ['a'],
    );
  });

  it("lists a cluster's members as pods in rank order with their membership; a gone cluster is null", async () => {
    let gone = false;
    const server = await startServer((_hit, res) => {
      if (gone) problem(res, 404, 'cluster not found');
      else json(res, 200, { pods: [member('p1', 1), member('p9', null), member('p0', 0)] });
    });
    const { client } = makeClient(server);
    const members = await client.listClusterPods('cl7h9k2m4n');
    assert.equal(route(server.hits[0]!), '/v2/clusters/cl7h9k2m4n/pods');
    assert.deepEqual(
      members?.map((m) => [m.id, m.cluster?.rank, m.cluster?.ip]),
      [
        ['p0', 0, '10.65.0.2'],
        ['p1', 1, '10.65.0.3'],
        ['p9', null, '10.65.0.11'],
      ],
    );
    assert.equal(members?.[0]?.cluster?.clusterId, 'cl7h9k2m4n');
    gone = true;
    assert.equal(await client.listClusterPods('cl7h9k2m4n'), null);
  });

  it('deletes a cluster: true when accepted, false when already gone, retried on a 5xx', async () => {
    const statuses = [503, 204, 404];
    const server = await startServer((_hit, res) => {
      const status = statuses.shift() ?? 404;
      if (status === 204) {
        res.writeHead(204);
        res.end();
      } else problem(res, status, 'x');
    });
    const { client, clock } = makeClient(server);
    assert.equal(await drive(clock, client.deleteCluster('cl7h9k2m4n')), true);
    assert.equal(server.hits.length, 2);
    assert.equal(server.hits[0]?.method, 'DELETE');
    assert.equal(await client.deleteCluster('cl7h9k2m4n'), false);
  });

  it("a pod delete's 409 is cluster_member, naming the cluster delete as the next action", async () => {
    const server = await startServer((_hit, res) =>
      problem(res, 409, 'Pod belongs to a cluster and cannot be terminated via the pod endpoints.'),
    );
    const { client } = makeClient(server);
    const error = await apiError(client.deletePod('p0'), 'cluster_member');
    assert.match(error.message, /delete its cluster \(overbrainer pod rm CLUSTER_ID\)/);
    assert.equal(server.hits.length, 1);
  });

  it('lists the members among the pods only when asked (includeClusterPods=true)', async () => {
    const server = await startServer((_hit, res) => json(res, 200, { pods: [member('p0', 0)] }));
    const { client } = makeClient(server);
    await client.listPods();
    await client.listPods({ includeClusterPods: true });
    assert.equal(query(server.hits[0]!).get('includeClusterPods'), null);
    assert.equal(query(server.hits[1]!).get('includeClusterPods'), 'true');
  });

  it("reads the document's own cluster billing example", async () => {
    const example =
      DOC.paths['/v2/billing/clusters'].get.responses['200'].content['application/json'].examples
        .clusterBilling.value;
    const server = await startServer((_hit, res) => json(res, 200, example));
    const { client } = makeClient(server);
    const bill = await client.clusterBilling('5c2n8m4q', { bucketSize: 'hour' });
    assert.equal(query(server.hits[0]!).get('clusterId'), '5c2n8m4q');
    assert.equal(query(server.hits[0]!).get('bucketSize'), 'hour');
    assert.equal(bill.totalAmount, 99);
    assert.equal(bill.networkingAmount, 1);
    assert.equal(bill.records[0]?.clusterId, '5c2n8m4q');
  });
});
