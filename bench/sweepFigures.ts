/**
 * Issue 38's three figures, measured on the real emulator (namespaced pods with the real
 * bootstrap, watchdog and sshd), the real Optuna (Debian's python3-optuna under /usr/bin/python3)
 * and examples/sweep/train.py as the job, at the labs' scaled timing (production / 60). Each
 * figure is printed beside its target with "met" or "NOT met", from what was measured here.
 *
 *   npm run figures:sweep                   5 seeds, 10 budget sweeps (3 killed), 8 trials at once
 *   npx tsx bench/sweepFigures.ts [--seeds N] [--trials N] [--sweeps N] [--killed N]
 *                                 [--parallel N] [--only pruning,budget,cpu] [--json FILE]
 *                                 [--job-scale F]   figures 1 and 3's steps F times as long
 *                                 [--timeline]      every pruned trial's timeline (figure 1)
 *   (test/integration/sweepFigures.integration.test.ts runs its smallest size: one seed of 6
 *   trials, one killed sweep, 2 trials at once, jobs a quarter as long.)
 *
 * 1. Pruning pays: per seed, a Hyperband sweep and an unpruned one of the same trials (the random
 *    sampler with that seed asks both the same params), side by side, each in its own emulator:
 *    the GPU-seconds the emulator's ledger billed each sweep's pods, and each sweep's best value.
 *    Met when, over the seeds, the mean of Hyperband's billed GPU-seconds is at most 50 % of the
 *    unpruned sweep's and the mean of its best is within 2 % of the unpruned best.
 * 2. The budget holds: sweeps whose trials at their worst case need more than budget_usd, some
 *    with their client (a child process) SIGKILLed once two trials run and never restarted.
 *    After each sweep's end, or after the killed client's pods were ended by their own
 *    watchdogs, the ledger's total for the sweep's pods against budget_usd, and the pods still
 *    billing. A killed sweep is then stopped (`sweep stop`, which starts no trial: the ledger is
 *    checked to have no new pod) so that its trials' states can be read: every trial COMPLETE,
 *    PRUNED or FAIL in the study (Optuna's storage) and in sweep.json, or never started.
 * 3. 8 trials at once followed: a client process following a sweep of 8 trials, 8 at once, and
 *    one following one run (`train`) of the same job, side by side; each process's own CPU
 *    time (user + sys) from the flow's start to its end. Met when the first is at most 8x the
 *    second.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sweep } from '../src/core/flow/sweep';
import { ROOT } from '../test/helpers/cli';
import type { Lab } from '../test/helpers/lifecycle';
import { PYTHON, sweepJson } from '../test/helpers/sweepLab';
import type { BenchOptions, BenchReport } from './lib';
import { budgetFigure } from './sweepBudget';
import { meanPhasesLine, prunedTimelines, timelineLines } from './sweepFiguresTimeline';
import {
  billed,
  closeLab,
  mean,
  pct,
  sweepLab,
  type Figure,
  type FigureOptions,
} from './sweepLabs';

export type { Figure, FigureOptions } from './sweepLabs';

const arg = (name: string): string | undefined => {
  const index = process.argv.indexOf(name);
  return index >= 0 ? process.argv[index + 1] : undefined;
};
const num = (name: string, fallback: number): number => {
  const value = arg(name);
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a whole number >= 1`);
  return n;
};

// ------------------------------------------------------------------ 1. pruning pays

async function pruningFigure(options: FigureOptions): Promise<Figure> {
  const details: string[] = [];
  const problems: string[] = [];
  const costRatios: number[] = [];
  const bestRatios: number[] = [];
  const hbGpuS: number[] = [];
  const noneGpuS: number[] = [];
  const hbBests: number[] = [];
  const noneBests: number[] = [];
  // One seed at a time: its two sweeps side by side (a pod's boot and retrieval, which no pruner
  // cuts, grow with the machine's load, so more sweeps at once would weigh against pruning).
  const seeds = Array.from({ length: options.seeds }, (_, i) => i + 1);
  const bySeed = new Map<
    number,
    {
      cost: number;
      best: number;
      line: string;
      gpuS: [number, number];
      bests: [number, number];
      timeline: string[];
    }
  >();
  const one = async (seed: number): Promise<void> => {
    // Jobs of 30 s (120 steps, an eval_loss every 5): a pod's boot, upload, retrieval and delete,
    // which no pruner cuts, take 3-9 s here depending on the machine's load; a trial of Runpod's
    // is hours against a pod's minutes.
    const base = {
      steps: 120,
      stepSeconds: 0.25 * (options.jobScale ?? 1),
      seed,
      trials: options.trials,
      parallel: 6,
      budgetUsd: 50,
      maxCostUsd: 0.5,
    };
    const labs = await Promise.all([
      sweepLab({ ...base, pruner: 'hyperband' }),
      sweepLab({ ...base, pruner: 'none' }),
    ]);
    try {
      const results = await Promise.all(
        labs.map((lab) =>
          lab.track(sweep(lab.deps, lab.config, lab.workspace, { python: PYTHON })),
        ),
      );
      const [hb, none] = results.map((r, i) => ({
        result: r,
        billed: billed(labs[i]!),
      }));
      const hbBest = hb!.result.best?.objective ?? NaN;
      const noneBest = none!.result.best?.objective ?? NaN;
      const costRatio = hb!.billed.gpuSeconds / none!.billed.gpuSeconds;
      const bestRatio = hbBest / noneBest;
      const pruned = hb!.result.record.trials.filter((t) => t.state === 'pruned').length;
      const perState = (lab: Lab, r: typeof hb): string => {
        const by = new Map<string, number[]>();
        for (const t of r!.result.record.trials) {
          const s = lab.podsOfRun(t.run_id ?? '').reduce((sum, p) => sum + p.gpuSeconds, 0);
          by.set(t.state, [...(by.get(t.state) ?? []), s]);
        }
        return [...by]
          .map(
            ([state, xs]) =>
              `${xs.length} ${state} ${(xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(1)} s each`,
          )
          .join(', ');
      };
      // Where a pruned trial's bill goes: before its job, and after the pruner's verdict.
      const timelines = prunedTimelines(labs[0]!, hb!.result.record);
      const phases = meanPhasesLine(timelines);
      bySeed.set(seed, {
        timeline: [
          ...(phases === null ? [] : [`seed ${seed}: ${phases}`]),
          ...(options.timeline ? timelineLines(timelines).map((l) => `seed ${seed}: ${l}`) : []),
        ],
        cost: costRatio,
        best: bestRatio,
        gpuS: [hb!.billed.gpuSeconds, none!.billed.gpuSeconds],
        bests: [hbBest, noneBest],
        line: `seed ${seed}: hyperband ${hb!.billed.gpuSeconds.toFixed(1)} GPU-s (${pruned} of ${hb!.result.record.trials.length} trials pruned), best ${hbBest}; unpruned ${none!.billed.gpuSeconds.toFixed(1)} GPU-s, best ${noneBest}: ${pct(costRatio)} of the GPU-seconds, best ${pct(bestRatio - 1)} off (billed per trial: hyperband ${perState(labs[0]!, hb)}; unpruned ${perState(labs[1]!, none)})`,
      });
      const params = (r: typeof hb) => JSON.stringify(r!.result.record.trials.map((t) => t.params));
      if (params(hb) !== params(none)) problems.push(`seed ${seed}: the two sweeps' trials differ`);
    } finally {
      await Promise.all(labs.map((lab, i) => closeLab(lab, problems, `seed ${seed} lab ${i}`)));
    }
  };
  for (const seed of seeds) await one(seed);
  for (const seed of seeds) {
    const got = bySeed.get(seed);
    if (got === undefined) continue;
    costRatios.push(got.cost);
    bestRatios.push(got.best);
    hbGpuS.push(got.gpuS[0]);
    noneGpuS.push(got.gpuS[1]);
    hbBests.push(got.bests[0]);
    noneBests.push(got.bests[1]);
    details.push(got.line, ...got.timeline);
  }
  const cost = mean(costRatios);
  const best = mean(bestRatios);
  details.push(...problems.map((p) => `problem: ${p}`));
  return {
    name: 'pruning pays',
    measured: `hyperband billed ${pct(cost)} of the unpruned sweep's GPU-seconds, its best ${pct(best - 1)} off the unpruned best (mean of ${options.seeds} seed(s), ${options.trials} trials, 6 at once)`,
    target: 'at most 50 % of the GPU-seconds, best within 2 %',
    baseline: `unpruned: ${mean(noneGpuS).toFixed(1)} GPU-s, best ${mean(noneBests).toFixed(4)}`,
    ours: `hyperband: ${mean(hbGpuS).toFixed(1)} GPU-s (${pct(cost)}), best ${mean(hbBests).toFixed(4)} (${pct(best - 1)} off)`,
    met: problems.length === 0 && cost <= 0.5 && best <= 1.02,
    details,
  };
}

// ------------------------------------------------------------------ 3. CPU of 8 trials at once

/** Runs the figures' child client on `lab` in `mode` to its end: its own CPU time, ms. */
function childCpuMs(lab: Lab, mode: 'train' | 'sweep'): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT, 'bench', 'sweepFiguresChild.ts')],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          FIGURES_CHILD: JSON.stringify({ ...lab.childSetup(), python: PYTHON, mode }),
          FIGURES_API_KEY: lab.emulator.apiKey,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.once('exit', (code) => {
      const last = out.trim().split('\n').pop() ?? '';
      try {
        if (code !== 0) throw new Error(`exit ${code}`);
        resolve((JSON.parse(last) as { cpuMs: number }).cpuMs);
      } catch (error) {
        reject(new Error(`the ${mode} client: ${String(error)}: ${err.slice(-2000)}`));
      }
    });
  });
}

async function cpuFigure(options: FigureOptions): Promise<Figure> {
  const n = options.parallel;
  const problems: string[] = [];
  const spec = {
    steps: 60,
    stepSeconds: 0.3 * (options.jobScale ?? 1),
    seed: 7,
    parallel: n,
    trials: n,
    budgetUsd: 50,
    pruner: 'none' as const,
    maxCostUsd: 0.5,
  };
  const labs = await Promise.all([sweepLab(spec), sweepLab({ ...spec, trials: 1, parallel: 1 })]);
  try {
    const [many, one] = await Promise.all([
      childCpuMs(labs[0]!, 'sweep'),
      childCpuMs(labs[1]!, 'train'),
    ]);
    const record = sweepJson(labs[0]!);
    const complete = record.trials.filter((t) => t.state === 'complete').length;
    if (complete !== n) problems.push(`${complete} of ${n} trials complete`);
    const ratio = many / one;
    return {
      name: `${n} parallel trials followed`,
      measured: `the client's CPU following ${n} trials at once ${(many / 1000).toFixed(2)} s, following one run ${(one / 1000).toFixed(2)} s: ${ratio.toFixed(2)}x`,
      target: `at most ${n}x`,
      baseline: `one run: ${(one / 1000).toFixed(2)} s CPU`,
      ours: `${n} trials: ${(many / 1000).toFixed(2)} s CPU (${ratio.toFixed(2)}x)`,
      met: problems.length === 0 && ratio <= n,
      details: [
        `jobs of ${spec.steps} steps of ${spec.stepSeconds} s, side by side; process CPU time (user + sys) from the flow's start to its end`,
        ...problems.map((p) => `problem: ${p}`),
      ],
    };
  } finally {
    await Promise.all(labs.map((lab, i) => closeLab(lab, problems, `cpu lab ${i}`)));
  }
}

// ------------------------------------------------------------------ main

const FIGURES: Record<string, (options: FigureOptions) => Promise<Figure>> = {
  pruning: pruningFigure,
  budget: budgetFigure,
  cpu: cpuFigure,
};

export async function sweepFigures(options: FigureOptions): Promise<Figure[]> {
  const figures: Figure[] = [];
  for (const name of options.only) {
    const started = Date.now();
    let figure: Figure;
    try {
      figure = await FIGURES[name]!(options);
    } catch (error) {
      figure = {
        name,
        measured: `failed: ${String(error)}`,
        target: '',
        met: false,
        details: [],
        baseline: '',
        ours: 'failed',
      };
    }
    figure.details.push(`wall ${((Date.now() - started) / 1000).toFixed(0)} s`);
    figures.push(figure);
    process.stdout.write(
      `\n${figure.name}: ${figure.measured}\n  target: ${figure.target}: ${figure.met ? 'met' : 'NOT met'}\n${figure.details.map((d) => `  ${d}\n`).join('')}`,
    );
  }
  return figures;
}

/**
 * The figures as a benchmark of bench/run.ts (`npm run bench`, docs/BENCHMARKS.md) at their
 * full size; skipped by `--quick` (CI), where test/integration/sweepFigures runs their smallest.
 */
export async function sweepBench(options: BenchOptions): Promise<BenchReport> {
  const title = '8. Sweeps under one budget (issue 38)';
  const baseline =
    'the unpruned sweep of the same trials; the budget_usd of each sweep; the client following one run';
  if (options.quick) {
    return {
      title,
      baseline,
      rows: [],
      notes: [
        'skipped by --quick: test/integration/sweepFigures runs the figures at their smallest',
      ],
    };
  }
  const figures = await sweepFigures({
    seeds: 5,
    trials: 12,
    sweeps: 10,
    killed: 3,
    parallel: 8,
    only: Object.keys(FIGURES),
  });
  return {
    title,
    baseline,
    rows: figures.map((f) => ({
      measure: `${f.name}: ${f.measured}`,
      baseline: f.baseline,
      ours: f.ours,
      ratio: '',
      target: f.target,
      verdict: f.met ? 'met' : 'NOT met',
    })),
    notes: figures.flatMap((f) => f.details.map((d) => `${f.name}: ${d}`)),
    raw: figures,
  };
}

async function main(): Promise<number> {
  const only = (arg('--only') ?? 'pruning,budget,cpu').split(',');
  for (const name of only) {
    if (!(name in FIGURES)) throw new Error(`--only: no figure ${name} (pruning, budget, cpu)`);
  }
  const options: FigureOptions = {
    seeds: num('--seeds', 5),
    trials: num('--trials', 12),
    sweeps: num('--sweeps', 10),
    killed: Number(arg('--killed') ?? 3),
    parallel: num('--parallel', 8),
    only,
    jobScale: Number(arg('--job-scale') ?? 1),
    timeline: process.argv.includes('--timeline'),
  };
  if (!(options.jobScale! > 0 && options.jobScale! <= 1))
    throw new Error('--job-scale must be a number in (0, 1]');
  const started = Date.now();
  const figures = await sweepFigures(options);
  process.stdout.write(
    `\nsweep figures: ${figures.filter((f) => f.met).length} of ${figures.length} met, ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
  );
  const json = arg('--json');
  if (json !== undefined) fs.writeFileSync(json, JSON.stringify({ options, figures }, null, 2));
  return figures.every((f) => f.met) ? 0 : 1;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`${String(error)}\n`);
      process.exit(2);
    },
  );
}
