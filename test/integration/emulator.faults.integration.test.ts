/**
 * Every fault the emulator injects, as a client observes it: over the API (statuses, bodies,
 * headers, lost connections, timeouts) and over SSH. Faults are installed both in code and
 * through `POST /_emulator/faults`.
 */
import assert from 'node:assert/strict';
import { probeSshBanner } from '../emulator/container';
import { NO_CAPACITY_DETAIL, startEmulator, type Emulator } from '../emulator/emulator';
import {
  adminHeaders,
  ApiClient,
  assertPodGone,
  ed25519,
  snapshotPod,
  sshExec,
  testPodCmd,
  testPodEnv,
  waitFor,
  waitForPod,
  type PodBody,
  type Problem,
} from '../emulator/testing';

const GPU = 'NVIDIA GeForce RTX 4090';
const A5000 = 'NVIDIA RTX A5000';

describe('Runpod emulator: faults', function () {
  this.timeout(180_000); // generous: the machine is shared
  let emulator: Emulator;
  let api: ApiClient;
  const hostKey = ed25519();
  const client = ed25519();

  function body(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      name,
      image: 'x',
      gpu: { id: GPU },
      ports: ['22/tcp'],
      cmd: ['sleep', 'infinity'],
      ...extra,
    };
  }
  function sshBody(name: string): Record<string, unknown> {
    return body(name, { env: testPodEnv(hostKey, client), cmd: testPodCmd() });
  }
  async function postFault(fault: unknown): Promise<Response> {
    return fetch(`${emulator.origin}/_emulator/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...adminHeaders(emulator) },
      body: JSON.stringify(fault),
    });
  }
  async function podNames(): Promise<string[]> {
    return (await api.get<{ pods: PodBody[] }>('/pods')).body.pods.map((p) => p.name);
  }

  before(async () => {
    emulator = await startEmulator({
      bootDelaysMs: { provisioning: 50, starting: 50, restart: 50 },
    });
    api = new ApiClient(emulator.baseUrl, emulator.apiKey);
  });
  after(async () => {
    await emulator?.close();
    assert.deepEqual(emulator.contractViolations(), []);
  });
  afterEach(async () => {
    await emulator.faults.reachable();
    emulator.faults.clear();
    for (const p of emulator.pods()) await api.delete(`/pods/${p.id}`);
  });

  it('capacity per GPU type and data center (over HTTP)', async () => {
    const set = await postFault({ kind: 'stock', gpuId: GPU, dataCenterId: 'EU-RO-1', stock: 0 });
    assert.equal(set.status, 200);
    const refused = await api.post<Problem>('/pods', body('eu', { dataCenterIds: ['EU-RO-1'] }));
    assert.equal(refused.status, 400);
    assert.equal(refused.body.detail, NO_CAPACITY_DETAIL);
    const placed = await api.post<PodBody>('/pods', body('any'));
    assert.equal(placed.status, 201);
    assert.equal(placed.body.dataCenterId, 'US-TX-3');
    const catalog = await api.get<{
      gpus: { id: string; dataCenters?: { id: string; availability: string }[] }[];
    }>('/catalog/gpus?include=AVAILABILITY&product=POD');
    const dcs = catalog.body.gpus.find((g) => g.id === GPU)?.dataCenters;
    assert.equal(dcs?.find((d) => d.id === 'EU-RO-1')?.availability, 'NONE');
    await emulator.faults.setStock(GPU, 8, 'EU-RO-1');
  });

  it('402, 403 (for one GPU type only) and 422 on create', async () => {
    await postFault([
      { kind: 'request', route: 'createPod', effect: { type: 'status', status: 402 } },
      {
        kind: 'request',
        route: 'createPod',
        gpuId: GPU,
        nth: 2,
        effect: { type: 'status', status: 403 },
      },
    ]);
    const poor = await api.post<Problem>('/pods', body('poor'));
    assert.equal(poor.status, 402);
    assert.match(poor.body.detail, /balance/);
    const forbidden = await api.post<Problem>('/pods', body('forbidden'));
    assert.equal(forbidden.status, 403);
    await emulator.faults.failCall('createPod', 422);
    const invalid = await api.post<Problem>('/pods', body('invalid', { gpu: { id: A5000 } }));
    assert.equal(invalid.status, 422);
    assert.ok(invalid.body.errors && invalid.body.errors.length > 0);
    assert.equal((await api.post('/pods', body('fine', { gpu: { id: A5000 } }))).status, 201);
    assert.deepEqual(await podNames(), ['fine']);
    assert.deepEqual(emulator.faults.pending(), []);
  });

  it('a 5xx on the Nth call of a route, then normal answers', async () => {
    const created = await api.post<PodBody>('/pods', body('nth'));
    await emulator.faults.failCall('getPod', 503, { nth: 2 });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await api.get(`/pods/${created.body.id}`)).status);
    assert.deepEqual(statuses, [200, 503, 200]);
    const log = emulator.requests().filter((r) => r.route === 'getPod');
    assert.equal(log.length, 3);
    assert.ok(log[1]?.faultId);
  });

  it('a dropped connection; a delete that happened although its answer was lost', async () => {
    await emulator.faults.dropCall('listPods');
    await assert.rejects(api.get('/pods'), /fetch failed/);
    assert.equal((await api.get('/pods')).status, 200);
    const created = await api.post<PodBody>('/pods', body('lost-answer'));
    await emulator.faults.dropCall('deletePod', { applied: true });
    await assert.rejects(api.delete(`/pods/${created.body.id}`), /fetch failed/);
    // Deleted all the same: TERMINATED while its processes are killed (as Runpod shows a pod it
    // is deleting; a loaded machine takes a while), then 404 once none is left.
    const look = await api.get<PodBody>(`/pods/${created.body.id}`);
    assert.ok(
      look.status === 404 || look.body.status === 'TERMINATED',
      `deleted all the same: ${look.status} ${JSON.stringify(look.body)}`,
    );
    for (let gone = look.status === 404; !gone;) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      gone = (await api.get(`/pods/${created.body.id}`)).status === 404;
    }
    assert.equal(emulator.requests().filter((r) => r.status === 'dropped').length, 2);
  });

  it('a create that makes the pod but answers 500, and one that never answers', async () => {
    await emulator.faults.createThenFail();
    const failed = await api.post<Problem>('/pods', body('ambiguous-500'));
    assert.equal(failed.status, 500);
    assert.deepEqual(await podNames(), ['ambiguous-500'], 'the pod exists and bills');
    await emulator.faults.createThenHang();
    await assert.rejects(
      api.post('/pods', body('ambiguous-hang'), { timeoutMs: 500 }),
      /aborted|timeout/i,
    );
    assert.deepEqual((await podNames()).sort(), ['ambiguous-500', 'ambiguous-hang']);
    assert.equal(emulator.ledger().pods.filter((p) => p.billing).length, 2);
  });

  it('429 with Retry-After', async () => {
    await emulator.faults.rateLimit('createPod', 7, 2);
    for (let i = 0; i < 2; i++) {
      const r = await api.post<Problem>('/pods', body('limited'));
      assert.equal(r.status, 429);
      assert.equal(r.headers.get('retry-after'), '7');
      assert.equal(r.body.title, 'Too Many Requests');
    }
    assert.equal((await api.post('/pods', body('limited'))).status, 201);
  });

  it('transient 404s for an existing pod, N looks in a row, in Runpod’s problem shape', async () => {
    const created = await api.post<PodBody>('/pods', body('flaky'));
    await emulator.faults.transientNotFound(created.body.id, 3);
    const looks: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await api.get<Problem>(`/pods/${created.body.id}`);
      looks.push(r.status);
      if (r.status === 404)
        assert.deepEqual(r.body, { title: 'Not Found', status: 404, detail: 'pod not found' });
    }
    assert.deepEqual(looks, [404, 404, 404, 200]);
  });

  it('slow boot for the next create only', async () => {
    // The fault is a delay, so the look at the slow pod races the fast pod's boot: 10 s, not
    // 1.5 s, which a boot at a load of 30 on 2 cores outlasted (the slow pod was RUNNING already).
    await emulator.faults.slowBoot({ provisioningMs: 10_000 });
    const slow = await api.post<PodBody>('/pods', body('slow'));
    const fast = await api.post<PodBody>('/pods', body('fast'));
    await waitForPod(api, fast.body.id, (p) => p.status === 'RUNNING');
    assert.equal((await api.get<PodBody>(`/pods/${slow.body.id}`)).body.status, 'PROVISIONING');
    await waitForPod(api, slow.body.id, (p) => p.status === 'RUNNING');
  });

  it('sshd never starting: port never published', async () => {
    await emulator.faults.sshdNeverStarts('unpublished');
    const created = await api.post<PodBody>('/pods', sshBody('unpublished'));
    await waitForPod(api, created.body.id, (p) => p.status === 'RUNNING');
    const internals = emulator.pod(created.body.id);
    // sshd does listen inside: only the port mapping never appears.
    await waitFor('sshd inside the pod', async () =>
      (await probeSshBanner(internals?.sshPort ?? 0, 500)) ? true : undefined,
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal((await api.get<PodBody>(`/pods/${created.body.id}`)).body.ssh.direct, null);
  });

  it('sshd never starting: a published port that refuses connections', async () => {
    await postFault({ kind: 'sshd', mode: 'closed' });
    const created = await api.post<PodBody>('/pods', sshBody('closed'));
    const { pod } = await waitForPod(api, created.body.id, (p) => p.ssh.direct !== null);
    const port = pod.ssh.direct?.port ?? 0;
    await assert.rejects(
      sshExec({ port, privateKey: client.privateKey, hostKeyBlob: hostKey.blob }, 'true'),
      /ECONNREFUSED/,
    );
  });

  it('sshd never starting: a published port that never sends a banner', async () => {
    const created = await api.post<PodBody>('/pods', sshBody('silent'));
    await emulator.faults.sshdNeverStarts('silent', created.body.id);
    await api.post(`/pods/${created.body.id}/action`, { action: 'stop' });
    await api.post(`/pods/${created.body.id}/action`, { action: 'start' });
    const { pod } = await waitForPod(api, created.body.id, (p) => p.ssh.direct !== null);
    const port = pod.ssh.direct?.port ?? 0;
    await assert.rejects(
      sshExec(
        { port, privateKey: client.privateKey, hostKeyBlob: hostKey.blob, timeoutMs: 1000 },
        'true',
      ),
      /Timed out while waiting for handshake/,
    );
  });

  it('a pod that dies (EXITED, still billing its disk), one that crashes (restarted), one that vanishes', async () => {
    const ids: string[] = [];
    for (const name of ['dies', 'crashes', 'vanishes'])
      ids.push((await api.post<PodBody>('/pods', sshBody(name))).body.id);
    const ready = await Promise.all(
      ids.map((id) => waitForPod(api, id, (p) => p.ssh.direct !== null)),
    );
    const [dies = '', crashes = '', vanishes = ''] = ids;
    const [diesSnapshot, , vanishesSnapshot] = ids.map((id) =>
      snapshotPod(emulator.pod(id)?.pidNamespace),
    );

    await emulator.faults.podDies(dies);
    const dead = await api.get<PodBody>(`/pods/${dies}`);
    assert.equal(dead.body.status, 'EXITED');
    assert.equal(dead.body.cost, 0);
    assert.equal(dead.body.ssh.direct, null);
    if (diesSnapshot) assertPodGone(diesSnapshot, 'the dead pod');
    assert.equal(emulator.ledger().pods.find((p) => p.id === dies)?.billing, true);

    const oldPort = ready[1]?.pod.ssh.direct?.port;
    await postFault({ kind: 'podCrash', podId: crashes });
    const back = await waitForPod(
      api,
      crashes,
      (p) => p.ssh.direct !== null && p.ssh.direct.port !== oldPort,
    );
    assert.equal(back.pod.status, 'RUNNING');

    await emulator.faults.podVanishes(vanishes);
    assert.equal((await api.get(`/pods/${vanishes}`)).status, 404);
    if (vanishesSnapshot) assertPodGone(vanishesSnapshot, 'the vanished pod');
    assert.equal(emulator.ledger().pods.find((p) => p.id === vanishes)?.deletedBy, 'provider');
  });

  it('the API unreachable for a while: connections refused, then reset', async () => {
    // A pooled keep-alive connection is cut first (UND_ERR_SOCKET); new ones are refused/reset.
    const errorCodes = async (): Promise<string[]> => {
      const codes: string[] = [];
      for (let i = 0; i < 3; i++) {
        codes.push(
          await api.get('/pods').then(
            (r) => String(r.status),
            (e: Error & { cause?: { code?: string } }) => e.cause?.code ?? e.message,
          ),
        );
      }
      return codes;
    };
    const back = (): Promise<true> =>
      waitFor('the API back', async () =>
        (await api.get('/pods').catch(() => undefined))?.status === 200 ? true : undefined,
      );
    await emulator.faults.unreachable(1500, 'refuse');
    const refused = await errorCodes();
    assert.ok(refused.includes('ECONNREFUSED') && !refused.includes('200'), refused.join(','));
    await back();
    await emulator.faults.unreachable(1500, 'reset');
    const reset = await errorCodes();
    assert.ok(reset.includes('ECONNRESET') && !reset.includes('200'), reset.join(','));
    await back();
  });

  it('lists, validates and clears faults over HTTP', async () => {
    const bad = await postFault({
      kind: 'request',
      route: 'getPods',
      effect: { type: 'status', status: 200 },
    });
    assert.equal(bad.status, 400);
    const problem = (await bad.json()) as Problem;
    assert.match(problem.detail, /route/);
    assert.match(problem.detail, /status/);
    await postFault({
      kind: 'request',
      route: 'getPod',
      times: 'always',
      effect: { type: 'hang' },
    });
    const listed = (await (
      await fetch(`${emulator.origin}/_emulator/faults`, { headers: adminHeaders(emulator) })
    ).json()) as {
      faults: unknown[];
    };
    assert.equal(listed.faults.length, 1);
    assert.equal(
      (
        await fetch(`${emulator.origin}/_emulator/faults`, {
          method: 'DELETE',
          headers: adminHeaders(emulator),
        })
      ).status,
      204,
    );
    assert.deepEqual(emulator.faults.pending(), []);
  });
});
