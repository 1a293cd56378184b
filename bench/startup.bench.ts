/**
 * From "Train" to the first metric (issue 15, item 4): the wall time of the core's `train` flow
 * against the Runpod emulator (a real namespaced pod with the real bootstrap, watchdog and sshd)
 * whose pods take a realistic share of time to boot, split into its steps, for the start as it
 * is (the run's files copied while the pod boots and sent as soon as it answers SSH, before its
 * preflight) and for the sequential start it replaced (`startup: 'sequential'`: copy, pod,
 * upload, job, each after the one before), alternating, each round in a lab of its own.
 *
 * The timeline: from the call to the first `creating` event (config, budget, run directory,
 * keys, host-key secret, catalog; the sequential start copies the files here), the create call
 * (`created`), the boot until the pod answers SSH with its pinned key (`reachable`), the rest of
 * the readiness (watchdog verdict, cost cap: `ready`), the upload's end, the job's start (run
 * saved `running`), the first metric event.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomFillSync } from 'node:crypto';
import { train, type StartPhase } from '../src/core/flow';
import { Lab } from '../test/helpers/lifecycle';
import { uploadFigures } from './startupUpload';
import { median, mib, ms, ratio, type BenchOptions, type BenchReport, type BenchRow } from './lib';

type Mark = StartPhase | 'creating' | 'created' | 'metric';
type Timeline = Partial<Record<Mark, number>>;
type Startup = 'sequential' | 'overlapped';

/** The steps as reported: name, from, to (marks), in the order they happen in the baseline. */
const STEPS: [string, Mark | 'call', Mark][] = [
  ['config, budget, keys, secret (→ create call)', 'call', 'creating'],
  ['create call', 'creating', 'created'],
  ['boot until SSH answers', 'created', 'reachable'],
  ['SSH → ready (watchdog verdict, cost cap)', 'reachable', 'ready'],
  ['job start (after the upload) → run recorded running', 'uploaded', 'started'],
  ['running → first metric', 'started', 'metric'],
];

interface Round {
  startup: Startup;
  totalMs: number;
  at: Timeline;
}

async function oneRound(
  startup: Startup,
  dataset: string,
  bootMs: { provisioning: number; starting: number },
): Promise<Round> {
  const lab = await Lab.start({
    steps: 1_000_000,
    stepSeconds: 0.1,
    maxHours: 2,
    owner: 'benchmark',
    emulator: { bootDelaysMs: bootMs },
  });
  const stop = new AbortController();
  try {
    // The dataset under data/ (an upload entry): a hard link, the copy into the run is timed.
    fs.linkSync(dataset, path.join(lab.workspace, 'data', path.basename(dataset)));
    let runId: string | null = null;
    const at: Timeline = {};
    const t0 = performance.now();
    const mark = (what: Mark): void => {
      at[what] ??= performance.now() - t0;
    };
    let firstMetric: () => void = () => undefined;
    const gotMetric = new Promise<void>((resolve) => (firstMetric = resolve));
    const subscription = lab.bus.on((event) => {
      if (event.type === 'pod' && event.runId === runId) {
        if (event.status.kind === 'creating') mark('creating');
        if (event.status.kind === 'created') mark('created');
      }
      if (event.type === 'metric' && event.runId === runId) {
        mark('metric');
        firstMetric();
      }
    });
    const training = lab.track(
      train(lab.deps, lab.config, lab.workspace, {
        signal: stop.signal,
        startup,
        onRun: (run) => (runId = run.id),
        onPhase: mark,
      }),
    );
    const ended = training.then(
      (result) => {
        throw new Error(`the run ended before its first metric: ${result.summary}`);
      },
      (error: unknown) => {
        throw new Error(`the run failed before its first metric: ${String(error)}`);
      },
    );
    await Promise.race([gotMetric, ended]);
    const totalMs = at.metric!;
    subscription.dispose();
    stop.abort();
    await training.catch(() => undefined);
    return { startup, totalMs, at };
  } catch (error) {
    throw new Error(`${String(error)}\n${lab.transcript()}`, { cause: error });
  } finally {
    stop.abort();
    await lab.close();
  }
}

function stepMs(round: Round, from: Mark | 'call', to: Mark): number {
  const start = from === 'call' ? 0 : round.at[from];
  const end = round.at[to];
  return start === undefined || end === undefined ? NaN : end - start;
}

/** Median of `pick` over the rounds of one side. */
function med(rounds: Round[], pick: (r: Round) => number): number {
  return median(rounds.map(pick).filter(Number.isFinite));
}

export async function startupBench(options: BenchOptions): Promise<BenchReport> {
  const datasetMiB = options.quick ? 8 : 256;
  const bootMs = options.quick
    ? { provisioning: 1_000, starting: 500 }
    : { provisioning: 8_000, starting: 2_000 };
  const tmp = fs.mkdtempSync(path.join(fs.realpathSync(process.env.TMPDIR ?? '/tmp'), 'startup-'));
  const dataset = path.join(tmp, 'dataset.bin');
  const rounds: Round[] = [];
  try {
    const chunk = Buffer.allocUnsafe(8 * 1024 * 1024);
    const out = fs.openSync(dataset, 'w');
    for (let written = 0; written < datasetMiB * 1024 * 1024; written += chunk.length) {
      fs.writeSync(
        out,
        randomFillSync(chunk),
        0,
        Math.min(chunk.length, datasetMiB * 1024 * 1024 - written),
      );
    }
    fs.closeSync(out);
    for (let i = 0; i < options.runs; i++) {
      // Alternating, the baseline first in odd rounds and second in even ones.
      const order: Startup[] =
        i % 2 === 0 ? ['sequential', 'overlapped'] : ['overlapped', 'sequential'];
      for (const startup of order) {
        const round = await oneRound(startup, dataset, bootMs);
        console.log(`  ${startup}: ${ms(round.totalMs)} ${JSON.stringify(round.at)}`);
        rounds.push(round);
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const upload = await uploadFigures(
    options.quick ? 32 : 1024,
    options.quick ? 32 : 128,
    options.runs,
  );
  const base = rounds.filter((r) => r.startup === 'sequential');
  const ours = rounds.filter((r) => r.startup === 'overlapped');
  const row = (
    measure: string,
    pick: (r: Round) => number,
    extra: Partial<BenchRow> = {},
  ): BenchRow => {
    const b = med(base, pick);
    const o = med(ours, pick);
    return {
      measure,
      baseline: ms(b),
      ours: ms(o),
      ratio: ratio(b, o),
      target: '',
      verdict: '',
      ...extra,
    };
  };
  const totalB = med(base, (r) => r.totalMs);
  const totalO = med(ours, (r) => r.totalMs);
  // Client work left on the critical path once SSH answers, besides the transfer and the start:
  // the copy of the files when it ends after the pod answered.
  const lateCopy = ours.map((r) => Math.max(0, stepMs(r, 'reachable', 'packed')));
  const copyLeft = Math.max(...lateCopy);
  const afterSsh = (r: Round): number => stepMs(r, 'reachable', 'metric');
  const uploadEnd = (r: Round): number =>
    Math.max(0, (r.at.uploaded ?? NaN) - Math.max(r.at.ready ?? NaN, r.at.reachable ?? NaN));
  return {
    title: '7. From Train to the first metric',
    baseline:
      "the sequential start Train had before (kept runnable as `startup: 'sequential'`): the run's files copied into the run directory, then the pod created and waited for until ready, then the upload, then the job — same lab, same files, alternating rounds",
    rows: [
      row('Train → first metric', (r) => r.totalMs, {
        target: 'state the time saved',
        verdict: `${ms(totalB - totalO)} saved`,
      }),
      row('copying the files into the run directory', (r) => stepMs(r, 'call', 'packed')),
      ...STEPS.map(([name, from, to]) => row(name, (r) => stepMs(r, from, to))),
      row('upload (whole, from its start)', (r) =>
        r.startup === 'sequential'
          ? stepMs(r, 'ready', 'uploaded')
          : stepMs(r, 'reachable', 'uploaded'),
      ),
      row('upload left after ready (on the critical path)', uploadEnd),
      row('SSH answers → first metric', afterSsh, {
        target: 'only the transfer and the start left',
        verdict:
          copyLeft === 0
            ? 'met'
            : `NOT met (the copy ended ${ms(copyLeft)} after SSH answered in the worst round)`,
      }),
      ...upload.rows,
    ],
    notes: [
      `${options.runs} round(s) each side, alternating; each round a new lab (emulator, workspace) so no pod or file carries over; medians.`,
      `Emulated boot: ${ms(bootMs.provisioning)} before the container starts (image pull, placement) + ${ms(bootMs.starting)} starting, then the real bootstrap (host key, sshd, watchdog) and the watchdog's verdict; a Runpod pod takes 30 s to minutes, so on Runpod the boot hides far more than it does here.`,
      `The upload: examples/tiny (train.py, data/) + a ${mib(datasetMiB * 1024 * 1024)} random dataset in data/, over loopback SSH (an upload on Runpod crosses the internet and takes longer; the part done before the pod is ready grows with it).`,
      `Ours: the copy runs while the pod boots (done ${ms(med(ours, (r) => stepMs(r, 'call', 'packed')))} after the call; the pod answered SSH at ${ms(med(ours, (r) => r.at.reachable ?? NaN))}); the upload starts when SSH answers and runs beside the watchdog's verdict and the cost cap.`,
      ...upload.notes,
    ],
    bounds:
      'The pod’s boot (emulated delay + bootstrap) and the upload are most of it on both sides; what ours takes off is the copy of the files (done during the boot) and the part of the upload that fits beside the watchdog’s verdict and the cost cap. Left on the critical path after SSH answers: the rest of the upload, the job’s start (one SSH command), and the trainer’s own start until its first step. The upload: the transfer (ssh2 encrypting in the one JS thread that also reads and hashes the files) with the pod writing and hashing the big files in the same pass (tee into OpenSSL), so what is left after the last byte is the pod’s sha256sum -c of the small files; the baseline hashes locally, sends, then reads everything again on the pod. Both sides of the Train → first metric row use the same upload: on a quiet machine with a 10 s boot, what the overlap takes off is the copy, the keys and the config’s checks (a few hundred ms); the longer the boot and the bigger the copy, the more it hides.',
    raw: { rounds, datasetMiB, bootMs, upload: upload.raw },
  };
}
