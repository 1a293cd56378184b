/**
 * `[budget]` of overbrainer.toml: what this project (all its runs and kept pods together) may
 * spend per UTC day and per UTC month, whether a run that would pass it is given a cost cap that
 * fits instead of being refused, and when a kept pod is worth a reminder.
 */
import { z } from 'zod';
import { checkFields, isTable, type Field, type Reporter } from './report';

export interface BudgetConfig {
  /** Most the project may spend per UTC day, USD; null for no daily budget. */
  maxUsdPerDay: number | null;
  /** Most the project may spend per UTC month, USD; null for no monthly budget. */
  maxUsdPerMonth: number | null;
  /** A run whose worst case passes what is left gets a `max_cost_usd` that fits, not a refusal. */
  fitRunsToBudget: boolean;
  /** A kept pod older than this gets one reminder with its spend so far. */
  keptPodReminderHours: number;
}

/** Hours after which a kept pod is worth a reminder when `[budget]` names none. */
export const DEFAULT_KEPT_POD_REMINDER_HOURS = 12;

const NUMERIC = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
const toNumber = (value: unknown): unknown =>
  typeof value === 'string' && NUMERIC.test(value.trim()) ? Number(value.trim()) : value;
const toBoolean = (value: unknown): unknown =>
  value === 'true' ? true : value === 'false' ? false : value;

export const BUDGET_FIELDS = {
  max_usd_per_day: {
    schema: z.preprocess(toNumber, z.number().gt(0).max(1_000_000)),
    rule: 'must be a number of USD greater than 0',
    hint: 'Write max_usd_per_day = 50, or leave it out for no daily budget.',
  },
  max_usd_per_month: {
    schema: z.preprocess(toNumber, z.number().gt(0).max(10_000_000)),
    rule: 'must be a number of USD greater than 0',
    hint: 'Write max_usd_per_month = 500, or leave it out for no monthly budget.',
  },
  fit_runs_to_budget: {
    schema: z.preprocess(toBoolean, z.boolean()),
    rule: 'must be true or false',
    hint: 'Write fit_runs_to_budget = true to cap a run to what is left instead of refusing it, or leave it out for false.',
  },
  kept_pod_reminder_hours: {
    schema: z.preprocess(toNumber, z.number().gt(0).max(8760)),
    rule: 'must be a number of hours greater than 0 (at most 8760)',
    hint: `Write kept_pod_reminder_hours = ${DEFAULT_KEPT_POD_REMINDER_HOURS}, or leave it out for ${DEFAULT_KEPT_POD_REMINDER_HOURS} hours.`,
  },
} satisfies Record<string, Field>;

/** `[budget]` checked; null when the file has none (or it is not a table: reported elsewhere). */
export function checkBudget(report: Reporter, raw: unknown): BudgetConfig | null {
  if (!isTable(raw)) return null;
  const before = report.errors.length;
  const valid = checkFields(report, raw, ['budget'], BUDGET_FIELDS, () => null);
  if (
    valid.max_usd_per_day !== undefined &&
    valid.max_usd_per_month !== undefined &&
    valid.max_usd_per_day > valid.max_usd_per_month
  ) {
    report.add(
      ['budget', 'max_usd_per_day'],
      `max_usd_per_day ($${valid.max_usd_per_day}) is more than max_usd_per_month ($${valid.max_usd_per_month}): the day's budget could never be spent`,
      'Lower max_usd_per_day to at most max_usd_per_month, or raise the monthly budget.',
    );
  }
  if (report.errors.length > before) return null;
  return {
    maxUsdPerDay: valid.max_usd_per_day ?? null,
    maxUsdPerMonth: valid.max_usd_per_month ?? null,
    fitRunsToBudget: valid.fit_runs_to_budget ?? false,
    keptPodReminderHours: valid.kept_pod_reminder_hours ?? DEFAULT_KEPT_POD_REMINDER_HOURS,
  };
}
