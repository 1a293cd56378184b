/**
 * The GPUs' figures: nvidia-smi's answer to the product's query parsed (answers as real cards
 * give them: several GPUs, `[N/A]` figures, a name with a comma, units left on), the judge that
 * names an idle GPU or a card four times too large once per run with the rate it wastes, and the
 * pod's watcher pushing the samples of the emulator's stand-in under every shell.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { GpuReading } from '../../src/core/events';
import {
  GPU_QUERY_COMMAND,
  GpuJudge,
  gpuLine,
  parseNvidiaSmi,
} from '../../src/core/train/gpuSamples';
import {
  PUSH_ALIVE,
  PushReader,
  streamCommand,
  type PodPushSink,
} from '../../src/core/train/podWatcher';
import { figuresFile, standInScript, writeFigures } from '../emulator/gpus';

/** An 8 × A100 node mid-epoch (two GPUs at the end of a step, one card reporting no power). */
const A100_X8 = [
  '0, NVIDIA A100-SXM4-80GB, 100, 72433, 81920, 61, 352.09, 400.00',
  '1, NVIDIA A100-SXM4-80GB, 98, 72433, 81920, 63, 341.77, 400.00',
  '2, NVIDIA A100-SXM4-80GB, 100, 72431, 81920, 60, 366.20, 400.00',
  '3, NVIDIA A100-SXM4-80GB, 100, 72433, 81920, 64, 359.48, 400.00',
  '4, NVIDIA A100-SXM4-80GB, 97, 72433, 81920, 58, 330.12, 400.00',
  '5, NVIDIA A100-SXM4-80GB, 100, 72433, 81920, 62, 348.90, 400.00',
  '6, NVIDIA A100-SXM4-80GB, 0, 72401, 81920, 41, [N/A], 400.00',
  '7, NVIDIA A100-SXM4-80GB, 3, 72401, 81920, 42, 88.31, 400.00',
  '',
].join('\n');

const RTX4090_IDLE = '0, NVIDIA GeForce RTX 4090, 0, 1, 24564, 38, 12.51, 450.00\n';
const H100_X2 = [
  '0, NVIDIA H100 80GB HBM3, 0, 0, 81559, 32, 69.23, 700.00',
  '1, NVIDIA H100 80GB HBM3, 0, 0, 81559, 31, 68.94, 700.00',
].join('\n');

function reading(
  index: number,
  utilizationPct: number,
  usedMiB: number,
  totalMiB = 24_564,
): GpuReading {
  return {
    index,
    name: 'NVIDIA GeForce RTX 4090',
    utilizationPct,
    memoryUsedMiB: usedMiB,
    memoryTotalMiB: totalMiB,
    temperatureC: 60,
    powerW: 300,
    powerLimitW: 450,
  };
}

describe('GPU figures: parsing nvidia-smi', () => {
  it('asks for index, name, utilisation, memory, temperature and power, without header or units', () => {
    assert.equal(
      GPU_QUERY_COMMAND,
      'nvidia-smi --query-gpu=index,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,power.limit --format=csv,noheader,nounits',
    );
  });

  it('reads every GPU of an 8-GPU answer; [N/A] is no figure', () => {
    const gpus = parseNvidiaSmi(A100_X8);
    assert.equal(gpus.length, 8);
    assert.deepEqual(gpus[0], {
      index: 0,
      name: 'NVIDIA A100-SXM4-80GB',
      utilizationPct: 100,
      memoryUsedMiB: 72433,
      memoryTotalMiB: 81920,
      temperatureC: 61,
      powerW: 352.09,
      powerLimitW: 400,
    });
    assert.equal(gpus[6]!.powerW, null);
    assert.equal(gpus[6]!.utilizationPct, 0);
    assert.deepEqual(
      gpus.map((g) => g.index),
      [0, 1, 2, 3, 4, 5, 6, 7],
    );
  });

  it('reads one card and two; CRLF, units left on, a name with a comma, junk lines skipped', () => {
    assert.equal(parseNvidiaSmi(RTX4090_IDLE)[0]!.memoryTotalMiB, 24564);
    assert.equal(parseNvidiaSmi(H100_X2).length, 2);
    const odd = parseNvidiaSmi(
      [
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        '0, Quadro RTX 6000, Rev 2, 45 %, 1024 MiB, 24576 MiB, 50, [Not Supported], [Not Supported]',
        'No devices were found',
      ].join('\r\n'),
    );
    assert.equal(odd.length, 1);
    assert.equal(odd[0]!.name, 'Quadro RTX 6000, Rev 2');
    assert.equal(odd[0]!.utilizationPct, 45);
    assert.equal(odd[0]!.memoryUsedMiB, 1024);
    assert.equal(odd[0]!.powerW, null);
    assert.deepEqual(parseNvidiaSmi(''), []);
    assert.deepEqual(parseNvidiaSmi('No devices were found\n'), []);
  });

  it('words a GPU as both front ends show it', () => {
    assert.equal(gpuLine(parseNvidiaSmi(A100_X8)[0]!), '100 % · 70.7 of 80.0 GiB · 61 °C · 352 W');
    assert.equal(gpuLine(parseNvidiaSmi(A100_X8)[6]!), '0 % · 70.7 of 80.0 GiB · 41 °C');
  });
});

describe('GPU figures: the judge of a GPU wasted while the pod bills', () => {
  const WINDOW = 600_000;

  it('names a GPU under 5 % for the whole window once, with the rate it wastes', () => {
    const judge = new GpuJudge(WINDOW, 0.69);
    assert.deepEqual(judge.add({ timeMs: 0, gpus: [reading(0, 2, 20_000)] }), []);
    assert.deepEqual(judge.add({ timeMs: WINDOW - 1, gpus: [reading(0, 4, 20_000)] }), []);
    const found = judge.add({ timeMs: WINDOW, gpus: [reading(0, 0, 20_000)] });
    assert.equal(found.length, 1);
    assert.equal(found[0]!.code, 'gpu_idle');
    assert.match(
      found[0]!.message,
      /^the GPU is idle while the pod bills: is the job waiting on data\?/,
    );
    assert.match(
      found[0]!.message,
      /under 5 % for 10 min: \$0\.69\/h of the pod's \$0\.69\/h wasted/,
    );
    assert.equal(found[0]!.wastedUsdPerHour, 0.69);
    // Once per run: still idle later, nothing more.
    assert.deepEqual(judge.add({ timeMs: 3 * WINDOW, gpus: [reading(0, 0, 20_000)] }), []);
  });

  it('a busy sample in the window starts it over; a busy GPU is never named', () => {
    const judge = new GpuJudge(WINDOW, 0.69);
    judge.add({ timeMs: 0, gpus: [reading(0, 0, 20_000)] });
    judge.add({ timeMs: WINDOW / 2, gpus: [reading(0, 5, 20_000)] });
    assert.deepEqual(judge.add({ timeMs: WINDOW, gpus: [reading(0, 0, 20_000)] }), []);
    assert.deepEqual(judge.add({ timeMs: WINDOW * 1.5, gpus: [reading(0, 0, 20_000)] }), []);
    assert.equal(judge.add({ timeMs: WINDOW * 2, gpus: [reading(0, 0, 20_000)] }).length, 1);
    const busy = new GpuJudge(WINDOW, 0.69);
    for (let t = 0; t <= 3 * WINDOW; t += 10_000) {
      assert.deepEqual(busy.add({ timeMs: t, gpus: [reading(0, 97, 20_000)] }), []);
    }
  });

  it('of several GPUs, names the idle ones and their share of the rate', () => {
    const judge = new GpuJudge(WINDOW, 2.76);
    const gpus = (): GpuReading[] => [
      reading(0, 95, 20_000),
      reading(1, 0, 20_000),
      reading(2, 1, 20_000),
      reading(3, 99, 20_000),
    ];
    judge.add({ timeMs: 0, gpus: gpus() });
    const found = judge.add({ timeMs: WINDOW, gpus: gpus() });
    assert.equal(found.length, 1);
    assert.match(found[0]!.message, /^GPUs 1, 2 of 4 are idle while the pod bills/);
    assert.equal(found[0]!.wastedUsdPerHour, 1.38);
  });

  it('names a job whose peak memory stays under a quarter of the card, once, with the unused share', () => {
    const judge = new GpuJudge(WINDOW, 0.69);
    judge.add({ timeMs: 0, gpus: [reading(0, 90, 2_000)] });
    assert.deepEqual(judge.add({ timeMs: WINDOW / 2, gpus: [reading(0, 90, 2_456)] }), []);
    const found = judge.add({ timeMs: WINDOW, gpus: [reading(0, 90, 2_000)] });
    assert.equal(found.length, 1);
    assert.equal(found[0]!.code, 'gpu_memory');
    assert.match(found[0]!.message, /at most 2\.4 GiB of the GPU's 24\.0 GiB \(under a quarter\)/);
    assert.equal(found[0]!.wastedUsdPerHour, Math.round(0.69 * (1 - 2_456 / 24_564) * 1e4) / 1e4);
    assert.deepEqual(judge.add({ timeMs: 2 * WINDOW, gpus: [reading(0, 90, 2_000)] }), []);
  });

  it('a quarter or more of the card at any sample is not named; nor what an earlier follow named', () => {
    const judge = new GpuJudge(WINDOW, 0.69);
    judge.add({ timeMs: 0, gpus: [reading(0, 90, 2_000)] });
    judge.add({ timeMs: 1, gpus: [reading(0, 90, 6_200)] });
    assert.deepEqual(judge.add({ timeMs: WINDOW, gpus: [reading(0, 90, 2_000)] }), []);
    const again = new GpuJudge(WINDOW, 0.69, ['gpu_idle', 'gpu_memory']);
    again.add({ timeMs: 0, gpus: [reading(0, 0, 100)] });
    assert.deepEqual(again.add({ timeMs: 2 * WINDOW, gpus: [reading(0, 0, 100)] }), []);
  });

  it('without a known rate, names the GPU without a figure of money', () => {
    const judge = new GpuJudge(WINDOW, null);
    judge.add({ timeMs: 0, gpus: [reading(0, 0, 20_000)] });
    const found = judge.add({ timeMs: WINDOW, gpus: [reading(0, 0, 20_000)] });
    assert.equal(found[0]!.wastedUsdPerHour, null);
    assert.doesNotMatch(found[0]!.message, /\$/);
  });
});

const SHELLS = [['sh'], ['dash'], ['bash', '--posix'], ['busybox', 'sh']].filter(
  (argv) => spawnSync(argv[0]!, [...argv.slice(1), '-c', 'true']).status === 0,
);

describe("GPU figures: the pod's watcher pushes the stand-in's samples (every shell)", function () {
  this.timeout(30_000);
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });

  /**
   * Runs the watcher for a live job with `bin` first on PATH; resolves with the first GPU push,
   * or null once two signs of life (a second apart) came without one: ten GPU ticks.
   */
  async function firstPush(shell: string[], bin: string | null): Promise<string | null> {
    const runDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ob-gpu-')));
    cleanups.push(() => rmSync(runDir, { recursive: true, force: true }));
    const job = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    cleanups.push(() => job.kill('SIGKILL'));
    writeFileSync(path.join(runDir, 'job.pid'), `${job.pid}\n`);
    writeFileSync(path.join(runDir, 'metrics.jsonl'), '');
    let pushed: string | null = null;
    let looks = 0;
    const sink: PodPushSink = {
      lookMs: 100,
      diskMs: 60_000,
      gpuMs: 100,
      volumeDir: null,
      look: () => looks++,
      disk: () => {},
      gpu: (text) => (pushed ??= text),
      live: () => {},
    };
    const reader = new PushReader(sink);
    const env = {
      ...process.env,
      PATH: bin === null ? '/usr/bin:/bin' : `${bin}:/usr/bin:/bin`,
    };
    const watcher = spawn(shell[0]!, [...shell.slice(1), '-c', streamCommand(runDir, 0, 1, sink)], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env,
    });
    cleanups.push(() => watcher.kill('SIGKILL'));
    let partial = '';
    const other: string[] = [];
    let alive = 0;
    await new Promise<void>((resolve, reject) => {
      watcher.stderr!.on('data', (chunk: Buffer) => {
        const lines = (partial + chunk.toString('utf8')).split('\n');
        partial = lines.pop()!;
        for (const line of lines) {
          if (line === PUSH_ALIVE) alive++;
          if (!reader.line(line)) other.push(line);
        }
        if (pushed !== null || alive >= 2) resolve();
      });
      watcher.on('error', reject);
      watcher.on('exit', () => reject(new Error(`the watcher exited: ${other.join('|')}`)));
    });
    assert.deepEqual(other, [], 'nothing on stderr but pushes');
    assert.ok(looks >= 0);
    return pushed;
  }

  for (const shell of SHELLS) {
    it(`${shell.join(' ')}: the stand-in's two GPUs pushed as one sample; no nvidia-smi, no push`, async () => {
      const bin = mkdtempSync(path.join(tmpdir(), 'ob-gpu-bin-'));
      cleanups.push(() => rmSync(bin, { recursive: true, force: true }));
      mkdirSync(bin, { recursive: true });
      const figures = path.join(bin, 'figures.csv');
      writeFigures(
        figures,
        figuresFile('idle', { id: 'NVIDIA GeForce RTX 4090', memoryGb: 24 }, 2, 'podabc123'),
      );
      writeFileSync(path.join(bin, 'nvidia-smi'), standInScript(figures));
      chmodSync(path.join(bin, 'nvidia-smi'), 0o755);
      const text = await firstPush(shell, bin);
      assert.ok(text !== null, 'a GPU sample is pushed');
      const gpus = parseNvidiaSmi(text);
      assert.equal(gpus.length, 2, text);
      assert.deepEqual(
        gpus.map((g) => [g.index, g.name, g.utilizationPct, g.memoryTotalMiB]),
        [
          [0, 'NVIDIA GeForce RTX 4090', 0, 24576],
          [1, 'NVIDIA GeForce RTX 4090', 0, 24576],
        ],
      );
      assert.equal(await firstPush(shell, null), null, 'no nvidia-smi: nothing pushed');
    });
  }
});
