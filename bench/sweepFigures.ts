/**
 * Issue 38's three figures, measured on the real emulator (namespaced pods with the real
 * bootstrap, watchdog and sshd), the real Optuna (Debian's python3-optuna under /usr/bin/python3)
 * and examples/sweep/train.py as the job, at the labs' scaled timing (production / 60). Each
 * figure is printed beside its target with "met" or "NOT met", from what was measured here.
 *
 *   npm run figures:sweep                   5 seeds, 10 budget sweeps (3 killed), 8 trials at once
 *   npx tsx bench/sweepFigures.ts [--seeds N] [--trials N] [--sweeps N] [--killed N]
 *                                 [--parallel N] [--only pruning,budget,cpu] [--json FILE]
 *   (test/integration/sweepFigures.integration.test.ts runs its smallest size: one seed of 6
 *   trials, one killed sweep, 2 trials at once.)
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
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { OverbrainerConfig } from '../src/core/config/types';
import { sweep, sweepQuote, sweepStop } from '../src/core/flow/sweep';
import { ROOT } from '../test/helpers/cli';
import { Lab } from '../test/helpers/lifecycle';
import { PYTHON, SWEEP, sweepChild, sweepJson, trialsRunning } from '../test/helpers/sweepLab';

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

/** The figure's sizes. */
export interface FigureOptions {
  seeds: number;
  /** Trials of each sweep of figure 1 (6 at once). */
  trials: number;
  sweeps: number;
  killed: number;
  parallel: number;
  only: string[];
}

/** Each figure: what was measured, against its target. */
export interface Figure {
  name: string;
  measured: string;
  target: string;
  met: boolean;
  details: string[];
}

// ------------------------------------------------------------------ the labs

/** The job: examples/sweep/train.py, `steps` of `stepSeconds`, an eval_loss every 5 steps. */
function jobCommand(steps: number, stepSeconds: number, seed: number): string {
  return `python3 train.py --steps ${steps} --step-seconds ${stepSeconds} --eval-every 5 --seed ${seed} --learning-rate {learning_rate} --lora-r {lora_r}`;
}

interface SweepLabSpec {
  steps: number;
  stepSeconds: number;
  seed: number;
  trials: number;
  parallel: number;
  budgetUsd: number;
  pruner: 'hyperband' | 'none';
  maxCostUsd: number;
  bootGraceMinutes?: number;
}

async function sweepLab(spec: SweepLabSpec): Promise<Lab> {
  const resources =
    spec.pruner === 'hyperband' ? `min_resource = 5\nmax_resource = ${spec.steps}\n` : '';
  const lab = await Lab.start({
    command: jobCommand(spec.steps, spec.stepSeconds, spec.seed),
    bootGraceMinutes: spec.bootGraceMinutes ?? 5,
    targetExtra: `max_cost_usd = ${spec.maxCostUsd}

[sweep]
name = "${SWEEP}"
metric = "eval_loss"
direction = "minimize"
trials = ${spec.trials}
parallel = ${spec.parallel}
budget_usd = ${spec.budgetUsd}
sampler = "random"
sampler_seed = ${spec.seed}
pruner = "${spec.pruner}"
${resources}
[sweep.params]
learning_rate = { low = 1e-5, high = 1e-2, log = true }
lora_r = [4, 8, 16, 32, 64]
`,
  });
  fs.copyFileSync(
    path.join(ROOT, 'examples', 'sweep', 'train.py'),
    path.join(lab.workspace, 'train.py'),
  );
  return lab;
}

/** What the emulator's ledger billed all the lab's pods. */
function billed(lab: Lab): { gpuSeconds: number; costUsd: number; pods: number; billing: number } {
  const pods = lab.emulator.ledger().pods;
  return {
    gpuSeconds: pods.reduce((s, p) => s + p.gpuSeconds, 0),
    costUsd: pods.reduce((s, p) => s + p.costUsd, 0),
    pods: pods.length,
    billing: pods.filter((p) => p.billing).length,
  };
}

/** Closes the lab; a failed close (a pod's process survived, a secret leaked) is said. */
async function closeLab(lab: Lab, problems: string[], what: string): Promise<void> {
  try {
    const billing = await lab.close();
    if (billing.length > 0) problems.push(`${what}: ${billing.length} pod(s) billing at the close`);
  } catch (error) {
    problems.push(`${what}: ${String(error)}`);
  }
}

const mean = (xs: number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;
const pct = (x: number): string => `${(100 * x).toFixed(1)} %`;

// ------------------------------------------------------------------ 1. pruning pays

async function pruningFigure(options: FigureOptions): Promise<Figure> {
  const details: string[] = [];
  const problems: string[] = [];
  const costRatios: number[] = [];
  const bestRatios: number[] = [];
  // One seed at a time: its two sweeps side by side (a pod's boot and retrieval, which no pruner
  // cuts, grow with the machine's load, so more sweeps at once would weigh against pruning).
  const seeds = Array.from({ length: options.seeds }, (_, i) => i + 1);
  const bySeed = new Map<number, { cost: number; best: number; line: string }>();
  const one = async (seed: number): Promise<void> => {
    // Jobs of 30 s (120 steps, an eval_loss every 5): a pod's boot, upload, retrieval and delete,
    // which no pruner cuts, take 3-9 s here depending on the machine's load; a trial of Runpod's
    // is hours against a pod's minutes.
    const base = {
      steps: 120,
      stepSeconds: 0.25,
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
      bySeed.set(seed, {
        cost: costRatio,
        best: bestRatio,
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
    details.push(got.line);
  }
  const cost = mean(costRatios);
  const best = mean(bestRatios);
  details.push(...problems.map((p) => `problem: ${p}`));
  return {
    name: 'pruning pays',
    measured: `hyperband billed ${pct(cost)} of the unpruned sweep's GPU-seconds, its best ${pct(best - 1)} off the unpruned best (mean of ${options.seeds} seed(s), ${options.trials} trials, 6 at once)`,
    target: 'at most 50 % of the GPU-seconds, best within 2 %',
    met: problems.length === 0 && cost <= 0.5 && best <= 1.02,
    details,
  };
}

// ------------------------------------------------------------------ 2. the budget holds

/** Trials' states in Optuna's storage, as a user's notebook reads them (optuna.load_study). */
function studyStates(lab: Lab): string[] {
  const storage = path.join(lab.store.runsDir, 'sweeps', SWEEP, 'study.db');
  const code = [
    'import json, optuna, sys',
    'optuna.logging.set_verbosity(optuna.logging.WARNING)',
    `s = optuna.load_study(study_name=${JSON.stringify(SWEEP)}, storage="sqlite:///" + sys.argv[1])`,
    'print(json.dumps([t.state.name for t in s.trials]))',
  ].join('\n');
  const ran = spawnSync(PYTHON, ['-c', code, storage], { encoding: 'utf8' });
  if (ran.status !== 0) throw new Error(`optuna.load_study: ${ran.stderr}`);
  return JSON.parse(ran.stdout) as string[];
}

interface BudgetRun {
  killed: boolean;
  budgetUsd: number;
  worstUsd: number;
  trials: number;
  ledgerUsd: number;
  leaked: number;
  states: string[];
  recordStates: string[];
  end: string;
  problems: string[];
}

async function budgetSweep(index: number, killed: boolean): Promise<BudgetRun> {
  const problems: string[] = [];
  // A trial's cap of $0.003 is ~16 s of an RTX 4090 ($0.69/h): the long jobs (every other
  // sweep) run past it and are ended by it, the short ones end under it.
  const long = index % 2 === 1;
  const trials = 4;
  const lab = await sweepLab({
    steps: long ? 60 : 40,
    stepSeconds: long ? 0.5 : 0.15,
    seed: 100 + index,
    trials,
    parallel: 2,
    budgetUsd: 1, // set below from the quote
    pruner: index % 3 === 2 ? 'none' : 'hyperband',
    maxCostUsd: 0.003,
  });
  try {
    const quote = await sweepQuote(lab.deps, lab.config);
    // Two trials' worst cases and a half: less than the 4 trials need at their worst.
    const budgetUsd = Math.round(2.5 * quote.trialWorstUsd * 10000) / 10000;
    const config: OverbrainerConfig = {
      ...lab.config,
      sweep: { ...lab.config.sweep!, budgetUsd },
    };
    fs.writeFileSync(
      path.join(lab.workspace, 'overbrainer.toml'),
      fs
        .readFileSync(path.join(lab.workspace, 'overbrainer.toml'), 'utf8')
        .replace(/budget_usd = .*/, `budget_usd = ${budgetUsd}`),
    );
    let ledgerUsd: number;
    let leaked: number;
    if (!killed) {
      await lab.track(sweep(lab.deps, config, lab.workspace, { python: PYTHON }));
      const b = billed(lab);
      ledgerUsd = b.costUsd;
      leaked = b.billing;
    } else {
      const other = sweepChild(lab);
      await trialsRunning(lab, 2);
      other.child.kill('SIGKILL');
      await other.exited;
      // Never restarted: the pods' own watchdogs end them (their cost cap, or the lease the
      // dead client stopped renewing).
      try {
        await lab.waitFor(
          'the pods ended by their watchdogs',
          () => billed(lab).billing === 0,
          240_000,
        );
      } catch {
        problems.push('pods still billing 240 s after the kill');
      }
      const b = billed(lab);
      ledgerUsd = b.costUsd;
      leaked = b.billing;
      // Then stopped, so that every trial has its end (no trial starts: checked on the ledger).
      await sweepStop(lab.deps, config, lab.workspace, SWEEP, { python: PYTHON });
      if (billed(lab).pods !== b.pods) problems.push('the stop after the kill created a pod');
    }
    const record = sweepJson(lab);
    const states = studyStates(lab);
    const ended = ['COMPLETE', 'PRUNED', 'FAIL'];
    const recordEnded = ['complete', 'pruned', 'fail'];
    if (states.some((s) => !ended.includes(s))) problems.push(`study states ${states.join(',')}`);
    const recordStates = record.trials.map((t) => t.state);
    if (recordStates.some((s) => !recordEnded.includes(s)))
      problems.push(`sweep.json states ${recordStates.join(',')}`);
    return {
      killed,
      budgetUsd,
      worstUsd: quote.trialWorstUsd,
      trials,
      ledgerUsd,
      leaked,
      states,
      recordStates,
      end: record.end ?? record.state,
      problems,
    };
  } finally {
    await closeLab(lab, problems, `budget sweep ${index}`);
  }
}

async function budgetFigure(options: FigureOptions): Promise<Figure> {
  // The killed sweeps spread over the run: every third from the first.
  const killedAt = new Set<number>();
  for (let i = 0; killedAt.size < Math.min(options.killed, options.sweeps); i += 3) {
    killedAt.add(i < options.sweeps ? i : killedAt.size);
  }
  const runs: BudgetRun[] = [];
  const atOnce = 4;
  for (let start = 0; start < options.sweeps; start += atOnce) {
    const batch = [];
    for (let i = start; i < Math.min(options.sweeps, start + atOnce); i++) {
      batch.push(budgetSweep(i, killedAt.has(i)));
    }
    runs.push(...(await Promise.all(batch)));
  }
  const details = runs.map(
    (r, i) =>
      `sweep ${i}${r.killed ? ' (client SIGKILLed, never restarted)' : ''}: ledger $${r.ledgerUsd.toFixed(4)} of budget $${r.budgetUsd} (${r.trials} trials' worst cases $${(r.trials * r.worstUsd).toFixed(2)}), ended ${r.end}; trials ${r.recordStates.join(',') || 'none'} (study ${r.states.join(',') || 'none'}), ${r.trials - r.recordStates.length} never started; ${r.leaked} pod(s) billing${r.problems.length ? `; PROBLEMS: ${r.problems.join('; ')}` : ''}`,
  );
  const over = runs.filter((r) => r.ledgerUsd > r.budgetUsd).length;
  const leaked = runs.reduce((s, r) => s + r.leaked, 0);
  const maxShare = Math.max(...runs.map((r) => r.ledgerUsd / r.budgetUsd));
  const problems = runs.reduce((s, r) => s + r.problems.length, 0);
  return {
    name: 'the budget holds',
    measured: `${runs.length - over} of ${runs.length} sweeps (${runs.filter((r) => r.killed).length} with the client killed) billed at most their budget (the most: ${pct(maxShare)} of it); ${problems} trial state or run problem(s); ${leaked} leaked pod(s)`,
    target:
      'every sweep at most budget_usd; every trial COMPLETE, PRUNED, FAIL or never started; 0 leaked pods',
    met: over === 0 && leaked === 0 && problems === 0,
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
    stepSeconds: 0.3,
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
  };
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
