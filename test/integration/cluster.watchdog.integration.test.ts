/**
 * A cluster run whose client is gone (SIGKILL mid-job): each member's own watchdog ends the run
 * at its limit by deleting the whole cluster with its own key (`DELETE /v2/clusters/{id}`),
 * Runpod's pod calls refusing a member. Whether Runpod lets a member's key do that is not
 * settled, so the emulator plays both answers: allowed, the watchdog deletes the cluster and the
 * ledger stops with no client following; refused, the watchdog says so on the pod, the cluster
 * keeps billing, and only the client's path (`pod rm`) ends it.
 *
 * The limit is reached by writing the member's `.pod/cost_cap_at` to a passed time once the
 * client is dead (what the client armed, moved earlier): the cap's arithmetic is tested where it
 * is armed (cluster.train), this file tests who can end a cluster nobody follows. The job runs
 * under the real torchrun on both members: the step trainer (clusterStepTrainer.py: examples/ddp's
 * arguments and files, its ranks in lockstep, no torch import), a step every 0.3 s for longer than
 * the test.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { GPU, Lab, spawnLifecycleChild } from '../helpers/lifecycle';
import { runCli } from '../helpers/lifecycle';
import { STEP_TRAINER_PY } from '../helpers/clusterRun';
import { waitFor } from '../emulator/testing';

const TOML = `[project]
name = "ddp"

[training]
target = "cluster"
trainer = "command"
command = "train.py --steps 100000 --step-seconds 0.3 --out output"
launcher = "torchrun"
upload = ["train.py"]

[targets.cluster]
kind = "runpod"
gpu_types = [${JSON.stringify(GPU.rtx4090)}]
nodes = 2
max_hours = 1
max_cost_usd = 5
boot_grace_minutes = 5
retrieve_grace_minutes = 1
`;

describe("a cluster run nobody follows: its members' watchdogs and the cluster delete", function () {
  this.timeout(600_000); // a torchrun agent per node on a shared 2-core machine
  let lab: Lab | null = null;
  afterEach(async () => {
    await lab?.close();
    lab = null;
  });

  /** A lab whose client (a child process) ran the cluster job to its first step, then died. */
  async function orphanedClusterRun(): Promise<{
    l: Lab;
    runId: string;
    clusterId: string;
    members: string[];
  }> {
    assert.ok(existsSync('/usr/bin/torchrun'), 'apt-get install python3-torch');
    const l = await Lab.start();
    lab = l;
    fs.writeFileSync(path.join(l.workspace, 'overbrainer.toml'), TOML);
    fs.copyFileSync(STEP_TRAINER_PY, path.join(l.workspace, 'train.py'));
    const child = spawnLifecycleChild(l);
    let runId = '';
    let cluster: { id: string; memberIds: string[] } | undefined;
    try {
      await waitFor(
        () => `rank 0's first step (client: ${child.stderr()})`,
        () => {
          cluster = l.emulator.clusters()[0];
          const rank0 = cluster?.memberIds[0];
          const pod = rank0 === undefined ? undefined : l.emulator.pod(rank0);
          const runs = path.join(l.workspace, 'runs');
          runId = existsSync(runs) ? (fs.readdirSync(runs)[0] ?? '') : '';
          if (!pod || runId === '') return undefined;
          const file = path.join(pod.dirs.workspace, 'overbrainer', runId, 'metrics.jsonl');
          try {
            return /"event": ?"log"/.test(fs.readFileSync(file, 'utf8')) ? true : undefined;
          } catch {
            return undefined;
          }
        },
        300_000,
        200,
      );
    } finally {
      await child.kill();
    }
    assert.ok(cluster && cluster.memberIds.length === 2);
    const ledger = l.emulator.ledger().pods.filter((p) => p.runId === runId);
    assert.ok(
      ledger.length === 2 && ledger.every((p) => p.billing),
      'the cluster outlived its client',
    );
    return { l, runId, clusterId: cluster.id, members: cluster.memberIds };
  }

  /** Member `podId`'s cost cap moved to a passed time (as if its share ran out now). */
  function capReached(l: Lab, podId: string, runId: string): string {
    const pod = l.emulator.pod(podId);
    assert.ok(pod, `pod ${podId}`);
    const dir = path.join(pod.dirs.workspace, 'overbrainer', runId, '.pod');
    const tmp = path.join(dir, 'cost_cap_at.test');
    fs.writeFileSync(tmp, `${Math.floor(Date.now() / 1000) - 1}\n`);
    fs.renameSync(tmp, path.join(dir, 'cost_cap_at'));
    return dir;
  }

  it('member key allowed: the watchdog deletes the whole cluster at the cap with no client; the ledger stops', async () => {
    const setup = await orphanedClusterRun();
    const { l, runId, clusterId, members } = setup;
    await l.emulator.faults.memberKeyDeletesCluster(true);
    capReached(l, members[1]!, runId);
    await waitFor(
      'the cluster deleted by a member watchdog',
      () => (l.emulator.clusters().length === 0 ? true : undefined),
      120_000,
      200,
    );
    const ledger = l.emulator.ledger().pods.filter((p) => p.runId === runId);
    assert.equal(ledger.length, 2);
    assert.ok(
      ledger.every((p) => !p.billing && p.deletedBy === 'pod'),
      JSON.stringify(ledger),
    );
    const deletes = l.emulator
      .requests()
      .filter((r) => r.route === 'deleteCluster' && r.path.includes(clusterId));
    assert.deepEqual(
      deletes.map((r) => r.key),
      [`pod:${members[1]}`],
      'one delete, by the member whose cap passed',
    );
  });

  it('member key refused: the watchdog tries and says so on its pod; the cluster bills on, pod ls lists it, pod rm CLUSTER_ID deletes it whole', async () => {
    const setup = await orphanedClusterRun();
    const { l, runId, clusterId, members } = setup;
    const dir = capReached(l, members[1]!, runId);
    const refused = await waitFor(
      "the member's cluster delete refused",
      () =>
        l.emulator
          .requests()
          .find(
            (r) => r.route === 'deleteCluster' && r.key === `pod:${members[1]}` && r.status === 403,
          ),
      120_000,
      200,
    );
    assert.ok(refused.path.includes(clusterId));
    await waitFor(
      'the refusal written on the pod',
      () => (existsSync(path.join(dir, 'cluster_delete')) ? true : undefined),
      30_000,
      200,
    );
    assert.equal(fs.readFileSync(path.join(dir, 'cluster_delete'), 'utf8'), 'refused http_403\n');
    assert.match(
      fs.readFileSync(path.join(dir, 'watchdog.log'), 'utf8'),
      /this member's key may not delete its cluster \(http_403\)/,
    );
    assert.equal(l.emulator.clusters().length, 1, 'the cluster still exists');
    assert.ok(
      l.emulator
        .ledger()
        .pods.filter((p) => p.runId === runId)
        .every((p) => p.billing),
      'its members bill on',
    );
    // pod ls lists both members as the run's cluster; pod rm RUN_ID keeps a run in progress's
    // cluster without --force; pod rm CLUSTER_ID --force deletes it whole, the run failed by it.
    const listed = await runCli(l, ['pod', 'ls', '--json']);
    assert.equal(listed.code, 0, listed.stderr);
    const rows = (JSON.parse(listed.stdout) as { pods: Record<string, unknown>[] }).pods;
    assert.deepEqual(
      rows
        .map((r) => [r.run_id, r.pod_id, r.cluster_id, r.node_rank, r.note])
        .sort((a, b) => Number(a[3]) - Number(b[3])),
      members.map((podId, rank) => [
        runId,
        podId,
        clusterId,
        rank,
        `node ${rank} of cluster ${clusterId}; run running`,
      ]),
    );
    const kept = await runCli(l, ['pod', 'rm', runId]);
    assert.notEqual(kept.code, 0, kept.stdout);
    assert.match(kept.stdout + kept.stderr, new RegExp(`its cluster ${clusterId} was kept`));
    assert.equal(l.emulator.clusters().length, 1, 'pod rm without --force kept it');
    const removed = await runCli(l, ['pod', 'rm', clusterId, '--force']);
    assert.equal(removed.code, 0, `${removed.stdout}\n${removed.stderr}`);
    assert.deepEqual(l.emulator.clusters(), []);
    const ledger = l.emulator.ledger().pods.filter((p) => p.runId === runId);
    assert.ok(
      ledger.every((p) => !p.billing && p.deletedBy === 'account'),
      JSON.stringify(ledger),
    );
    const run = l.runJson(runId) as { state: string; cluster: { deleted_at: string | null } };
    assert.equal(run.state, 'failed');
    assert.notEqual(run.cluster.deleted_at, null);
  });
});
