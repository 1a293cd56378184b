/**
 * Train on a target with nodes = 2 (issue 37 steps 3-4), through the product's train flow on the
 * emulator: one Instant Cluster of two real pods (the REAL bootstrap and watchdog on each), each
 * member's watchdog verdict read and its share of the cost cap armed, the run's files on each
 * node, examples/ddp/train.py started by torchrun on both (gloo on CPU over the cluster network),
 * rank 0's results retrieved verified, each node's job.log kept under runs/<id>/nodes/<rank>/,
 * then the whole cluster deleted in one call and confirmed. A member that never answers SSH
 * fails the run naming it, and no member is left billing. The cases after the first are about
 * the product's flow around the job (a member's death, the refused watchdog delete, Ctrl-C, the
 * cost cap): torchrun starts the step trainer there (clusterStepTrainer.py: train.py's arguments
 * and files, its ranks in lockstep, no torch import).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadConfig } from '../../src/core/config';
import { cancel, train } from '../../src/core/flow';
import { decodeRunRecord } from '../../src/core/runs/runRecord';
import { podSpends } from '../../src/core/runs/spend';
import type { Timing } from '../../src/core/timing';
import { Lab, runCli } from '../helpers/lifecycle';
import { STEP_TRAINER_PY } from '../helpers/clusterRun';
import { runpodTarget } from '../helpers/tinyWorkspace';
import { waitFor } from '../emulator/testing';

const TRAIN_PY = path.join(__dirname, '..', '..', 'examples', 'ddp', 'train.py');

const TOML = `[project]
name = "ddp"

[training]
target = "cluster"
trainer = "command"
command = "train.py --steps 8 --out output"
launcher = "torchrun"
upload = ["train.py"]

${runpodTarget('cluster', { targetExtra: 'nodes = 2\nmax_cost_usd = 5\n' })}`;

describe('train on a 2-node cluster, launched by torchrun', function () {
  this.timeout(600_000); // two torch imports per node on a shared 2-core machine
  let lab: Lab | null = null;
  afterEach(async () => {
    await lab?.close();
    lab = null;
  });

  /** Rank 0's first logged step on its pod: the job runs on both nodes. */
  async function trainingStarted(l: Lab, runId: () => string): Promise<string[]> {
    return waitFor(
      "rank 0's first step",
      () => {
        const members = l.emulator.clusters()[0]?.memberIds;
        const rank0 = members?.[0] === undefined ? undefined : l.emulator.pod(members[0]);
        if (!members || !rank0 || runId() === '') return undefined;
        const file = path.join(rank0.dirs.workspace, 'overbrainer', runId(), 'metrics.jsonl');
        try {
          return fs.readFileSync(file, 'utf8').includes('"event": "log"') ||
            fs.readFileSync(file, 'utf8').includes('"event":"log"')
            ? members
            : undefined;
        } catch {
          return undefined;
        }
      },
      300_000,
      200,
    );
  }

  function longer(config: Parameters<typeof train>[1]): Parameters<typeof train>[1] {
    const training = config.training!;
    const trainer = training.trainer;
    assert.equal(trainer.kind, 'command');
    return {
      ...config,
      training: {
        ...training,
        // Steps of 0.2 s: the step trainer does not spin through its steps (nor fill metrics).
        trainer: {
          ...trainer,
          command: 'train.py --steps 100000 --step-seconds 0.2 --out output',
        } as typeof trainer,
      },
    };
  }

  /** `train` on the lab (tracked), and the ID of the run it made ('' until it has one). */
  function trainOn(l: Lab, config: Parameters<typeof train>[1], signal?: AbortSignal) {
    let runId = '';
    const training = l.track(
      train(l.deps, config, l.workspace, { onRun: (r) => (runId = r.id), signal }),
    );
    return { training, runId: () => runId };
  }

  /** The run's run.json, decoded as the product reads it. */
  function recordOf(l: Lab, runId: string) {
    return decodeRunRecord(
      fs.readFileSync(path.join(l.runDir(runId), 'run.json'), 'utf8'),
      'run.json',
    );
  }

  /** The run's two members, both in the ledger and neither billing; the emulator holds no cluster. */
  function assertClusterDeleted(l: Lab, runId: string) {
    const members = l.emulator.ledger().pods.filter((p) => p.runId === runId);
    assert.equal(members.length, 2);
    assert.ok(
      members.every((p) => !p.billing),
      JSON.stringify(members),
    );
    assert.deepEqual(l.emulator.clusters(), []);
    return members;
  }

  /** A lab whose train.py is examples/ddp's (`ddp`) or the step trainer (`steps`). */
  async function labWith(trainer: 'ddp' | 'steps' = 'steps', timing: Partial<Timing> = {}) {
    assert.ok(existsSync('/usr/bin/torchrun'), 'apt-get install python3-torch');
    const started = await Lab.start({ timing });
    lab = started;
    fs.writeFileSync(path.join(started.workspace, 'overbrainer.toml'), TOML);
    const trainPy = trainer === 'ddp' ? TRAIN_PY : STEP_TRAINER_PY;
    fs.copyFileSync(trainPy, path.join(started.workspace, 'train.py'));
    const loaded = loadConfig(started.workspace, {});
    assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.errors));
    return { lab: started, config: loaded.config };
  }

  it('runs examples/ddp on 2 nodes to verified results, then deletes the whole cluster', async () => {
    const { lab: l, config } = await labWith('ddp');
    const run = trainOn(l, config);
    const result = await run.training;
    const runId = run.runId();
    const runDir = l.runDir(runId);
    const logs = [0, 1].map((rank) => {
      const file = path.join(runDir, 'nodes', String(rank), 'job.log');
      return existsSync(file) ? fs.readFileSync(file, 'utf8') : '(none)';
    });
    assert.equal(result.run.state, 'succeeded', `${result.summary}\n${logs.join('\n----\n')}`);
    const rank0 = JSON.parse(fs.readFileSync(path.join(runDir, 'output', 'rank-0.json'), 'utf8'));
    assert.equal(rank0.world_size, 2);
    const steps = fs
      .readFileSync(path.join(runDir, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { event: string; step?: number })
      .filter((r) => r.event === 'log');
    assert.equal(steps.at(-1)?.step, 8);
    for (const log of logs) assert.notEqual(log, '(none)');
    const record = recordOf(l, runId);
    assert.ok(record.cluster, 'run.json records the cluster');
    assert.deepEqual(
      record.cluster.nodes.map((n) => [n.rank, n.state, n.costCapAtUnixS !== null]),
      [
        [0, 'ended', true],
        [1, 'ended', true],
      ],
    );
    assert.notEqual(record.cluster.deletedAt, null);
    const members = assertClusterDeleted(l, runId);
    // The spend counts both members, at the rate Runpod gave, as pods of their own.
    const spends = podSpends(l.deps.store, Date.now()).filter((p) => p.runId === runId);
    assert.deepEqual(spends.map((p) => p.podId).sort(), members.map((p) => p.id).sort());
    assert.ok(spends.every((p) => p.status === 'ended' && (p.estimatedUsd ?? 0) > 0));
    assert.ok(
      members.every((p) => p.deletedBy === 'account'),
      JSON.stringify(members),
    );
    // spend reads the cluster's bill (GET /billing/clusters, the emulator's ledger) beside the
    // estimate of its 2 members, and saves it in run.json.
    const spent = await runCli(l, ['spend', '--json']);
    assert.equal(spent.code, 0, spent.stderr);
    const row = (JSON.parse(spent.stdout) as { runs: Record<string, unknown>[] }).runs.find(
      (r) => r.run_id === runId,
    );
    assert.ok(row, spent.stdout);
    const ledgerUsd = members.reduce((sum, p) => sum + p.costUsd, 0);
    assert.equal(row.pods, 2);
    assert.equal(row.pod_id, record.cluster.id);
    assert.ok(
      typeof row.billed_usd === 'number' && Math.abs(row.billed_usd - ledgerUsd) <= 0.0002,
      `billed ${String(row.billed_usd)} vs the ledger's ${ledgerUsd}`,
    );
    // The estimate counts from before the create was sent: never under the bill.
    assert.ok(Number(row.estimated_usd) >= Number(row.billed_usd) - 0.0001, JSON.stringify(row));
    assert.equal(recordOf(l, runId).cluster?.billedUsd, row.billed_usd);
    // runs logs --node R: node R's kept job.log (its last lines); a rank not in the cluster refused.
    const node1 = await runCli(l, ['runs', 'logs', runId, '--node', '1', '--tail', '3']);
    assert.equal(node1.code, 0, node1.stderr);
    assert.equal(node1.stdout.trimEnd(), logs[1]!.trimEnd().split('\n').slice(-3).join('\n'));
    const node2 = await runCli(l, ['runs', 'logs', runId, '--node', '2']);
    assert.notEqual(node2.code, 0);
    assert.match(node2.stderr, /cluster has no node 2: its nodes are 0, 1/);
  });

  it('a member that never answers SSH fails the run naming it; every member deleted', async () => {
    // Node 0 never publishes an SSH endpoint: the run waits out readyTimeoutMs for it (the
    // lab's 90 s is for pods booting among a dozen labs; node 1's sshd answers in seconds).
    const { lab: l, config } = await labWith('steps', { readyTimeoutMs: 30_000 });
    await l.emulator.faults.sshdNeverStarts('unpublished');
    const run = trainOn(l, config);
    const error = await run.training.then(
      () => assert.fail('the run started'),
      (caught: unknown) => caught,
    );
    assert.match(String(error), /node 0 did not answer SSH/);
    assert.match(String(error), /the whole cluster was deleted/);
    const record = recordOf(l, run.runId());
    assert.equal(record.state, 'failed');
    assert.match(record.message ?? '', /node 0 did not answer SSH/);
    assertClusterDeleted(l, run.runId());
  });

  it('a node killed mid-run with max_recoveries = 0 fails the run naming it; the whole cluster deleted, nothing billing', async () => {
    const { lab: l, config } = await labWith();
    const long = longer(config);
    const target = long.targets.cluster;
    assert.ok(target?.kind === 'runpod');
    const run = trainOn(l, { ...long, targets: { cluster: { ...target, maxRecoveries: 0 } } });
    const members = await trainingStarted(l, run.runId);
    await l.emulator.faults.podDies(members[1]!);
    const result = await run.training;
    assert.equal(result.run.state, 'failed', result.summary);
    assert.match(result.run.message ?? '', /^node 1 failed the run: its pod \S+ is /);
    assert.match(result.run.message ?? '', /not recovered: max_recoveries = 0/);
    const record = recordOf(l, run.runId());
    assert.equal(record.cluster?.nodes[1]?.state, 'failed');
    assert.notEqual(record.cluster?.deletedAt, null);
    assertClusterDeleted(l, run.runId());
  });

  it("a member's watchdog refused its cluster delete while the client follows: run.json records it and a warning says what still ends the cluster", async () => {
    const { lab: l, config } = await labWith();
    await l.emulator.faults.memberKeyDeletesCluster(false);
    const warnings: string[] = [];
    l.deps.bus.on((event) => {
      if (event.type === 'warning' && event.code === 'cluster_delete_refused') {
        warnings.push(event.message);
      }
    });
    const abort = new AbortController();
    const run = trainOn(l, longer(config), abort.signal);
    const members = await trainingStarted(l, run.runId);
    // Node 1's watchdog reaches its cost cap (moved to a passed time): it tries the cluster
    // delete with its own key, Runpod refuses it, and it writes .pod/cluster_delete.
    const dir = path.join(
      l.emulator.pod(members[1]!)!.dirs.workspace,
      'overbrainer',
      run.runId(),
      '.pod',
    );
    fs.writeFileSync(path.join(dir, 'cost_cap_at.test'), '1\n');
    fs.renameSync(path.join(dir, 'cost_cap_at.test'), path.join(dir, 'cost_cap_at'));
    const said = await waitFor(
      'the refusal said',
      () => (warnings.length > 0 ? warnings[0] : undefined),
      120_000,
      100,
    );
    assert.match(
      said,
      /node 1's watchdog tried to delete cluster \S+ with its own key and Runpod refused it \(refused http_403\)/,
    );
    assert.match(said, /overbrainer pod rm \S+/);
    assert.equal(recordOf(l, run.runId()).cluster?.memberDeleteRefused, 'node 1: refused http_403');
    abort.abort();
    const result = await run.training;
    assert.equal(result.run.state, 'cancelled', result.summary);
    assert.equal(warnings.length, 1, 'said once');
    assertClusterDeleted(l, run.runId());
  });

  it('Ctrl-C while the job runs stops following only (the cluster trains on); train cancel then cancels the run and deletes the whole cluster', async () => {
    const { lab: l, config } = await labWith();
    const abort = new AbortController();
    const run = trainOn(l, longer(config), abort.signal);
    await trainingStarted(l, run.runId);
    abort.abort();
    const stopped = await run.training;
    assert.equal(stopped.run.state, 'running', stopped.summary);
    assert.match(stopped.summary, /stopped following .*overbrainer train attach/, stopped.summary);
    assert.equal(l.emulator.clusters().length, 1, 'the cluster trains on');
    // The run's job is rank 0's, whichever node's start ended last (they start at once).
    const rank0 = l.emulator.pod(l.emulator.clusters()[0]!.memberIds[0]!)!;
    const pidFile = path.join(rank0.dirs.workspace, 'overbrainer', run.runId(), 'job.pid');
    assert.equal(
      recordOf(l, run.runId()).job?.pid,
      Number(fs.readFileSync(pidFile, 'utf8').trim()),
    );
    const result = await cancel(l.deps, longer(config), run.runId());
    assert.equal(result.run.state, 'cancelled', result.summary);
    assertClusterDeleted(l, run.runId());
  });

  it('max_cost_usd reached for the whole cluster while the client follows: the client deletes it', async () => {
    const { lab: l, config } = await labWith();
    const long = longer(config);
    const target = long.targets.cluster;
    assert.ok(target?.kind === 'runpod');
    // $0.002 for 2 nodes: each node's share runs out seconds after the create.
    const capped = { ...long, targets: { cluster: { ...target, maxCostUsd: 0.002 } } };
    const run = trainOn(l, capped);
    const result = await run.training;
    assert.equal(result.run.state, 'failed', result.summary);
    assert.equal(result.run.end?.cause, 'cost_cap');
    assert.match(result.run.message ?? '', /max_cost_usd reached for the whole cluster/);
    assertClusterDeleted(l, run.runId());
  });
});
