/**
 * What the tests of a cluster run of examples/ddp share (issue 37): a lab whose workspace trains
 * examples/ddp/train.py (or its stand-in without torch, clusterStepTrainer.py) under torchrun on a
 * 2-node target, the run started and followed until a checkpoint of rank 0 is home (verified), its
 * run.json as the product reads it, and what the emulator's ledger billed a cluster's members.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import * as path from 'node:path';
import { loadConfig } from '../../src/core/config';
import type { OverbrainerConfig } from '../../src/core/config/types';
import { train } from '../../src/core/flow';
import type { Pod } from '../../src/core/runpod/api';
import type { RunpodClient } from '../../src/core/runpod/client';
import type { RunCluster } from '../../src/core/runs/clusterRecord';
import { decodeRunRecord, type RunRecord } from '../../src/core/runs/runRecord';
import type { Timing } from '../../src/core/timing';
import { waitFor } from '../emulator/testing';
import { Lab } from './lifecycle';
import { runpodTarget } from './tinyWorkspace';

const TRAIN_PY = path.join(__dirname, '..', '..', 'examples', 'ddp', 'train.py');
/**
 * train.py's stand-in that never imports torch (a rank's import is about 2.4 CPU-seconds): the
 * same arguments and files, its ranks in lockstep over a TCP connection of their own.
 */
export const STEP_TRAINER_PY = path.join(__dirname, 'clusterStepTrainer.py');

export interface DdpJob {
  steps: number;
  stepSeconds: number;
  saveEvery: number;
  /** Lines added to the 2-node target (`max_recoveries = 1`). */
  targetExtra?: string;
  /** The target's nodes (default 2), and train.py's global batch (its default: 64, for 2 or 4). */
  nodes?: number;
  globalBatch?: number;
  /**
   * The job's train.py: examples/ddp's real PyTorch training (`ddp`, the default), or
   * {@link STEP_TRAINER_PY} (`steps`) for a case whose subject is the product's flow around the
   * job, not torch's training (torchrun, its rendezvous and the product stay real).
   */
  trainer?: 'ddp' | 'steps';
}

/** overbrainer.toml of a 2-node cluster target running examples/ddp under torchrun. */
export function ddpToml(job: DdpJob): string {
  return `[project]
name = "ddp"

[training]
target = "cluster"
trainer = "command"
command = "train.py --steps ${job.steps} --step-seconds ${job.stepSeconds} --save-every ${job.saveEvery}${job.globalBatch === undefined ? '' : ` --global-batch ${job.globalBatch}`} --out output"
launcher = "torchrun"
upload = ["train.py"]

${runpodTarget('cluster', { targetExtra: `nodes = ${job.nodes ?? 2}\nmax_cost_usd = 5\n${job.targetExtra ?? ''}` })}`;
}

/** A started lab (the caller closes it) whose workspace trains `job`, and its loaded config. */
export async function ddpLab(
  job: DdpJob,
  timing: Partial<Timing> = {},
): Promise<{ l: Lab; config: OverbrainerConfig }> {
  assert.ok(fs.existsSync('/usr/bin/torchrun'), 'apt-get install python3-torch');
  const l = await Lab.start({ timing: { checkpointPollMs: 500, ...timing } });
  try {
    fs.writeFileSync(path.join(l.workspace, 'overbrainer.toml'), ddpToml(job));
    const trainPy = job.trainer === 'steps' ? STEP_TRAINER_PY : TRAIN_PY;
    fs.copyFileSync(trainPy, path.join(l.workspace, 'train.py'));
    const loaded = loadConfig(l.workspace, {});
    assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.errors));
    return { l, config: loaded.config };
  } catch (error) {
    await l.close();
    throw error;
  }
}

/** The newest checkpoint step of rank 0 home and verified (checkpoints/latest.json), or null. */
export function checkpointHome(l: Lab, runId: string): number | null {
  try {
    const latest = JSON.parse(
      fs.readFileSync(path.join(l.runDir(runId), 'checkpoints', 'latest.json'), 'utf8'),
    ) as { step?: number };
    return typeof latest.step === 'number' ? latest.step : null;
  } catch {
    return null;
  }
}

/**
 * Starts the run (tracked by the lab) and waits until a checkpoint of rank 0 at least
 * `atLeastStep` is home, verified: its step, and the first cluster's ID and members by rank.
 */
export async function trainUntilCheckpointHome(
  l: Lab,
  config: OverbrainerConfig,
  atLeastStep: number,
) {
  let runId = '';
  const training = l.track(train(l.deps, config, l.workspace, { onRun: (r) => (runId = r.id) }));
  training.catch(() => undefined);
  const step = await waitFor(
    'a checkpoint of rank 0 home, verified',
    () => {
      if (runId === '') return undefined;
      const at = checkpointHome(l, runId);
      return at !== null && at >= atLeastStep ? at : undefined;
    },
    400_000,
    200,
  );
  const cluster = l.emulator.clusters()[0];
  assert.ok(cluster?.memberIds.length === 2, JSON.stringify(l.emulator.clusters()));
  return { training, runId, step, clusterId: cluster.id, members: cluster.memberIds };
}

/** The run's run.json, decoded as the product reads it. */
export function recordOf(l: Lab, runId: string): RunRecord {
  return decodeRunRecord(
    fs.readFileSync(path.join(l.runDir(runId), 'run.json'), 'utf8'),
    'run.json',
  );
}

/** What the ledger billed the members of `cluster` (each member must be in it). */
export function ledgerUsdOf(l: Lab, cluster: RunCluster): number {
  const ids = new Set(cluster.nodes.map((n) => n.podId));
  const members = l.emulator.ledger().pods.filter((p) => ids.has(p.id));
  assert.equal(members.length, cluster.nodes.length, JSON.stringify(cluster));
  return members.reduce((sum, p) => sum + p.costUsd, 0);
}

/** The run's steps as its metrics.jsonl logged them, in order. */
export function loggedSteps(l: Lab, runId: string): (number | undefined)[] {
  return fs
    .readFileSync(path.join(l.runDir(runId), 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { event: string; step?: number })
    .filter((r) => r.event === 'log')
    .map((r) => r.step);
}

/**
 * Bytes the client sent over the user's link: a relay in front of each pod's SSH endpoint, by the
 * endpoint it stands for (see {@link LinkMeter.client}).
 */
export class LinkMeter {
  private readonly relays = new Map<string, Promise<{ server: Server; port: number }>>();
  private readonly sockets = new Set<Socket>();
  readonly sentBytes = new Map<string, number>();

  /** The relay's port standing for `host:port` (started on first use). */
  portFor(host: string, port: number): Promise<number> {
    const key = `${host}:${port}`;
    let relay = this.relays.get(key);
    if (relay === undefined) {
      relay = new Promise((resolve, reject) => {
        const server = createServer((client) => {
          const upstream = createConnection({ host, port });
          this.sockets.add(client).add(upstream);
          client.on('data', (chunk: Buffer) =>
            this.sentBytes.set(key, (this.sentBytes.get(key) ?? 0) + chunk.length),
          );
          client.pipe(upstream);
          upstream.pipe(client);
          const end = (): void => {
            client.destroy();
            upstream.destroy();
          };
          client.on('error', end).on('close', end);
          upstream.on('error', end).on('close', end);
        });
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => {
          const address = server.address();
          resolve({ server, port: typeof address === 'object' && address ? address.port : 0 });
        });
      });
      this.relays.set(key, relay);
    }
    return relay.then((r) => r.port);
  }

  total(): number {
    return [...this.sentBytes.values()].reduce((a, b) => a + b, 0);
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    for (const relay of this.relays.values()) {
      const { server } = await relay;
      await new Promise((resolve) => server.close(resolve));
    }
  }

  private async pod(pod: Pod): Promise<Pod> {
    if (pod.sshDirect === null) return pod;
    const port = await this.portFor(pod.sshDirect.host, pod.sshDirect.port);
    return { ...pod, sshDirect: { ...pod.sshDirect, host: '127.0.0.1', port } };
  }

  /**
   * `client` whose answers name the relays in place of the pods' SSH endpoints (every call that
   * answers pods); everything else is the client itself.
   */
  client(client: RunpodClient): RunpodClient {
    const wrap = {
      getPod: async (id: string, o?: object) => {
        const pod = await client.getPod(id, o);
        return pod === null ? null : this.pod(pod);
      },
      lookPod: async (id: string, o?: object) => {
        const look = await client.lookPod(id, o);
        return look.pod === null ? look : { ...look, pod: await this.pod(look.pod) };
      },
      listPods: async (...args: Parameters<RunpodClient['listPods']>) =>
        Promise.all((await client.listPods(...args)).map((p) => this.pod(p))),
      listClusterPods: async (id: string, o?: object) => {
        const pods = await client.listClusterPods(id, o);
        return pods === null ? null : Promise.all(pods.map((p) => this.pod(p)));
      },
      createPod: async (...args: Parameters<RunpodClient['createPod']>) =>
        this.pod(await client.createPod(...args)),
    };
    return new Proxy(client, {
      get(target, prop) {
        if (typeof prop === 'string' && prop in wrap) return wrap[prop as keyof typeof wrap];
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
      },
    });
  }
}
