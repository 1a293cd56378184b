/**
 * Issue 37's start figures, both sides in the same run, alternating, each round in a lab of its
 * own (the real emulator: namespaced pods and cluster members with the real bootstrap, watchdog
 * and sshd; the product's train flow):
 *
 * - Train → first step: from the call of `train` to rank 0's first metric event, for a run on a
 *   2-node cluster against the same job on one pod, both with launcher = "torchrun" (on one pod:
 *   a process per GPU, its rendezvous on a free port of the pod). Target: 2 nodes at most 1.3 × 1
 *   node.
 * - Bytes over the user's link: every byte the client sent to the pods' SSH endpoints (their
 *   `ssh.direct`) from the call to the first step, counted by a relay the bench puts in front of
 *   each endpoint (the API client's answers name the relay in place of the endpoint, nothing else
 *   changes), for 3 nodes against 1. Target: equal within 5 %.
 *
 * The job is test/helpers/clusterStepTrainer.py (examples/ddp's arguments and files, its ranks in
 * lockstep, no torch import: torchrun itself still imports torch on every node), with a dataset
 * of DATASET_MIB under data/ among the uploaded files, so the upload is what the bytes measure.
 * Every member of every lab shares this machine's cores, where real nodes have their own.
 *
 *   npx tsx bench/run.ts --only clusterStart --runs 3 --no-write [--json FILE]
 *
 * Skipped by --quick (CI): cluster.train and cluster.threeNodes keep the runs in the suite.
 */
import { randomFillSync } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadConfig } from '../src/core/config';
import { train } from '../src/core/flow';
import { ddpToml, LinkMeter, STEP_TRAINER_PY } from '../test/helpers/clusterRun';
import { Lab } from '../test/helpers/lifecycle';
import { median, mib, ms, ratio, type BenchOptions, type BenchReport } from './lib';

const STEPS = 5;

interface Round {
  nodes: number;
  firstStepMs: number;
  /** From the call to the upload's start (the pod, or rank 0, answered SSH). */
  uploadStartMs: number;
  /** From the call to the run's `running` state (every node's job started). */
  runningMs: number;
  sentBytes: number;
  /** What the product reported uploading (its `transfer` upload events, summed at their end). */
  reportedUploadBytes: number;
}

async function oneRound(nodes: number, dataset: string): Promise<Round> {
  const job = {
    steps: STEPS,
    stepSeconds: 0.2,
    saveEvery: 100,
    globalBatch: 48, // divides among 1, 2 and 3 processes
    trainer: 'steps' as const,
  };
  const toml = ddpToml({ ...job, nodes }).replace(
    'upload = ["train.py"]',
    'upload = ["train.py", "data"]',
  );
  const l = await Lab.start({ timing: { checkpointPollMs: 500 } });
  const meter = new LinkMeter();
  try {
    fs.writeFileSync(path.join(l.workspace, 'overbrainer.toml'), toml);
    fs.copyFileSync(STEP_TRAINER_PY, path.join(l.workspace, 'train.py'));
    fs.mkdirSync(path.join(l.workspace, 'data'), { recursive: true });
    fs.linkSync(dataset, path.join(l.workspace, 'data', path.basename(dataset)));
    const loaded = loadConfig(l.workspace, {});
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
    const deps = { ...l.deps, client: meter.client(l.client) };
    let runId = '';
    let firstStepMs = NaN;
    let runningMs = NaN;
    let uploadStartMs = NaN;
    let sentBytes = NaN;
    let reportedUploadBytes = 0;
    const t0 = performance.now();
    const sub = l.bus.on((event) => {
      if (runId === '' || !('runId' in event) || event.runId !== runId) return;
      if (event.type === 'runState' && event.state === 'running' && Number.isNaN(runningMs)) {
        runningMs = performance.now() - t0;
      }
      if (event.type === 'metric' && Number.isNaN(firstStepMs)) {
        firstStepMs = performance.now() - t0;
        sentBytes = meter.total();
      }
      if (event.type === 'transfer' && event.direction === 'upload' && event.phase === 'start') {
        if (Number.isNaN(uploadStartMs)) uploadStartMs = performance.now() - t0;
      }
      if (event.type === 'transfer' && event.direction === 'upload' && event.phase === 'done') {
        reportedUploadBytes += event.bytesDone;
      }
    });
    const result = await l.track(
      train(deps, loaded.config, l.workspace, { onRun: (r) => (runId = r.id) }),
    );
    sub.dispose();
    if (result.run.state !== 'succeeded' || Number.isNaN(firstStepMs)) {
      throw new Error(`the ${nodes}-node run did not succeed with a step: ${result.summary}`);
    }
    return { nodes, firstStepMs, uploadStartMs, runningMs, sentBytes, reportedUploadBytes };
  } catch (error) {
    throw new Error(`${String(error)}\n${l.transcript()}`, { cause: error });
  } finally {
    await meter.close();
    await l.close();
  }
}

export async function clusterStartBench(options: BenchOptions): Promise<BenchReport> {
  const title = '10. A run on a cluster: Train → first step, bytes over the user’s link (issue 37)';
  const baseline = 'the same job on one pod (nodes = 1), measured in the same run, alternating';
  if (options.quick) {
    return { title, baseline, rows: [], notes: ['skipped by --quick: clusters are the suite’s'] };
  }
  const datasetMiB = 16;
  const dir = fs.mkdtempSync(path.join(fs.realpathSync('/tmp'), 'bench-cluster-start-'));
  const dataset = path.join(dir, 'dataset.bin');
  fs.writeFileSync(dataset, randomFillSync(Buffer.alloc(datasetMiB * 1024 * 1024)));
  const rounds: Round[] = [];
  try {
    for (let i = 0; i < options.runs; i++) {
      for (const nodes of [1, 2, 3]) {
        const round = await oneRound(nodes, dataset);
        console.log(
          `  ${nodes} node(s): first step ${ms(round.firstStepMs)} (upload from ${ms(round.uploadStartMs)}, jobs started ${ms(round.runningMs)}), sent ${mib(round.sentBytes)} (upload events ${mib(round.reportedUploadBytes)})`,
        );
        rounds.push(round);
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const of = (nodes: number, pick: (r: Round) => number): number =>
    median(rounds.filter((r) => r.nodes === nodes).map(pick));
  const one = of(1, (r) => r.firstStepMs);
  const two = of(2, (r) => r.firstStepMs);
  const sent1 = of(1, (r) => r.sentBytes);
  const sent3 = of(3, (r) => r.sentBytes);
  const timeRatio = two / one;
  const pairs = Array.from({ length: options.runs }, (_, i) => {
    const round = rounds.slice(i * 3, i * 3 + 3);
    const at = (nodes: number) => round.find((r) => r.nodes === nodes)?.firstStepMs ?? NaN;
    return at(2) / at(1);
  });
  const bytesRatio = sent3 / sent1;
  return {
    title,
    baseline,
    rows: [
      {
        measure: 'Train → first step, 2 nodes (ours) against 1 node (baseline)',
        baseline: ms(one),
        ours: ms(two),
        ratio: ratio(one, two),
        target: '2 nodes ≤ 1.3 × 1 node',
        verdict: timeRatio <= 1.3 ? 'met' : `NOT met (${timeRatio.toFixed(2)} × the 1-node time)`,
      },
      {
        measure: `bytes sent over the user's link until the first step, 3 nodes (ours) against 1 node (baseline), ${datasetMiB} MiB dataset`,
        baseline: mib(sent1),
        ours: mib(sent3),
        ratio: ratio(sent1, sent3),
        target: '3 nodes = 1 node ± 5 %',
        verdict:
          Math.abs(bytesRatio - 1) <= 0.05
            ? 'met'
            : `NOT met (${bytesRatio.toFixed(2)} × the 1-node bytes)`,
      },
    ],
    notes: [
      `medians of ${options.runs} rounds per side; 3 nodes first step ${ms(of(3, (r) => r.firstStepMs))}; 2 nodes sent ${mib(of(2, (r) => r.sentBytes))}`,
      `the start in three parts (medians): Train → the pod (or rank 0) answers SSH and its upload starts 1 node ${ms(of(1, (r) => r.uploadStartMs))}, 2 nodes ${ms(of(2, (r) => r.uploadStartMs))}; Train → every job started 1 node ${ms(of(1, (r) => r.runningMs))}, 2 nodes ${ms(of(2, (r) => r.runningMs))}; job started → first step 1 node ${ms(of(1, (r) => r.firstStepMs - r.runningMs))}, 2 nodes ${ms(of(2, (r) => r.firstStepMs - r.runningMs))}`,
      `2 nodes ÷ 1 node, round by round (each round's three runs back to back): ${pairs.map((p) => p.toFixed(2)).join(', ')}`,
      'bytes: every byte the client wrote to the pods’ SSH endpoints (a relay in front of each), the upload and the SSH sessions’ own traffic (handshakes, readiness, lease, job start)',
    ],
    bounds:
      "the run's files cross the user's link once, to rank 0, as soon as every node answers SSH (each node's one-shot key set as it answers); rank 0 passes them on to the other nodes over the cluster network while they arrive (tee into an ssh to each), and each node's copy is checked against the client's SHA-256s, beside rank 0's own check, before any job starts (pod/clusterFiles.ts); the jobs then start on every node at once. So the bytes over the link are one node's plus each other node's SSH session (handshake, verdict, cost cap, the one-shot key, the hash list, lease and job start). The 2-node start pays beyond one pod's: the members' boot in the emulator (a network namespace and relays per member), and torchrun on two nodes — two agents importing torch and a rendezvous — on the same 2 shared cores, where real nodes have their own: under load that doubled CPU is most of the gap (job started → first step), and the rounds' spread on this shared machine is as wide as the gap to the target.",
    raw: rounds,
  };
}
