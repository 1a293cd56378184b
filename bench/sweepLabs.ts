/**
 * The labs of bench/sweepFigures.ts (issue 38's figures): a sweep's workspace on its own emulator
 * with examples/sweep/train.py as the job, what the emulator's ledger billed its pods, and the
 * figures' shapes.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ROOT } from '../test/helpers/cli';
import { Lab } from '../test/helpers/lifecycle';
import { SWEEP } from '../test/helpers/sweepLab';

/** The figure's sizes. */
export interface FigureOptions {
  seeds: number;
  /** Trials of each sweep of figure 1 (6 at once). */
  trials: number;
  sweeps: number;
  killed: number;
  parallel: number;
  only: string[];
  /**
   * The jobs of figures 1 and 3 run this fraction of their steps' seconds (default 1): the
   * smoke test's shorter jobs measure every figure for less CPU; only the full size is judged.
   */
  jobScale?: number;
  /** Figure 1 prints every pruned trial's timeline (bench/sweepFiguresTimeline.ts). */
  timeline?: boolean;
}

/** Each figure: what was measured, against its target. */
export interface Figure {
  name: string;
  measured: string;
  target: string;
  met: boolean;
  details: string[];
  /** The figure as a row of docs/BENCHMARKS.md (bench/run.ts): its baseline and ours. */
  baseline: string;
  ours: string;
}

// ------------------------------------------------------------------ the labs

/** The job: examples/sweep/train.py, `steps` of `stepSeconds`, an eval_loss every 5 steps. */
export function jobCommand(steps: number, stepSeconds: number, seed: number): string {
  return `python3 train.py --steps ${steps} --step-seconds ${stepSeconds} --eval-every 5 --seed ${seed} --learning-rate {learning_rate} --lora-r {lora_r}`;
}

export interface SweepLabSpec {
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

export async function sweepLab(spec: SweepLabSpec): Promise<Lab> {
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
export function billed(lab: Lab): {
  gpuSeconds: number;
  costUsd: number;
  pods: number;
  billing: number;
} {
  const pods = lab.emulator.ledger().pods;
  return {
    gpuSeconds: pods.reduce((s, p) => s + p.gpuSeconds, 0),
    costUsd: pods.reduce((s, p) => s + p.costUsd, 0),
    pods: pods.length,
    billing: pods.filter((p) => p.billing).length,
  };
}

/** Closes the lab; a failed close (a pod's process survived, a secret leaked) is said. */
export async function closeLab(lab: Lab, problems: string[], what: string): Promise<void> {
  try {
    const billing = await lab.close();
    if (billing.length > 0) problems.push(`${what}: ${billing.length} pod(s) billing at the close`);
  } catch (error) {
    problems.push(`${what}: ${String(error)}`);
  }
}

export const mean = (xs: number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;
export const pct = (x: number): string => `${(100 * x).toFixed(1)} %`;
