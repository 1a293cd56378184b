/**
 * Retrieval benchmark (issue 8, item 2): verified download of a run's results
 * from a real sshd on loopback, against the baseline a user would otherwise
 * run on the same sshd and the same files:
 *
 *   ssh pod 'cd dir && find . -type f -exec sha256sum {} +' > sums
 *   ssh pod 'tar -C dir -cf - .' | tar -xf -
 *   sha256sum -c sums
 *
 * Both sides hash on the pod first (the same work), so the ratio compares the
 * transfer + verification. Runs alternate (baseline, ours, …) and medians are
 * reported, since these machines are noisy. Ours runs in a child process
 * bundled as the product is (plain node), so its peak RSS and time are its own.
 *
 *   npx tsx bench/retrieval.bench.ts            quick: 1,000 × 4 KiB and 32 MiB, 3 runs
 *   npx tsx bench/retrieval.bench.ts --full     10,000 × 4 KiB and 1 GiB, 5 runs
 *   options: --runs N, --small N, --big-mib N, --distant-mib N (the file fetched over a relay
 *            adding 50 ms of round trip), --json (one JSON line at the end),
 *            --compare DIR (also runs the retrieval of another checkout, e.g. the code before a
 *            change, in the same rounds: before and after side by side), --sets small,big (only
 *            those), --ours-only (no baseline, no resume), --delete-between (see main)
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../src/core/clock';
import { SshExecutor } from '../src/core/exec/ssh';
import { scaleTiming } from '../src/core/timing';
import { retrieve } from '../src/core/train/retrieval';
import { podCpuMs, runBaseline } from './retrievalBaseline';
import { measureFloor, type FloorResult } from './retrievalFloor';
import { measureResume } from './retrievalResume';
import { startSshd } from '../test/helpers/sshd';
import { forkBundled, fromParent, toParent, type Message } from './child';
import { median, settleDisk } from './lib';
import { DISTANT_ONE_WAY_MS, startRelay, type Relay } from './relay';

interface ChildParams {
  host: string;
  port: number;
  keyPath: string;
  hostPublicKey: string;
  remoteRunDir: string;
  localRunDir: string;
  entry: string;
}

interface ChildResult {
  ms: number;
  peakRssKiB: number;
  /** The largest V8 heap (used) and memory outside it (Buffers among it) seen, MiB. */
  peakParts: { heapUsed: number; external: number; arrayBuffers: number };
  idleRssKiB: number;
  /** CPU time of the child (user + system) from the connect to the result, ms. */
  cpuMs: number;
  verified: boolean;
  bytes: number;
}

function arg(name: string): string | undefined {
  const index = process.argv.indexOf(name);
  return index >= 0 ? process.argv[index + 1] : undefined;
}

/** The measured side: connect, retrieve, report time and peak RSS. */
async function child(): Promise<void> {
  const params = await fromParent<Message & ChildParams>('params');
  const idleRssKiB = process.resourceUsage().maxRSS;
  // What the peak is made of, sampled every 20 ms (a few µs of work each).
  const peakParts = { heapUsed: 0, external: 0, arrayBuffers: 0 };
  const sampler = setInterval(() => {
    const usage = process.memoryUsage();
    for (const key of ['heapUsed', 'external', 'arrayBuffers'] as const) {
      peakParts[key] = Math.max(peakParts[key], usage[key] / 1024 / 1024);
    }
  }, 20);
  const started = performance.now();
  const cpuStarted = process.cpuUsage();
  const executor = await SshExecutor.connect({
    host: params.host,
    port: params.port,
    username: 'root',
    privateKey: readFileSync(params.keyPath),
    hostPublicKey: params.hostPublicKey,
    clock: systemClock,
    timing: scaleTiming(1),
  });
  const result = await retrieve({
    executor,
    remoteRunDir: params.remoteRunDir,
    localRunDir: params.localRunDir,
    entries: [params.entry],
  });
  const ms = performance.now() - started;
  const cpu = process.cpuUsage(cpuStarted);
  clearInterval(sampler);
  executor.dispose();
  const out: ChildResult = {
    ms,
    peakRssKiB: process.resourceUsage().maxRSS,
    peakParts,
    idleRssKiB,
    cpuMs: (cpu.user + cpu.system) / 1000,
    verified: result.verified,
    bytes: result.bytes,
  };
  toParent({ type: 'result', ...out });
  process.disconnect();
}

/**
 * One retrieval in a child process bundled as the product is (plain node, no TypeScript loader:
 * its memory and CPU are the client's alone), this tree's or `tree`'s code.
 */
async function runChild(params: ChildParams, tree?: string): Promise<ChildResult> {
  const proc = forkBundled(tree ? join(tree, 'bench', 'retrieval.bench.ts') : __filename);
  proc.send({ type: 'params', ...params });
  const result = await proc.next<Message & ChildResult>('result', 1_800_000);
  await proc.done();
  return result;
}

async function main(): Promise<void> {
  if (process.argv.includes('--child')) {
    await child();
    return;
  }
  const full = process.argv.includes('--full');
  const runs = Number(arg('--runs') ?? (full ? 5 : 3));
  const smallFiles = Number(arg('--small') ?? (full ? 10_000 : 1_000));
  const bigMiB = Number(arg('--big-mib') ?? (full ? 1024 : 32));
  const distantMiB = Number(arg('--distant-mib') ?? (full ? 128 : 16));
  const compare = arg('--compare');
  // While iterating: only some datasets (`--sets small,big`), ours alone (`--ours-only`: no
  // baseline, no resume).
  const sets = arg('--sets')?.split(',');
  const oursOnly = process.argv.includes('--ours-only');
  const deleteBetween = process.argv.includes('--delete-between');
  const work = mkdtempSync(join(tmpdir(), 'ob-bench-'));
  const sshd = await startSshd();
  let distant: Relay | undefined;
  const rows: string[][] = [];
  const notes: string[] = [];
  const json: Record<string, unknown> = {};
  try {
    const remote = join(sshd.root, 'run');
    mkdirSync(join(remote, 'small'), { recursive: true });
    for (let i = 0; i < smallFiles; i++) {
      const dir = join(remote, 'small', `d${Math.floor(i / 100)}`);
      if (i % 100 === 0) mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `f${i}.bin`), randomBytes(4096));
    }
    mkdirSync(join(remote, 'big'), { recursive: true });
    const fd = openSync(join(remote, 'big', 'model.bin'), 'w');
    const mib = randomBytes(1024 * 1024);
    for (let i = 0; i < bigMiB; i++) writeSync(fd, mib);
    closeSync(fd);
    mkdirSync(join(remote, 'distant'), { recursive: true });
    const distantFd = openSync(join(remote, 'distant', 'model.bin'), 'w');
    for (let i = 0; i < distantMiB; i++) writeSync(distantFd, mib);
    closeSync(distantFd);
    // A pod across the internet: 25 ms each way, through a relay in front of the same sshd.
    distant = await startRelay(sshd.port, DISTANT_ONE_WAY_MS);
    const keyPath = join(work, 'id_ed25519');
    writeFileSync(keyPath, sshd.clientPrivateKey, { mode: 0o600 });
    const knownHosts = join(work, 'known_hosts');
    writeFileSync(knownHosts, `pinned ${sshd.hostPublicKey}\n`);

    const datasets = [
      {
        name: `${smallFiles.toLocaleString('en')} files × 4 KiB`,
        entry: 'small',
        bytes: smallFiles * 4096,
        port: sshd.port,
      },
      {
        name: `1 file × ${bigMiB} MiB`,
        entry: 'big',
        bytes: bigMiB * 1024 * 1024,
        port: sshd.port,
      },
      {
        name: `1 file × ${distantMiB} MiB over ${2 * DISTANT_ONE_WAY_MS} ms of round trip`,
        entry: 'distant',
        bytes: distantMiB * 1024 * 1024,
        port: distant.port,
      },
    ];
    for (const dataset of datasets.filter((d) => !sets || sets.includes(d.entry))) {
      const baseline: number[] = [];
      const phases: [number, number, number][] = [];
      const ours: number[] = [];
      let baselineRss = 0;
      let oursRss = 0;
      let oursIdle = 0;
      let oursParts: ChildResult['peakParts'] | undefined;
      let floor: FloorResult | undefined;
      const before: number[] = [];
      let beforeRss = 0;
      const oursCpu: number[] = [];
      const beforeCpu: number[] = [];
      // CPU of either side in all, ms: [this machine's processes, the pod side's].
      const cpuOf: Record<'baseline' | 'ours' | 'compared', [number, number][]> = {
        baseline: [],
        ours: [],
        compared: [],
      };
      const childParams = (localRunDir: string): ChildParams => ({
        host: sshd.host,
        port: dataset.port,
        keyPath,
        hostPublicKey: sshd.hostPublicKey,
        remoteRunDir: remote,
        localRunDir,
        entry: dataset.entry,
      });
      // Each measurement after a sync, into a directory of its own, the trees deleted after the
      // last round (`--delete-between`: after each one). Without a journal (this VM's ext4) ext4
      // skips inodes freed in the last 60 s when it allocates one (ialloc.c, recently_deleted):
      // a file made right after 10,000 were deleted scanned past them (0.6-0.9 ms of kernel time
      // per file, either side). Each round: the baseline, then ours and a compared tree in turn.
      const out = (side: string, run: number): string => join(work, 'out', `${side}-${run}`);
      const done = (dir: string): void => {
        if (deleteBetween) rmSync(dir, { recursive: true, force: true });
      };
      const sides = {
        baseline: (run: number) => {
          const dest = out('baseline', run);
          const pod = podCpuMs(sshd.pid());
          const b = runBaseline(
            dataset.port,
            keyPath,
            knownHosts,
            join(remote, dataset.entry),
            work,
            dest,
          );
          baseline.push(b.ms);
          phases.push(b.phasesMs);
          baselineRss = Math.max(baselineRss, b.peakRssKiB);
          cpuOf.baseline.push([b.cpuMs, podCpuMs(sshd.pid()) - pod]);
          done(dest);
        },
        ours: async (run: number) => {
          const pod = podCpuMs(sshd.pid());
          const o = await runChild(childParams(out('ours', run)));
          cpuOf.ours.push([o.cpuMs, podCpuMs(sshd.pid()) - pod]);
          if (!o.verified || o.bytes !== dataset.bytes)
            throw new Error('our retrieval did not verify');
          ours.push(o.ms);
          oursCpu.push(o.cpuMs);
          if (o.peakRssKiB > oursRss) oursParts = o.peakParts;
          oursRss = Math.max(oursRss, o.peakRssKiB);
          oursIdle = Math.max(oursIdle, o.idleRssKiB);
          done(out('ours', run));
          // The floor under ours: plain ssh2 streaming the same bytes into nothing.
          const f = await measureFloor({
            ...childParams(''),
            command:
              dataset.entry === 'small'
                ? `tar -C ${remote} -cf - small`
                : `cat -- ${join(remote, dataset.entry, 'model.bin')}`,
          });
          if (!floor || f.peakKiB > floor.peakKiB) floor = f;
        },
        compared: async (run: number) => {
          const pod = podCpuMs(sshd.pid());
          const p = await runChild(childParams(out('compared', run)), compare);
          cpuOf.compared.push([p.cpuMs, podCpuMs(sshd.pid()) - pod]);
          if (!p.verified) throw new Error('the compared retrieval did not verify');
          before.push(p.ms);
          beforeCpu.push(p.cpuMs);
          beforeRss = Math.max(beforeRss, p.peakRssKiB);
          done(out('compared', run));
        },
      };
      for (let run = 0; run < runs; run++) {
        const order: (keyof typeof sides)[] = !compare
          ? ['baseline', 'ours']
          : run % 2
            ? ['baseline', 'compared', 'ours']
            : ['baseline', 'ours', 'compared'];
        for (const side of order.filter((s) => !oursOnly || s !== 'baseline')) {
          settleDisk();
          await sides[side](run);
        }
      }
      rmSync(join(work, 'out'), { recursive: true, force: true });
      const b = median(baseline);
      const o = median(ours);
      const mbps = (ms: number): string => (dataset.bytes / 1e6 / (ms / 1000)).toPrecision(3);
      rows.push([
        dataset.name,
        `${(b / 1000).toFixed(2)} s (${mbps(b)} MB/s)`,
        `${(o / 1000).toFixed(2)} s (${mbps(o)} MB/s)`,
        (b / o).toFixed(2),
        `${(baselineRss / 1024).toFixed(0)} MiB`,
        `${(oursRss / 1024).toFixed(0)} MiB (+${((oursRss - oursIdle) / 1024).toFixed(0)} over idle)`,
      ]);
      if (compare) {
        const p = median(before);
        rows.push([
          `${dataset.name}, ${compare}`,
          `${(b / 1000).toFixed(2)} s`,
          `${(p / 1000).toFixed(2)} s (${mbps(p)} MB/s)`,
          (b / p).toFixed(2),
          '',
          `${(beforeRss / 1024).toFixed(0)} MiB`,
        ]);
      }
      const phase = (i: number): string => (median(phases.map((p) => p[i]!)) / 1000).toFixed(2);
      notes.push(
        `${dataset.name}: baseline = hash on the pod ${phase(0)} s + ssh|tar ${phase(1)} s + sha256sum -c ${phase(2)} s`,
      );
      // CPU time moves less than wall time on a shared machine: what the client itself spent.
      notes.push(
        `${dataset.name}: our client's CPU (user + system), median ${(median(oursCpu) / 1000).toFixed(2)} s` +
          (compare ? `; ${compare}: ${(median(beforeCpu) / 1000).toFixed(2)} s` : ''),
      );
      // Loaded, the wall time is the CPU share each side wins (five processes against one).
      const spent = (list: [number, number][]): string => {
        const [here, pod] = [0, 1].map((i) => median(list.map((p) => p[i]!)) / 1000);
        return `${(here! + pod!).toFixed(2)} s (${here!.toFixed(2)} here + ${pod!.toFixed(2)} pod side)`;
      };
      if (cpuOf.baseline.length > 0) {
        notes.push(
          `${dataset.name}: CPU of either side in all, medians: baseline ${spent(cpuOf.baseline)} (ssh, tar, sha256sum, sshd and what it ran), ours ${spent(cpuOf.ours)} (our client from its connect, sshd and what it ran)` +
            (compare ? `, ${compare} ${spent(cpuOf.compared)}` : ''),
        );
      }
      if (oursParts) {
        const mib = (value: number): string => `${value.toFixed(0)} MiB`;
        notes.push(
          `${dataset.name}: in the run of ours with the highest peak, the most seen at once: V8 heap ${mib(oursParts.heapUsed)} in use, memory outside the heap ${mib(oursParts.external)} (Buffers ${mib(oursParts.arrayBuffers)} of it)`,
        );
      }
      if (floor) {
        const mib = (kib: number): string => `${(kib / 1024).toFixed(0)} MiB`;
        notes.push(
          `${dataset.name}: the floor, plain ssh2 (no code of ours) streaming the same bytes (${dataset.entry === 'small' ? '`tar -cf -` of the tree' : '`cat` of the file'}) into a consumer that drops them, in a process of its own: peak RSS ${mib(floor.peakKiB)} (a bare Node ${mib(floor.idleKiB)}, ssh2 loaded ${mib(floor.loadedKiB)}, connected ${mib(floor.connectedKiB)}; the most seen at once outside the V8 heap ${floor.external.toFixed(0)} MiB, Buffers ${floor.arrayBuffers.toFixed(0)} MiB of it)`,
        );
      }
      json[dataset.entry] = {
        baselineMs: baseline,
        oursMs: ours,
        ratio: b / o,
        baselineRss,
        oursRss,
        oursIdle,
        ...(floor ? { floorRss: floor.peakKiB } : {}),
        ...(compare ? { beforeMs: before, beforeRss } : {}),
      };
    }

    if (!oursOnly) await measureResume(sshd, remote, work, bigMiB, rows, json);
  } finally {
    distant?.stop();
    await sshd.stop();
    rmSync(work, { recursive: true, force: true });
  }

  const header = [
    'results',
    'baseline (ssh+tar, sha256sum -c)',
    'ours (SFTP, hashed while written)',
    'ratio',
    'baseline peak RSS',
    'ours peak RSS',
  ];
  const lines = [header, header.map(() => '---'), ...rows].map((row) => `| ${row.join(' | ')} |`);
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  console.log(`Retrieval, ${runs} runs each (medians), ${cpus().length} × ${cpu}, loopback sshd:`);
  console.log(lines.join('\n'));
  for (const note of notes) console.log(`- ${note}`);
  if (process.argv.includes('--json')) console.log(JSON.stringify(json));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
