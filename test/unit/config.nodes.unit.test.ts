/**
 * A run on many nodes in overbrainer.toml (issue 37 step 1): `nodes` on a runpod target (1 to
 * 250, each error at its place), `launcher = "torchrun"` for a command, the pairs that cannot run
 * (a cluster without the launcher, the launcher on this machine) refused with what to write,
 * the command under torchrun's cluster flags (on one pod: one node, a process per GPU), and the quote of N nodes: N × the pod's rate, the
 * worst case of all N, the self-serve limit said above 8.
 */
import assert from 'node:assert/strict';
import { nodesProblem, type TrainingConfig } from '../../src/core/config';
import { quote, quoteLines } from '../../src/core/pod/quote';
import { watchdogSpans } from '../../src/core/pod/worstCase';
import { PRODUCTION_TIMING } from '../../src/core/timing';
import { trainerJobOf } from '../../src/core/train/trainerJob';
import { pickTarget } from '../../src/core/flow/deps';
import { FlowError } from '../../src/core/flow';
import { at, BASE, one, ok, pod } from '../helpers/configFixture';

const TORCHRUN_BASE = `[training]
trainer = "command"
command = "train.py --steps 12"
launcher = "torchrun"

[targets.pod]
kind = "runpod"
gpu_types = ["NVIDIA A40"]
max_hours = 6
`;

describe('nodes and launcher in overbrainer.toml', () => {
  it('takes nodes (default 1) and launcher = "torchrun" (default none)', () => {
    assert.equal(pod(ok(BASE)).nodes, 1);
    const config = ok(`${TORCHRUN_BASE}nodes = 4\ngpu_count = 2\n`);
    assert.equal(pod(config).nodes, 4);
    assert.equal(pod(config).gpuCount, 2);
    assert.deepEqual(config.training?.trainer, {
      kind: 'command',
      command: 'train.py --steps 12',
      launcher: 'torchrun',
    });
    assert.equal(pod(ok(BASE, { OVERBRAINER_TARGETS__POD__NODES: '3' })).nodes, 3);
  });

  it('refuses nodes out of 1..250 or not whole, at its place, naming what to write', () => {
    for (const bad of ['0', '251', '2.5', '"two"']) {
      const error = one(`${BASE}nodes = ${bad}\n`);
      assert.equal(error.key, 'targets.pod.nodes');
      at(error, 9, 9, /whole number from 1 .* to 250/, /nodes = 2/);
    }
  });

  it('refuses a launcher other than torchrun, and a launcher with Axolotl', () => {
    const bad = one(
      `${BASE.replace('command = "python train.py"', 'command = "x"\nlauncher = "mpirun"')}`,
    );
    assert.equal(bad.key, 'training.launcher');
    assert.match(bad.message, /"torchrun"/);
    const axolotl = one(
      BASE.replace(
        'trainer = "command"\ncommand = "python train.py"',
        'trainer = "axolotl"\nconfig = "a.yaml"\nlauncher = "torchrun"',
      ),
    );
    assert.equal(axolotl.key, 'training.launcher');
    assert.match(axolotl.message, /only applies to trainer = "command"/);
  });

  it('a cluster needs the launcher, the launcher needs a pod: refused when the target is chosen', () => {
    const training = (launcher: 'torchrun' | null): TrainingConfig => ({
      ...ok(BASE).training!,
      trainer: { kind: 'command', command: 'train.py', launcher },
    });
    const target = (nodes: number) => ({ ...pod(ok(BASE)), nodes });
    assert.equal(nodesProblem(training('torchrun'), target(2)), null);
    assert.equal(nodesProblem(training(null), target(1)), null);
    const noLauncher = nodesProblem(training(null), target(2));
    assert.match(
      noLauncher?.message ?? '',
      /nodes = 2: a run on a cluster needs .*launcher = "torchrun"/,
    );
    assert.match(noLauncher?.hint ?? '', /launcher = "torchrun"/);
    // One pod: torchrun on one node, a process per GPU, so one [training] serves a pod and a cluster.
    assert.equal(nodesProblem(training('torchrun'), target(1)), null);
    const local = nodesProblem(training('torchrun'), { kind: 'local', name: 'here', venv: null });
    assert.match(local?.message ?? '', /runs on this machine/);
    assert.match(local?.hint ?? '', /torchrun --standalone/);
    // Train refuses it before anything is created.
    assert.throws(
      () => pickTarget(ok(`${BASE}nodes = 2\n`), {}),
      (error: unknown) =>
        error instanceof FlowError &&
        error.kind === 'bad_config' &&
        /nodes = 2/.test(error.message),
    );
    assert.equal(pickTarget(ok(`${TORCHRUN_BASE}nodes = 2\n`), {}).kind, 'runpod');
  });

  it('starts the command under torchrun with the cluster variables, as written', () => {
    const config = ok(`${TORCHRUN_BASE}nodes = 2\n`);
    const job = trainerJobOf(config.training!, '', pod(config));
    assert.equal(job.trainer, 'command');
    const command = job.trainer === 'command' ? job.command : '';
    assert.match(
      command,
      /^export NCCL_SOCKET_IFNAME=ens1 GLOO_SOCKET_IFNAME=ens1; exec torchrun /,
    );
    assert.match(command, /--nnodes="\$\{NUM_NODES:\?/);
    assert.match(command, /--node_rank="\$\{NODE_RANK:\?/);
    assert.match(command, / train\.py --steps 12$/);
    const plain = trainerJobOf(ok(BASE).training!, '', pod(ok(BASE)));
    assert.equal(plain.trainer === 'command' ? plain.command : '', 'python train.py');
  });

  it('on one pod starts the command under torchrun on one node, one process per GPU of the pod, its rendezvous on a free port', () => {
    const config = ok(`${TORCHRUN_BASE}gpu_count = 4\n`);
    const job = trainerJobOf(config.training!, '', pod(config));
    assert.equal(
      job.trainer === 'command' ? job.command : '',
      'exec torchrun --nnodes=1 --nproc_per_node=4 --rdzv_backend=c10d --rdzv_endpoint=localhost:0 --rdzv_id=standalone --redirects 1 --tee 1 train.py --steps 12',
    );
  });

  it('quotes N nodes: N × the pod rate, the worst case of all N, the self-serve limit above 8', () => {
    const input = {
      candidates: [{ gpuType: 'NVIDIA A40', pricePerHourUsd: 0.4, availability: 'HIGH' }],
      gpuCount: 2,
      maxHours: 6,
      maxCostUsd: null,
      spans: watchdogSpans(PRODUCTION_TIMING, { bootGraceS: 1800, retrieveGraceS: 1800 }),
      historyS: [],
    };
    const one1 = quote(input);
    const four = quote({ ...input, nodes: 4 });
    assert.equal(four.rates[0]?.usdPerHour, 3.2);
    assert.equal(four.expected?.highUsd, 19.2);
    assert.ok(one1.worstUsd !== null && four.worstUsd !== null);
    assert.ok(
      Math.abs(four.worstUsd - 4 * one1.worstUsd) <= 0.04,
      `${four.worstUsd} vs 4 × ${one1.worstUsd}`,
    );
    const lines = quoteLines(four);
    assert.match(
      lines[0] ?? '',
      /^Nodes: 4 pods of 2 GPUs \(one Instant Cluster, launched by torchrun\)/,
    );
    assert.doesNotMatch(lines[0] ?? '', /self-serve/);
    assert.match(lines.at(-1) ?? '', /Worst case: \$\d+\.\d\d for all 4 nodes/);
    // Which net holds is said plainly: the watchdog's cluster delete, and what holds if refused.
    assert.match(
      lines.at(-1) ?? '',
      /each node's watchdog deletes the whole cluster at its deadline or cost cap \(DELETE \/v2\/clusters\/\{id\}, with its own key\) if Runpod lets a member's key do so, which Runpod has not confirmed; if it refuses, the limits hold only while a client follows the run/,
    );
    assert.match(lines.at(-1) ?? '', /overbrainer pod rm RUN_ID/);
    assert.match(
      quoteLines(quote({ ...input, nodes: 16 }))[0] ?? '',
      /self-serve accounts get at most 8 nodes: 16 needs its sales/,
    );
    assert.doesNotMatch(quoteLines(one1).join('\n'), /Nodes:/);
  });
});
