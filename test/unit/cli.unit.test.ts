/**
 * The CLI without a pod: its command line, its words for the core's events,
 * the renderer's throttle and levels, and whole command lines run in-process
 * (`runCli`) against a temp workspace, for the paths that never reach Runpod
 * (help, usage and configuration errors with exit 2, runs ls).
 */
import assert from 'node:assert/strict';
import { parseArgs, UsageError } from '../../src/cli/args';
import {
  deleteReasonWords,
  durationWords,
  filterGpus,
  gpusTable,
  jobStatusWords,
  podLine,
  removedLine,
  runsTable,
} from '../../src/cli/format';
import { CliRenderer } from '../../src/cli/render';
import { EventBus, type DeleteReason } from '../../src/core/events';
import type { GpuType } from '../../src/core/runpod/api';
import { newPodRecord } from '../../src/core/runs/podRecord';
import { FakeClock } from '../helpers/fakeClock';

const HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv1kJg2b3q4c5d6e7f8g9h0i1j2k3l4m5n6o7p8q9r0';

describe('cli: the command line', () => {
  it('parses every command', () => {
    assert.deepEqual(parseArgs(['train']), {
      dir: null,
      command: { kind: 'train', target: null, keepPod: false, resumeFrom: null },
    });
    assert.deepEqual(parseArgs(['-C', 'ws', 'train', '--target', 'pod', '--keep-pod']), {
      dir: 'ws',
      command: { kind: 'train', target: 'pod', keepPod: true, resumeFrom: null },
    });
    assert.deepEqual(parseArgs(['train', '--target=here']).command, {
      kind: 'train',
      target: 'here',
      keepPod: false,
      resumeFrom: null,
    });
    assert.deepEqual(parseArgs(['train', '--resume-from', 'tiny_20261204-060000']).command, {
      kind: 'train',
      target: null,
      keepPod: false,
      resumeFrom: 'tiny_20261204-060000',
    });
    for (const kind of ['attach', 'cancel', 'stop', 'keep', 'release'] as const) {
      assert.deepEqual(parseArgs(['train', kind, 'r1']).command, { kind, runId: 'r1' });
    }
    assert.deepEqual(parseArgs(['runs', 'ls']).command, { kind: 'runs_ls' });
    assert.deepEqual(parseArgs(['runs', 'logs', 'r1', '--node', '1', '--tail', '5']).command, {
      kind: 'runs_logs',
      runId: 'r1',
      node: 1,
      tail: 5,
      pod: false,
      source: null,
      follow: false,
    });
    assert.deepEqual(parseArgs(['pod', 'ls', '-C/tmp/x']), {
      dir: '/tmp/x',
      command: { kind: 'pod_ls' },
    });
    assert.deepEqual(parseArgs(['pod', 'rm', 'r1']).command, {
      kind: 'pod_rm',
      runId: 'r1',
      force: false,
    });
    assert.deepEqual(parseArgs(['pod', 'rm', '--force', 'r1']).command, {
      kind: 'pod_rm',
      runId: 'r1',
      force: true,
    });
    assert.deepEqual(parseArgs(['pod', 'gpus']).command, {
      kind: 'pod_gpus',
      minVramGb: null,
      maxPricePerHourUsd: null,
      inStock: false,
    });
    assert.deepEqual(
      parseArgs(['pod', 'gpus', '--min-vram', '48', '--max-price=1.5', '--in-stock']).command,
      { kind: 'pod_gpus', minVramGb: 48, maxPricePerHourUsd: 1.5, inStock: true },
    );
    assert.deepEqual(parseArgs(['--help']).command, { kind: 'help' });
    assert.deepEqual(parseArgs(['pod', 'rm', '-h']).command, { kind: 'help', topic: 'pod rm' });
  });

  it('refuses anything else with a usage error naming the problem', () => {
    const cases: [string[], RegExp][] = [
      [[], /^no command given$/],
      [['deploy'], /^unknown command deploy$/],
      [['train', '--keep'], /^train has no option --keep$/],
      [['train', 'now'], /^train has no subcommand now/],
      [['train', '--target'], /^--target needs a value$/],
      [['train', '--target', '--keep-pod'], /^--target needs a value$/],
      [['train', '--keep-pod', '--keep-pod'], /^--keep-pod is given twice$/],
      [['train', '--keep-pod=yes'], /^--keep-pod takes no value$/],
      [['train', 'attach'], /^train attach needs a RUN_ID$/],
      [['train', 'attach', 'a', 'b'], /^train attach takes one a RUN_ID, not a b$/],
      [
        ['pod'],
        /^pod has no subcommand \(none\) \(ls, rm, gpus, datacenters, volumes, templates\)$/,
      ],
      [['pod', 'rm'], /^pod rm needs a RUN_ID$/],
      [['pod', 'ls', 'x'], /^pod ls takes no argument x$/],
      [
        ['pod', 'gpus', '--min-vram', 'lots'],
        /^--min-vram takes a number of at least 1, not lots$/,
      ],
      [['runs'], /^runs has no subcommand \(none\) \(ls, show, ssh, logs\)$/],
      [['runs', 'ssh'], /^runs ssh needs a RUN_ID$/],
      [['runs', 'logs'], /^runs logs needs a RUN_ID$/],
      [
        ['runs', 'logs', 'r', '--follow'],
        /^--source and --follow apply to the pod log: add --pod$/,
      ],
      [
        ['runs', 'logs', 'r', '--pod', '--source', 'gpu'],
        /^--source takes container or system, not gpu$/,
      ],
      [
        ['runs', 'logs', 'r', '--tail', '5001'],
        /^--tail takes a whole number from 0 to 5000, not 5001$/,
      ],
      [
        ['runs', 'logs', 'r', '--node', 'one'],
        /^--node takes a node's rank, a whole number from 0 to 249, not one$/,
      ],
      [
        ['runs', 'logs', 'r', '--node', '1', '--pod'],
        /^--node shows a node's job log: drop --pod$/,
      ],
      [['-C'], /^-C needs a directory$/],
      [['-C', 'a', '-C', 'b', 'runs', 'ls'], /^-C is given twice$/],
    ];
    for (const [argv, message] of cases) {
      assert.throws(
        () => parseArgs(argv),
        (error: unknown) => error instanceof UsageError && message.test(error.message),
        argv.join(' '),
      );
    }
  });
});

describe('cli: words', () => {
  it('says durations in the right unit', () => {
    assert.equal(durationWords(0), '0s');
    assert.equal(durationWords(45_999), '45s');
    assert.equal(durationWords(60_000), '1m00s');
    assert.equal(durationWords(221_000), '3m41s');
    assert.equal(durationWords(3_599_000), '59m59s');
    assert.equal(durationWords(4_320_000), '1h12m');
    assert.equal(durationWords(10_920_000), '3h02m');
  });

  it('reads pod events as sentences', () => {
    assert.equal(
      podLine({ kind: 'creating', name: 'overbrainer-r1-1', gpuType: 'NVIDIA A40' }),
      'creating overbrainer-r1-1 (NVIDIA A40)',
    );
    assert.equal(
      podLine({
        kind: 'unavailable',
        gpuType: 'NVIDIA A40',
        reason: 'no capacity for this GPU type',
      }),
      'NVIDIA A40 unavailable (no capacity for this GPU type)',
    );
    assert.equal(
      podLine({
        kind: 'created',
        podId: 'k3x9abc',
        gpuType: 'NVIDIA RTX A6000',
        dataCenter: 'EU-RO-1',
        costPerHourUsd: 0.53,
      }),
      'created k3x9abc (NVIDIA RTX A6000, EU-RO-1, $0.53/h); waiting for SSH',
    );
    assert.equal(
      podLine({
        kind: 'created',
        podId: 'k3',
        gpuType: 'G',
        dataCenter: null,
        costPerHourUsd: null,
      }),
      'created k3 (G); waiting for SSH',
    );
    assert.equal(
      podLine({
        kind: 'ready',
        podId: 'k3x9abc',
        afterMs: 221_000,
        deadline: '2026-09-22T20:30:05Z',
      }),
      'k3x9abc ready after 3m41s; watchdog armed, deletes it by 2026-09-22T20:30:05Z at the latest',
    );
    assert.equal(
      podLine({ kind: 'ready', podId: 'k3x9abc', afterMs: 45_000, deadline: null }),
      'k3x9abc ready after 45s; watchdog armed, kept with no time limit (--keep-pod)',
    );
    assert.equal(
      podLine({ kind: 'deleting', podId: 'k3x9abc', reason: 'not_ready' }),
      'deleting k3x9abc (not ready in time)',
    );
    assert.equal(
      podLine({ kind: 'deleted', podId: 'k3x9abc', uptimeMs: 4_320_000, estimatedSpendUsd: 0.636 }),
      'k3x9abc deleted after 1h12m, about $0.64',
    );
    assert.equal(
      podLine({ kind: 'deleted', podId: 'k3x9abc', uptimeMs: null, estimatedSpendUsd: null }),
      'k3x9abc deleted',
    );
    assert.equal(podLine({ kind: 'kept', podId: 'k3x9abc' }), 'k3x9abc kept (--keep-pod)');
    assert.equal(
      removedLine({
        podId: 'k3x9abc',
        alreadyGone: false,
        uptimeMs: 4_320_000,
        estimatedSpendUsd: 0.636,
      }),
      'pod: k3x9abc deleted after 1h12m, about $0.64',
    );
    // A pod the account no longer had: no deletion, no time, no money claimed.
    assert.equal(
      removedLine({
        podId: 'k3x9abc',
        alreadyGone: true,
        uptimeMs: 3_600_000,
        estimatedSpendUsd: 0.69,
      }),
      'pod: pod k3x9abc was already gone from the account; nothing deleted',
    );
  });

  it('has words for every delete reason and job status', () => {
    const reasons: DeleteReason[] = [
      'retrieved',
      'not_ready',
      'refused',
      'bootstrap_failed',
      'interrupted',
      'deadline',
      'requested',
      'duplicate',
      'local_ssh',
      'cost_cap',
      'cost_cap_unset',
    ];
    const words = reasons.map(deleteReasonWords);
    assert.equal(new Set(words).size, reasons.length);
    assert.equal(deleteReasonWords('interrupted'), 'interrupted before the job started');
    assert.equal(deleteReasonWords('deadline'), 'max_hours reached');
    assert.equal(jobStatusWords({ kind: 'exited', code: 3 }), 'exited with code 3');
    assert.equal(jobStatusWords({ kind: 'lost' }), 'lost (stopped without an exit code)');
  });

  it('lists runs with their pod from pod.json, no API call', () => {
    const pod = newPodRecord('tiny_20260929-120000', false, 1, HOST_KEY);
    pod.beginAttempt('NVIDIA A40', Date.UTC(2026, 8, 29, 12), 6);
    pod.created({ id: 'k3x9abc', costPerHourUsd: 0.53 }, 'created', Date.UTC(2026, 8, 29, 12));
    pod.state = 'running';
    const run = {
      id: 'tiny_20260929-120000',
      target: 'pod',
      created: '2026-09-29T12:00:00Z',
      remoteDir: '/workspace/overbrainer/tiny_20260929-120000',
      job: null,
      state: 'running' as const,
      message: null,
    };
    assert.deepEqual(runsTable([]), []);
    assert.deepEqual(
      runsTable([
        { run, pod, podProblem: null },
        {
          run: {
            ...run,
            id: 'tiny_20260929-110000',
            state: 'failed',
            message: 'exited with code 1',
          },
          pod: null,
          podProblem: null,
        },
      ]),
      [
        'RUN                   STATE    TARGET  CREATED               SUMMARY',
        'tiny_20260929-120000  running  pod     2026-09-29T12:00:00Z  pod running k3x9abc $0.53/h',
        'tiny_20260929-110000  failed   pod     2026-09-29T12:00:00Z  exited with code 1',
      ],
    );
  });

  it('lists Secure-cloud GPU types within the limits, cheapest first', () => {
    const gpu = (
      id: string,
      vram: number,
      price: number | null,
      stock: string | null,
    ): GpuType => ({
      id,
      displayName: id,
      manufacturer: 'Nvidia',
      memoryInGb: vram,
      secureCloud: true,
      communityCloud: false,
      securePricePerHourUsd: price,
      communityPricePerHourUsd: null,
      maxCountSecure: 8,
      availability: stock,
      dataCenters: stock === null ? [] : [{ id: 'EU-RO-1', name: 'Romania', availability: stock }],
      cudaVersions: [],
    });
    const all = [
      gpu('NVIDIA H100', 80, 2.99, 'LOW'),
      gpu('NVIDIA A40', 48, 0.44, 'NONE'),
      gpu('NVIDIA L40S', 48, 0.86, 'HIGH'),
      gpu('NVIDIA RTX 4090', 24, 0.69, 'MEDIUM'),
      gpu('Unpriced', 24, null, 'HIGH'),
    ];
    const none = { minVramGb: null, maxPricePerHourUsd: null, inStockOnly: false };
    assert.deepEqual(
      filterGpus(all, none).map((g) => g.id),
      ['NVIDIA A40', 'NVIDIA RTX 4090', 'NVIDIA L40S', 'NVIDIA H100'],
    );
    assert.deepEqual(
      filterGpus(all, { minVramGb: 40, maxPricePerHourUsd: 1, inStockOnly: true }).map((g) => g.id),
      ['NVIDIA L40S'],
    );
    assert.deepEqual(gpusTable(filterGpus(all, { ...none, minVramGb: 80 })), [
      'GPU          VRAM   $/H   STOCK  DATA CENTERS',
      'NVIDIA H100  80 GB  2.99  LOW    EU-RO-1',
    ]);
  });
});

describe('cli: the renderer', () => {
  it('shows info and above, debug only when asked, and prefixes warnings and errors', () => {
    for (const debug of [false, true]) {
      const bus = new EventBus();
      const lines: string[] = [];
      const renderer = new CliRenderer(bus, (line) => lines.push(line), {
        clock: new FakeClock(),
        debug,
      });
      bus.publish({ type: 'log', level: 'debug', message: 'GET /pods → 200' });
      bus.publish({ type: 'log', level: 'info', message: 'pod k3 kept: ssh -F …' });
      bus.publish({ type: 'log', level: 'warn', message: 'cannot list pods' });
      bus.publish({ type: 'log', level: 'error', message: 'pod k3 may still exist' });
      bus.publish({ type: 'warning', runId: 'r1', code: 'overrun', message: 'at this pace…' });
      bus.publish({ type: 'runState', runId: 'r1', state: 'running', message: null, cause: null });
      bus.publish({ type: 'runWatched', runId: 'r1' });
      renderer.dispose();
      bus.publish({ type: 'log', level: 'info', message: 'after dispose' });
      assert.deepEqual(lines, [
        ...(debug ? ['debug: GET /pods → 200'] : []),
        'pod k3 kept: ssh -F …',
        'warning: cannot list pods',
        'error: pod k3 may still exist',
        'warning: at this pace…',
        'train: following run r1 again',
      ]);
    }
  });

  it('prints a warning of several lines (the pods nothing will delete) as one warning line each', () => {
    const bus = new EventBus();
    const lines: string[] = [];
    new CliRenderer(bus, (line) => lines.push(line), { clock: new FakeClock(), debug: false });
    bus.publish({
      type: 'warning',
      runId: null,
      code: 'strays',
      message: 'pod a is still on Runpod\npod b is still on Runpod',
    });
    assert.deepEqual(lines, [
      'warning: pod a is still on Runpod\nwarning: pod b is still on Runpod',
    ]);
  });

  it('throttles metric lines to one per 10 s but shows every evaluation, and the last step at the end', async () => {
    const clock = new FakeClock();
    const bus = new EventBus();
    const lines: string[] = [];
    new CliRenderer(bus, (line) => lines.push(line), { clock, debug: false });
    const metric = (step: number, evalLoss?: number) =>
      bus.publish({
        type: 'metric',
        runId: 'r1',
        metric: {
          time: step,
          step,
          epoch: step / 40,
          maxSteps: 40,
          ...(evalLoss === undefined ? { loss: 1.23456, learningRate: 2e-4 } : { evalLoss }),
        },
      });
    metric(1);
    await clock.advanceMs(5_000);
    metric(2);
    metric(3, 0.9);
    await clock.advanceMs(4_000);
    metric(4);
    await clock.advanceMs(7_000);
    metric(5);
    metric(6);
    bus.publish({ type: 'jobStatus', runId: 'r1', status: { kind: 'exited', code: 0 } });
    assert.deepEqual(lines, [
      'train: step 1/40 (2%), epoch 0.03, loss 1.2346, lr 2.00e-4',
      'train: step 3/40 (7%), epoch 0.07, eval_loss 0.9000',
      'train: step 5/40 (12%), epoch 0.13, loss 1.2346, lr 2.00e-4',
      'train: step 6/40 (15%), epoch 0.15, loss 1.2346, lr 2.00e-4\ntrain: job exited with code 0',
    ]);
  });

  it('knows which pods are being deleted (a second Ctrl-C names them)', () => {
    const bus = new EventBus();
    const renderer = new CliRenderer(bus, () => undefined, {
      clock: new FakeClock(),
      debug: false,
    });
    bus.publish({
      type: 'pod',
      runId: 'r1',
      status: { kind: 'deleting', podId: 'k3', reason: 'interrupted' },
    });
    assert.deepEqual([...renderer.deleting], ['k3']);
    bus.publish({
      type: 'pod',
      runId: 'r1',
      status: { kind: 'deleted', podId: 'k3', uptimeMs: 1000, estimatedSpendUsd: 0 },
    });
    assert.deepEqual([...renderer.deleting], []);
  });
});
