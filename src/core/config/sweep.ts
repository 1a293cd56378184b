/**
 * `[sweep]` of overbrainer.toml: an Optuna study run as train runs on pods under one hard dollar
 * budget (`budget_usd`, all trials together), with the search and the pruning Optuna's own. Its
 * parameters, `[sweep.params]`, are ./sweepParams.ts.
 */
import { z } from 'zod';
import { checkFields, isTable, type Field, type Reporter, type Table } from './report';
import { checkSweepParams, type SweepParam } from './sweepParams';
import type { TargetConfig } from './types';

export type { SweepParam } from './sweepParams';

/** Optuna's samplers a sweep may name (each in Optuna 3.1 and 5.x alike). */
export const SWEEP_SAMPLERS = ['tpe', 'random', 'grid', 'cmaes'] as const;
export type SweepSampler = (typeof SWEEP_SAMPLERS)[number];
/** Optuna's pruners a sweep may name; `none` never prunes. */
export const SWEEP_PRUNERS = ['hyperband', 'successive_halving', 'median', 'none'] as const;
export type SweepPruner = (typeof SWEEP_PRUNERS)[number];

/** A sweep's name: its folder under runs/sweeps/ and its study's name. */
export const SWEEP_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export interface SweepConfig {
  /** The study's name and its folder, runs/sweeps/<name>/. */
  name: string;
  /** The Runpod target each trial's pod is made from. */
  target: string;
  /** The key of metrics.jsonl whose values are the trial's intermediate values and result. */
  metric: string;
  direction: 'minimize' | 'maximize';
  /** Most trials the study runs (fewer when the budget runs out first). */
  trials: number;
  /** Trials (pods) at once. */
  parallel: number;
  /** The most the whole sweep may cost, all its pods together, USD: a hard limit. */
  budgetUsd: number;
  sampler: SweepSampler;
  pruner: SweepPruner;
  /** The sampler's seed; null for a random one. */
  samplerSeed: number | null;
  /**
   * Optuna's `min_resource` and `max_resource` of Hyperband (and `min_resource` of successive
   * halving), in the job's steps: its first rung, and the steps of a whole trial. Null: Optuna's
   * defaults (1, and the steps of the first trial to end: until one ends nothing is pruned, and a
   * trial already running then is judged at its later steps against the others' early ones).
   */
  minResource: number | null;
  maxResource: number | null;
  /** The search space, by parameter name (dotted for a nested key of the trainer's YAML). */
  params: Readonly<Record<string, SweepParam>>;
}

const NUMERIC = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
const toNumber = (value: unknown): unknown =>
  typeof value === 'string' && NUMERIC.test(value.trim()) ? Number(value.trim()) : value;
const whole = (min: number, max: number) =>
  z.preprocess(toNumber, z.number().int().min(min).max(max));
const words = (list: readonly string[]): string => list.map((w) => `"${w}"`).join(', ');

export const SWEEP_FIELDS = {
  name: {
    schema: z.string().regex(SWEEP_NAME),
    rule: 'must be lower-case letters, digits, _ and - (at most 63, starting with a letter or digit)',
    hint: 'Write name = "lr-rank": it names the study and its folder runs/sweeps/lr-rank/.',
    example: 'name = "lr-rank"',
    required: true,
  },
  target: {
    schema: z.string().min(1),
    rule: 'must be the name of a [targets.NAME] with kind = "runpod"',
    hint: 'Write target = "pod", or leave it out to use training.target.',
  },
  metric: {
    schema: z.string().regex(/^\S(.*\S)?$/),
    rule: 'must be a key of metrics.jsonl',
    hint: 'Write metric = "eval_loss": a key your job writes to metrics.jsonl.',
    example: 'metric = "eval_loss" (a key your job writes to metrics.jsonl)',
    required: true,
  },
  direction: {
    schema: z.enum(['minimize', 'maximize']),
    rule: 'must be "minimize" or "maximize"',
    hint: 'Write direction = "minimize" for a loss, or "maximize" for an accuracy.',
    example: 'direction = "minimize" (or "maximize" for a metric where more is better)',
    required: true,
  },
  trials: {
    schema: whole(1, 10_000),
    rule: 'must be a whole number from 1 to 10000',
    hint: 'Write trials = 24: the most trials the study runs.',
    example: 'trials = 24 (the most trials the study runs)',
    required: true,
  },
  parallel: {
    schema: whole(1, 64),
    rule: 'must be a whole number from 1 to 64',
    hint: 'Write parallel = 4 (pods at once), or leave it out for 1.',
  },
  budget_usd: {
    schema: z.preprocess(toNumber, z.number().gt(0).max(1_000_000)),
    rule: 'must be a number of USD greater than 0',
    hint: 'Write budget_usd = 15: the most the whole sweep may cost, all its pods together.',
    example: 'budget_usd = 15 (the most the whole sweep may cost, all its pods together)',
    required: true,
  },
  sampler: {
    schema: z.enum(SWEEP_SAMPLERS),
    rule: `must be one of Optuna's samplers ${words(SWEEP_SAMPLERS)}`,
    hint: 'Write sampler = "tpe", or leave it out for "tpe" (Optuna\'s default).',
  },
  pruner: {
    schema: z.enum(SWEEP_PRUNERS),
    rule: `must be one of Optuna's pruners ${words(SWEEP_PRUNERS)}`,
    hint: 'Write pruner = "hyperband", or "none" to never stop a trial early; leave it out for "median" (Optuna\'s default).',
  },
  sampler_seed: {
    schema: whole(0, 2 ** 32 - 1),
    rule: 'must be a whole number from 0 to 4294967295',
    hint: "Write sampler_seed = 1 to make the sampler's choices repeatable, or leave it out.",
  },
  min_resource: {
    schema: whole(1, 1_000_000_000),
    rule: 'must be a whole number of steps from 1',
    hint: "Write min_resource = 5 (the step of the job's first evaluation: the pruner's first rung), or leave it out.",
  },
  max_resource: {
    schema: whole(1, 1_000_000_000),
    rule: 'must be a whole number of steps from 1',
    hint: "Write max_resource = 60 (a whole trial's steps), or leave it out for Optuna's default (the steps of the first trial to end).",
  },
  params: {
    // Checked by ./sweepParams.ts, which places each problem at its parameter.
    schema: z.custom<Table>((value) => isTable(value)),
    rule: 'must be a table of parameters',
    hint: 'Write it as a [sweep.params] section: learning_rate = { low = 1e-5, high = 1e-3, log = true }.',
  },
} satisfies Record<string, Field>;

/**
 * `[sweep]` checked; null when the file has none (or it is not a table: reported elsewhere).
 * `exactParams` is `[sweep.params]` read again with integers kept apart from floats (TOML's `8`
 * and `8.0`), which decides whether a range is Optuna's int or float.
 */
export function checkSweep(
  report: Reporter,
  raw: unknown,
  exactParams: unknown,
  context: {
    targets: Readonly<Record<string, TargetConfig>>;
    targetNames: Set<string>;
    training: { target: string | null } | null;
    hasTraining: boolean;
  },
): SweepConfig | null {
  if (!isTable(raw)) return null;
  const before = report.errors.length;
  const valid = checkFields(report, raw, ['sweep'], SWEEP_FIELDS, () => null);
  const target = checkSweepTarget(report, valid.target, context);
  if (!context.hasTraining) {
    report.add(
      ['sweep'],
      'a [sweep] runs each trial as a train run, and this file has no [training]',
      'Add a [training] section (trainer and its command or config): every trial runs it with its own parameters.',
      'key',
    );
  }
  if (valid.trials !== undefined && valid.parallel !== undefined && valid.parallel > valid.trials) {
    report.add(
      ['sweep', 'parallel'],
      `parallel (${valid.parallel}) is more than trials (${valid.trials}): the pods beyond it would never get a trial`,
      `Write parallel = ${valid.trials} or less, or raise trials.`,
    );
  }
  checkResources(report, valid);
  const sampler = valid.sampler ?? 'tpe';
  let params: Record<string, SweepParam> | null = null;
  if (!Object.hasOwn(raw, 'params')) {
    report.add(
      ['sweep'],
      'a [sweep] needs [sweep.params], the parameters to search',
      'Add a [sweep.params] section, e.g. learning_rate = { low = 1e-5, high = 1e-3, log = true } and lora_r = [8, 16, 32].',
      'key',
    );
  } else if (valid.params !== undefined) {
    params = checkSweepParams(report, isTable(exactParams) ? exactParams : valid.params, sampler);
  }
  if (report.errors.length > before || params === null || target === null) return null;
  const { name, metric, direction, trials, budget_usd: budgetUsd } = valid;
  if (name === undefined || metric === undefined || trials === undefined) return null;
  if (budgetUsd === undefined || (direction !== 'minimize' && direction !== 'maximize'))
    return null;
  return {
    name,
    target,
    metric,
    direction,
    trials,
    parallel: valid.parallel ?? 1,
    budgetUsd,
    sampler,
    pruner: valid.pruner ?? 'median',
    samplerSeed: valid.sampler_seed ?? null,
    minResource: valid.min_resource ?? null,
    maxResource: valid.max_resource ?? null,
    params,
  };
}

/** min_resource / max_resource: only for the pruners that take them, the first not past the last. */
function checkResources(
  report: Reporter,
  valid: { pruner?: string; min_resource?: number; max_resource?: number },
): void {
  const pruner = valid.pruner ?? 'median';
  const takes: Record<string, string[]> = {
    hyperband: ['min_resource', 'max_resource'],
    successive_halving: ['min_resource'],
  };
  for (const key of ['min_resource', 'max_resource'] as const) {
    if (valid[key] === undefined || (takes[pruner] ?? []).includes(key)) continue;
    report.add(
      ['sweep', key],
      `${key} is a setting of ${key === 'min_resource' ? 'the "hyperband" and "successive_halving" pruners' : 'the "hyperband" pruner'}, and this sweep's pruner is "${pruner}"`,
      `Remove ${key}, or write pruner = "hyperband".`,
    );
  }
  const { min_resource: min, max_resource: max } = valid;
  if (min !== undefined && max !== undefined && min > max) {
    report.add(
      ['sweep', 'max_resource'],
      `max_resource (${max}) is less than min_resource (${min}): the pruner's first rung would come after a whole trial`,
      `Write max_resource = ${min} or more (a whole trial's steps).`,
    );
  }
}

function checkSweepTarget(
  report: Reporter,
  named: string | undefined,
  context: Parameters<typeof checkSweep>[3],
): string | null {
  const runpod = [...context.targetNames].filter((n) => context.targets[n]?.kind === 'runpod');
  const choose =
    runpod.length > 0
      ? `Write target = "${runpod[0]}"${runpod.length > 1 ? ` (or one of ${runpod.join(', ')})` : ''}`
      : 'Add a [targets.pod] table with kind = "runpod" and write target = "pod"';
  const target = named ?? context.training?.target ?? null;
  const path = named !== undefined ? ['sweep', 'target'] : ['sweep'];
  const want = named !== undefined ? 'value' : 'key';
  if (target === null) {
    if (runpod.length === 1 && context.targetNames.size === 1) return runpod[0] ?? null;
    report.add(
      ['sweep'],
      'a [sweep] needs a target: neither sweep.target nor training.target names one',
      `${choose}.`,
      'key',
    );
    return null;
  }
  if (!context.targetNames.has(target)) {
    report.add(
      path,
      `the sweep's target "${target}" has no [targets.${target}]`,
      `${choose}, or add a [targets.${target}] table.`,
      want,
    );
    return null;
  }
  const kind = context.targets[target]?.kind;
  if (kind === 'local') {
    report.add(
      path,
      `the sweep's target "${target}" is a local target: a sweep's budget holds because each trial's pod carries its cost cap`,
      `${choose}.`,
      want,
    );
    return null;
  }
  return kind === 'runpod' ? target : null; // an invalid target is reported where it is
}
