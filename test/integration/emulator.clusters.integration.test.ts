/**
 * The emulator's Instant Clusters: N real pods (namespaced containers with sshd) placed together,
 * each in a network namespace of its own on the cluster's private network, with Runpod's cluster
 * variables; members hidden from the pod list unless asked, refused by the pod delete, billed per
 * member per second, deleted as one (no process left); the member key's cluster delete played
 * both ways; capacity for N pods and an ambiguous create. Every exchange is checked against the
 * document (ApiClient), and so is every answer the emulator sent (contractViolations).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createClusterBody } from '../../src/core/runpod/clusters';
import { startEmulator, NO_CAPACITY_DETAIL, type Emulator } from '../emulator/emulator';
import { type ProcessSnapshot } from '../emulator/container';
import {
  ApiClient,
  assertPodGone,
  ed25519,
  snapshotPod,
  sshExec,
  testPodCmd,
  testPodEnv,
  waitFor,
  type PodBody,
  type Problem,
} from '../emulator/testing';

const GPU = 'NVIDIA GeForce RTX 4090';

interface ClusterBody {
  id: string;
  name: string;
  pods: { total: number; byStatus: Record<string, number> };
  primary?: { podId: string; status: string; sshEndpoint?: string };
  dataCenterId: string;
}
type MemberBody = PodBody & { cluster: { id: string; rank: number; ip: string } };

describe('Runpod emulator: Instant Clusters', function () {
  this.timeout(180_000); // generous: the machine is shared
  let emulator: Emulator;
  let api: ApiClient;
  const hostKey = ed25519();
  const client = ed25519();
  const snapshots: ProcessSnapshot[] = [];

  function body(name: string, podCount: number): Record<string, unknown> {
    return createClusterBody({
      name,
      image: 'runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404',
      gpuTypeId: GPU,
      gpuCountPerPod: 1,
      podCount,
      containerDiskGb: 20,
      env: testPodEnv(hostKey, client, { OVERBRAINER_RUN_ID: name }),
      cmd: testPodCmd(),
      ports: ['22/tcp'],
    });
  }

  async function create(name: string, podCount: number): Promise<ClusterBody> {
    const made = await api.post<ClusterBody>('/clusters', body(name, podCount));
    assert.equal(made.status, 201, JSON.stringify(made.body));
    return made.body;
  }

  /** Waits until every member runs with SSH published; the members by rank. */
  async function running(id: string, podCount: number): Promise<MemberBody[]> {
    await waitFor(`cluster ${id} to run`, async () => {
      const got = await api.get<ClusterBody>(`/clusters/${id}`);
      return got.body.pods.byStatus.RUNNING === podCount && got.body.primary?.sshEndpoint
        ? got.body
        : undefined;
    });
    return waitFor(`members of ${id} to publish SSH`, async () => {
      const pods = (await api.get<{ pods: MemberBody[] }>(`/clusters/${id}/pods`)).body.pods;
      return pods.length === podCount && pods.every((p) => p.ssh.direct !== null)
        ? [...pods].sort((a, b) => a.cluster.rank - b.cluster.rank)
        : undefined;
    });
  }

  function target(member: MemberBody) {
    return {
      port: member.ssh.direct?.port ?? 0,
      privateKey: client.privateKey,
      hostKeyBlob: hostKey.blob,
    };
  }

  before(async () => {
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 50, starting: 50 } });
    api = new ApiClient(emulator.baseUrl, emulator.apiKey);
  });

  after(async () => {
    await emulator?.close();
    for (const snapshot of snapshots) assertPodGone(snapshot, 'a member after close');
    assert.deepEqual(emulator?.contractViolations(), []);
  });

  it('makes N members on one private network with Runpod variables, hidden from the pod list, refused by the pod delete, billed each, deleted as one', async () => {
    const made = await create('overbrainer-clu1-1', 2);
    const members = await running(made.id, 2);
    for (const m of members) snapshots.push(snapshotPod(emulator.pod(m.id)?.pidNamespace));
    assert.deepEqual(
      members.map((m) => [m.cluster.id, m.cluster.rank, m.cluster.ip, m.dataCenterId]),
      [
        [made.id, 0, '10.65.0.2', made.dataCenterId],
        [made.id, 1, '10.65.0.3', made.dataCenterId],
      ],
    );
    const cluster = (await api.get<ClusterBody>(`/clusters/${made.id}`)).body;
    assert.equal(cluster.primary?.podId, members[0]?.id);
    assert.equal(cluster.primary?.sshEndpoint, `127.0.0.1:${members[0]?.ssh.direct?.port}`);

    // Runpod's variables, as its Instant Clusters pages list them.
    const vars = ['PRIMARY_ADDR', 'PRIMARY_PORT', 'MASTER_ADDR', 'MASTER_PORT', 'NODE_ADDR'];
    vars.push('NODE_RANK', 'NUM_NODES', 'NUM_TRAINERS', 'HOST_NODE_ADDR', 'WORLD_SIZE');
    // An SSH session starts with sshd's env; the pod's own is its PID 1's.
    const printed = await sshExec(target(members[1]!), "tr '\\0' '\\n' < /proc/1/environ");
    assert.equal(printed.code, 0, printed.stderr);
    const environ = new Map(
      printed.stdout.split('\n').map((line) => [line.split('=')[0], line] as const),
    );
    assert.deepEqual(
      vars.map((v) => environ.get(v)),
      [
        'PRIMARY_ADDR=10.65.0.2',
        'PRIMARY_PORT=29500',
        'MASTER_ADDR=10.65.0.2',
        'MASTER_PORT=29500',
        'NODE_ADDR=10.65.0.3',
        'NODE_RANK=1',
        'NUM_NODES=2',
        'NUM_TRAINERS=1',
        'HOST_NODE_ADDR=10.65.0.2:29500',
        'WORLD_SIZE=2',
      ],
    );

    // Each member sees only its loopback and the cluster interface; rank 1 reaches the primary's
    // sshd at its private address; the host has no address on that network.
    const net = await sshExec(
      target(members[1]!),
      'ip -o link | cut -d: -f2 | cut -d@ -f1 | tr -d " " | sort | tr "\\n" " "; echo; ip -4 -o addr show ens1 | awk "{print \\$4}";' +
        ' exec 3<>/dev/tcp/10.65.0.2/22; head -c 4 <&3',
    );
    assert.equal(net.code, 0, net.stderr);
    assert.deepEqual(net.stdout.split('\n').slice(0, 3), ['ens1 lo ', '10.65.0.3/16', 'SSH-']);
    const hostAddrs = spawnSync('ip', ['-4', '-o', 'addr'], { encoding: 'utf8' }).stdout;
    assert.ok(!hostAddrs.includes('10.65.'), 'the host got an address of the cluster network');

    // Members are listed among the pods only when asked; the pod calls cannot end them.
    const listed = async (query: string): Promise<string[]> =>
      (await api.get<{ pods: PodBody[] }>(`/pods${query}`)).body.pods.map((p) => p.id);
    const ids = members.map((m) => m.id);
    assert.deepEqual(
      (await listed('')).filter((id) => ids.includes(id)),
      [],
    );
    assert.deepEqual(
      (await listed('?includeClusterPods=true')).filter((id) => ids.includes(id)).sort(),
      [...ids].sort(),
    );
    const refused = await api.delete<Problem>(`/pods/${ids[0]}`);
    assert.equal(refused.status, 409);
    assert.match(refused.body.detail, /DELETE \/v2\/clusters\/\{id\}/);
    const terminate = await api.post<Problem>(`/pods/${ids[1]}/action`, { action: 'terminate' });
    assert.equal(terminate.status, 409);

    // Billed per member, per second, as any pod; the cluster's bill is theirs.
    const billing = emulator.ledger().pods.filter((p) => ids.includes(p.id));
    assert.deepEqual(
      billing.map((p) => [p.clusterId, p.billing]),
      [
        [made.id, true],
        [made.id, true],
      ],
    );

    const deleted = await api.delete(`/clusters/${made.id}`);
    assert.equal(deleted.status, 204);
    assert.equal((await api.get(`/clusters/${made.id}`)).status, 404);
    // Billing ends with the 204; the members' processes and files go after it (each reads
    // TERMINATED meanwhile), and each answers 404 once none of them is left.
    for (const id of ids) {
      await waitFor(`the 404 of member ${id}`, async () => {
        const member = await api.get<{ status: string }>(`/pods/${id}`);
        if (member.status === 404) return true;
        assert.equal(member.body.status, 'TERMINATED');
        return undefined;
      });
    }
    for (const snapshot of snapshots) assertPodGone(snapshot, 'a member after the cluster delete');
    const closed = emulator.ledger().pods.filter((p) => ids.includes(p.id));
    assert.deepEqual(
      closed.map((p) => [p.billing, p.deletedBy]),
      [
        [false, 'account'],
        [false, 'account'],
      ],
    );
    const bill = await api.get<{
      records: { clusterId: string; totalAmount: number }[];
      metadata: { totals: { totalAmount: number } };
    }>(`/billing/clusters?clusterId=${made.id}&bucketSize=hour`);
    assert.equal(bill.status, 200);
    const ledgerUsd = closed.reduce((sum, p) => sum + p.costUsd, 0);
    assert.ok(Math.abs(bill.body.metadata.totals.totalAmount - ledgerUsd) < 1e-5);
    assert.ok(bill.body.records.every((r) => r.clusterId === made.id));
    assert.deepEqual(emulator.clusters(), []);
  });

  it('places all N members in one data center or none: no capacity is 400 and bills nothing', async () => {
    await emulator.faults.setStock(GPU, 2);
    const before = emulator.ledger().pods.length;
    const refused = await api.post<Problem>('/clusters', body('overbrainer-clu2-1', 3));
    assert.equal(refused.status, 400);
    assert.equal(refused.body.detail, NO_CAPACITY_DETAIL);
    assert.equal(emulator.ledger().pods.length, before);
    await emulator.faults.setStock(GPU, 8);
  });

  it("a member's own key reads its cluster and deletes it only where the emulator allows it", async () => {
    const made = await create('overbrainer-clu3-1', 2);
    const members = await running(made.id, 2);
    const memberKey = emulator.pod(members[1]!.id)?.apiKey ?? '';
    const read = await api.get<ClusterBody>(`/clusters/${made.id}`, { key: memberKey });
    assert.equal(read.status, 200);
    const refused = await api.delete<Problem>(`/clusters/${made.id}`, { key: memberKey });
    assert.equal(refused.status, 403);
    assert.equal((await api.get(`/clusters/${made.id}`)).status, 200);
    await emulator.faults.memberKeyDeletesCluster(true);
    const deleted = await api.delete(`/clusters/${made.id}`, { key: memberKey });
    assert.equal(deleted.status, 204);
    const ids = members.map((m) => m.id);
    assert.deepEqual(
      emulator
        .ledger()
        .pods.filter((p) => ids.includes(p.id))
        .map((p) => p.deletedBy),
      ['pod', 'pod'],
    );
    await emulator.faults.memberKeyDeletesCluster(false);
  });

  it('an ambiguous create (500 after the cluster was made) leaves a cluster found by its name', async () => {
    await emulator.faults.add({
      kind: 'request',
      route: 'createCluster',
      applied: true,
      effect: { type: 'status', status: 500 },
    });
    const failed = await api.post('/clusters', body('overbrainer-clu4-1', 2));
    assert.equal(failed.status, 500);
    const listed = (await api.get<{ clusters: ClusterBody[] }>('/clusters')).body.clusters;
    const found = listed.filter((c) => c.name === 'overbrainer-clu4-1');
    assert.equal(found.length, 1);
    assert.equal(found[0]?.pods.total, 2);
    assert.equal((await api.delete(`/clusters/${found[0]?.id}`)).status, 204);
    assert.deepEqual(
      emulator
        .ledger()
        .pods.filter((p) => p.billing)
        .map((p) => [p.name, p.status]),
      [],
    );
  });
});
