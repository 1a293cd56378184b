/**
 * A run's cluster as one group of pods (core/pod/cluster.ts) against the emulator's Instant
 * Clusters: every member brought to answer SSH with the pinned host key and ended as one; a node
 * that never comes up ends the whole cluster, and the ledger shows every member deleted; an
 * unanswered create found again by its name, never sent twice.
 */
import assert from 'node:assert/strict';
import { systemClock } from '../../src/core/clock';
import { EventBus } from '../../src/core/events';
import { endCluster, startCluster, type ClusterPlan } from '../../src/core/pod/cluster';
import { PodError } from '../../src/core/pod/podError';
import { RunpodClient } from '../../src/core/runpod/client';
import { PRODUCTION_TIMING, type Timing } from '../../src/core/timing';
import { startEmulator, type Emulator } from '../emulator/emulator';
import { ed25519, testPodCmd, testPodEnv } from '../emulator/testing';

describe('a run on a cluster: its nodes as one group', function () {
  this.timeout(180_000); // generous: the machine is shared
  let emulator: Emulator;
  let client: RunpodClient;
  const hostKey = ed25519();
  const user = ed25519();
  const timing: Timing = {
    ...PRODUCTION_TIMING,
    readyTimeoutMs: 20_000,
    podPollMs: 200,
    reconcileFirstWaitMs: 200,
    reconcileSecondWaitMs: 400,
  };

  function ctx() {
    return { client, bus: new EventBus(), clock: systemClock, timing };
  }

  function plan(runId: string, podCount = 2): ClusterPlan {
    return {
      runId,
      create: {
        image: 'runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404',
        gpuTypeId: 'NVIDIA GeForce RTX 4090',
        gpuCountPerPod: 1,
        podCount,
        containerDiskGb: 20,
        env: testPodEnv(hostKey, user, { OVERBRAINER_RUN_ID: runId }),
        cmd: testPodCmd(),
        ports: ['22/tcp'],
      },
      hostPublicKey: hostKey.publicKey,
      clientPrivateKey: Buffer.from(user.privateKey),
    };
  }

  function members(runId: string) {
    return emulator.ledger().pods.filter((p) => p.runId === runId);
  }

  before(async () => {
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 50, starting: 50 } });
    client = new RunpodClient({
      baseUrl: emulator.baseUrl,
      apiKey: emulator.apiKey,
      clock: systemClock,
      timing,
    });
  });

  after(async () => {
    client?.dispose();
    await emulator?.close();
    assert.deepEqual(emulator?.contractViolations(), []);
  });

  it('brings every node to answer SSH with the pinned host key, then ends them as one', async () => {
    const handle = await startCluster(ctx(), plan('grp-ok'));
    try {
      assert.deepEqual(
        handle.members.map((m) => [m.rank, m.ip]),
        [
          [0, '10.65.0.2'],
          [1, '10.65.0.3'],
        ],
      );
      for (const member of handle.members) {
        const rank = await member.executor.exec(
          'printf %s "$(cat /proc/1/environ | tr "\\0" "\\n" | grep ^NODE_RANK=)"',
        );
        assert.equal(rank.stdout.toString(), `NODE_RANK=${member.rank}`);
      }
    } finally {
      for (const member of handle.members) member.executor.dispose();
    }
    assert.equal(await endCluster(ctx(), 'grp-ok', handle.cluster.id), true);
    assert.deepEqual(
      members('grp-ok').map((p) => [p.billing, p.deletedBy]),
      [
        [false, 'account'],
        [false, 'account'],
      ],
    );
  });

  it('a node that never comes up ends the whole cluster: every member deleted in the ledger', async () => {
    // The first member created (rank 0) never publishes SSH; rank 1 comes up.
    await emulator.faults.sshdNeverStarts('unpublished');
    const failed = await startCluster(ctx(), plan('grp-fail')).then(
      () => assert.fail('a cluster with a node that never came up was started'),
      (error: unknown) => error,
    );
    assert.ok(failed instanceof PodError, String(failed));
    assert.match(failed.message, /node 0 did not answer SSH/);
    assert.match(failed.message, /the whole cluster was deleted/);
    const ledger = members('grp-fail');
    assert.equal(ledger.length, 2);
    assert.deepEqual(
      ledger.map((p) => [p.billing, p.deletedBy]),
      [
        [false, 'account'],
        [false, 'account'],
      ],
    );
    assert.deepEqual(emulator.clusters(), []);
  });

  it('an unanswered create is found by its name and not sent again', async () => {
    const before = emulator.requests().filter((r) => r.route === 'createCluster').length;
    await emulator.faults.add({
      kind: 'request',
      route: 'createCluster',
      applied: true,
      effect: { type: 'status', status: 502 },
    });
    const handle = await startCluster(ctx(), plan('grp-amb'));
    for (const member of handle.members) member.executor.dispose();
    const creates = emulator
      .requests()
      .filter((r) => r.route === 'createCluster')
      .slice(before);
    assert.equal(creates.filter((r) => r.status === 502).length, 1);
    assert.equal(creates.length, 1, 'the create was sent again');
    assert.equal(handle.cluster.name, 'overbrainer-grp-amb-c1');
    assert.equal(await endCluster(ctx(), 'grp-amb', handle.cluster.id), true);
    assert.ok(members('grp-amb').every((p) => !p.billing));
    assert.equal(members('grp-amb').length, 2);
  });
});
