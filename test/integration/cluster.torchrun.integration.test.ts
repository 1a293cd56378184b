/**
 * One training on two nodes, launched by PyTorch's own torchrun: a 2-member Instant Cluster of
 * the emulator (each member a real pod in its own network namespace, booted by the project's REAL
 * bootstrap and watchdog), created, looked up and deleted through the product's Runpod client;
 * examples/ddp/train.py sent to each member over SSH and started there by the product's torchrun
 * line, which reads the node's rank and the primary's address from what Runpod gives cluster
 * members (job.env, written by the bootstrap). Real Python, Debian's real torchrun, gloo on CPU:
 * the rendezvous is on the primary, the all-reduce crosses the cluster network, both nodes end
 * with the same parameters, and rank 0's loss curve is that of one process with the same global
 * batch.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../../src/core/clock';
import { podCmd, podEnv, parseWatchdogVerdict } from '../../src/core/pod/podScripts';
import { createClusterBody } from '../../src/core/runpod/clusters';
import { RunpodClient } from '../../src/core/runpod/client';
import type { Pod } from '../../src/core/runpod/api';
import { PRODUCTION_TIMING } from '../../src/core/timing';
import { torchrunLine } from '../../src/core/train/torchrun';
import { startEmulator, type Emulator } from '../emulator/emulator';
import {
  ApiClient,
  assertPodGone,
  ed25519,
  snapshotPod,
  sshExec,
  waitFor,
} from '../emulator/testing';
import type { ProcessSnapshot } from '../emulator/container';

const TRAIN_PY = join(__dirname, '..', '..', 'examples', 'ddp', 'train.py');
/** Debian's torchrun (python3-torch), for /usr/bin/python3: the test tier's setup installs it. */
const TORCHRUN = '/usr/bin/torchrun';
const STEPS = 12;

interface Losses {
  steps: number[];
  losses: number[];
}

function losses(jsonl: string): Losses {
  const logs = jsonl
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { event: string; step?: number; loss?: number })
    .filter((r) => r.event === 'log');
  return { steps: logs.map((r) => r.step ?? -1), losses: logs.map((r) => r.loss ?? NaN) };
}

describe('a training on two cluster nodes, launched by torchrun', function () {
  this.timeout(600_000); // two torch imports per node on a shared 2-core machine
  let emulator: Emulator | undefined;
  let client: RunpodClient | undefined;
  const snapshots: ProcessSnapshot[] = [];

  before(function () {
    // What this file tests: without them it fails, it does not skip.
    assert.ok(existsSync(TORCHRUN), `${TORCHRUN} is missing: apt-get install python3-torch`);
    assert.ok(existsSync(TRAIN_PY), `${TRAIN_PY} is missing`);
  });

  after(async () => {
    client?.dispose();
    await emulator?.close();
    for (const snapshot of snapshots) assertPodGone(snapshot, 'a member after close');
    if (emulator) assert.deepEqual(emulator.contractViolations(), []);
  });

  it('runs examples/ddp on 2 nodes: rendezvous on the primary, the same parameters on both, the loss of one process with the same global batch', async () => {
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 50, starting: 50 } });
    const api = new ApiClient(emulator.baseUrl, emulator.apiKey);
    client = new RunpodClient({
      baseUrl: emulator.baseUrl,
      apiKey: emulator.apiKey,
      clock: systemClock,
      timing: PRODUCTION_TIMING,
    });
    const hostKey = ed25519();
    const user = ed25519();
    const runId = 'ddp-2n';
    const secretName = `overbrainer_host_key_${runId}`;
    const secret = await api.post('/account/secrets', {
      name: secretName,
      value: Buffer.from(hostKey.privateKey).toString('base64'),
    });
    assert.equal(secret.status, 201);
    const env = podEnv({
      runId,
      workdir: '/workspace/overbrainer',
      deadlineUnixS: Math.floor(Date.now() / 1000) + 3600,
      bootGraceS: 600,
      retrieveGraceS: 600,
      keepPod: false,
      apiUrl: emulator.baseUrl,
      authorizedKey: user.publicKey,
      claim: hostKey.publicKey,
      version: '0.1.0',
      hostKey: `{{ RUNPOD_SECRET_${secretName} }}`,
      timing: {
        watchdogIntervalS: 1,
        watchdogProbeTries: 3,
        watchdogProbeWaitS: 1,
        snapshotLeadS: 900,
        snapshotWaitS: 900,
        leaseTtlMs: 900_000,
        preflightTimeoutMs: 60_000,
      },
    });
    const cluster = await client.createCluster(
      createClusterBody({
        name: `overbrainer-${runId}-1`,
        image: 'runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404',
        gpuTypeId: 'NVIDIA GeForce RTX 4090',
        gpuCountPerPod: 1,
        podCount: 2,
        containerDiskGb: 20,
        env,
        cmd: podCmd(),
        ports: ['22/tcp'],
      }),
    );
    const members = await waitFor(
      'both members to publish SSH',
      async () => {
        const pods = await client?.listClusterPods(cluster.id);
        return pods?.length === 2 && pods.every((p) => p.sshDirect !== null) ? pods : undefined;
      },
      60_000,
      200,
    );
    assert.deepEqual(
      members.map((m) => m.cluster?.rank),
      [0, 1],
    );
    for (const member of members) {
      snapshots.push(snapshotPod(emulator.pod(member.id)?.pidNamespace));
      const runDir = join(emulator.pod(member.id)?.dirs.workspace ?? '', 'overbrainer', runId);
      const verdict = await waitFor(
        () =>
          `member ${member.cluster?.rank}'s watchdog verdict (log: ${emulator?.podLog(member.id)})`,
        () => {
          try {
            return readFileSync(join(runDir, '.pod', 'watchdog'), 'utf8');
          } catch {
            return undefined;
          }
        },
        60_000,
      );
      assert.deepEqual(parseWatchdogVerdict(verdict), { kind: 'ready' });
    }

    const target = (member: Pod) => ({
      port: member.sshDirect?.port ?? 0,
      privateKey: user.privateKey,
      hostKeyBlob: hostKey.blob,
      timeoutMs: 60_000,
    });
    const script = Buffer.from(readFileSync(TRAIN_PY)).toString('base64');
    const dir = `/workspace/overbrainer/${runId}/job`;
    const line = torchrunLine('train.py', ['--steps', String(STEPS), '--out', 'output'], {
      torchrun: TORCHRUN,
    });
    // Each node: the script over SSH, then the job's shell (job.env: Runpod's cluster variables)
    // running the product's torchrun line; both at once, as the product starts them.
    const runs = await Promise.all(
      members.map((member) =>
        sshExec(
          target(member),
          `set -e; mkdir -p ${dir}; cd ${dir}; printf '%s' '${script}' | base64 -d > train.py; ` +
            `. /etc/overbrainer/job.env; export OVERBRAINER_METRICS=${dir}/metrics.jsonl; ${line}`,
        ),
      ),
    );
    runs.forEach((run, rank) =>
      assert.equal(run.code, 0, `node ${rank}: ${run.stderr.slice(-3000)}`),
    );

    const outputs = members.map((member) =>
      join(emulator?.pod(member.id)?.dirs.workspace ?? '', 'overbrainer', runId, 'job', 'output'),
    );
    const ranks = outputs.map(
      (out, rank) =>
        JSON.parse(readFileSync(join(out, `rank-${rank}.json`), 'utf8')) as {
          world_size: number;
          sha256: string;
        },
    );
    assert.deepEqual(
      ranks.map((r) => r.world_size),
      [2, 2],
    );
    assert.equal(ranks[0]?.sha256, ranks[1]?.sha256, 'the nodes ended with different parameters');
    const metricsFile = join(outputs[0] ?? '', '..', 'metrics.jsonl');
    const twoNodes = losses(readFileSync(metricsFile, 'utf8'));
    assert.deepEqual(
      twoNodes.steps,
      Array.from({ length: STEPS }, (_, i) => i + 1),
    );
    assert.ok(
      !existsSync(join(outputs[1] ?? '', '..', 'metrics.jsonl')),
      'only rank 0 reports metrics',
    );

    // One process, the same global batch, on this machine: the same loss curve.
    const local = mkdtempSync(join(tmpdir(), 'ob-ddp-1n-'));
    try {
      const one = spawnSync(
        '/usr/bin/python3',
        [TRAIN_PY, '--steps', String(STEPS), '--out', join(local, 'output')],
        {
          env: {
            PATH: '/usr/bin:/bin',
            RANK: '0',
            WORLD_SIZE: '1',
            MASTER_ADDR: '127.0.0.1',
            MASTER_PORT: String(20_000 + Math.floor(Math.random() * 10_000)),
            GLOO_SOCKET_IFNAME: 'lo',
            OVERBRAINER_METRICS: join(local, 'metrics.jsonl'),
          },
          encoding: 'utf8',
          timeout: 300_000,
        },
      );
      assert.equal(one.status, 0, one.stderr);
      const oneNode = losses(readFileSync(join(local, 'metrics.jsonl'), 'utf8'));
      twoNodes.losses.forEach((loss, i) => {
        const alone = oneNode.losses[i] ?? NaN;
        assert.ok(
          Math.abs(loss - alone) <= 1e-4 * Math.max(1, Math.abs(alone)),
          `step ${i + 1}: 2 nodes ${loss}, 1 process ${alone}`,
        );
      });
      assert.ok((twoNodes.losses.at(-1) ?? NaN) < (twoNodes.losses[0] ?? NaN), 'the loss fell');
    } finally {
      rmSync(local, { recursive: true, force: true });
    }

    assert.equal(await client.deleteCluster(cluster.id), true);
    assert.equal(await client.getCluster(cluster.id), null);
    // Billing ends with the delete's answer; the members' processes go after it.
    await waitFor('the members gone after the cluster delete', () =>
      snapshots.every((s) => s.running().length === 0 && s.namespaceEnded()) ? true : undefined,
    );
    for (const snapshot of snapshots) assertPodGone(snapshot, 'a member after the cluster delete');
    assert.equal(emulator.ledger().totals.podsBilling, 0);
  });
});
