/**
 * What the study process (python/overbrainer_study.py) and its client say to each other, one JSON
 * object per line: the requests as types, the answers as zod schemas (a line that does not fit
 * its schema is a malformed answer, never a value taken on trust).
 */
import { z } from 'zod';
import type { SweepConfig, SweepParam } from '../config/sweep';

/** A trial's state as Optuna stores it. */
export const TRIAL_STATES = ['RUNNING', 'COMPLETE', 'PRUNED', 'FAIL', 'WAITING'] as const;
export type TrialState = (typeof TRIAL_STATES)[number];

/** How a trial ends, as the client tells it. */
export type TrialEnd = 'complete' | 'pruned' | 'fail';

/** A parameter's value in a trial. */
export type ParamValue = string | number | boolean;

/** What opens (creates, or loads) a study. */
export interface StudySpec {
  /** The SQLite file of Optuna's RDBStorage (absolute). */
  storagePath: string;
  /** The study's name in that storage. */
  study: string;
  direction: 'minimize' | 'maximize';
  sampler: SweepConfig['sampler'];
  pruner: SweepConfig['pruner'];
  samplerSeed: number | null;
  /** Optuna's min_resource / max_resource of the pruner (steps); null: its defaults. */
  minResource: number | null;
  maxResource: number | null;
  params: Readonly<Record<string, SweepParam>>;
}

/** The requests, by op (the client adds the `id`). */
export type StudyRequest =
  | {
      op: 'open';
      storage: string;
      study: string;
      direction: string;
      sampler: string;
      sampler_seed: number | null;
      pruner: string;
      min_resource: number | null;
      max_resource: number | null;
      params: Readonly<Record<string, SweepParam>>;
    }
  | { op: 'ask'; attrs: Readonly<Record<string, string | number>> }
  | { op: 'attrs'; number: number; attrs: Readonly<Record<string, string | number>> }
  | { op: 'report'; number: number; step: number; value: number }
  | { op: 'tell'; number: number; state: TrialEnd; value: number | null }
  | { op: 'trials' }
  | { op: 'close' };

/** The first line the process writes. */
export const readySchema = z.union([
  z.object({ ready: z.literal(true), optuna: z.string(), python: z.string() }),
  z.object({
    ready: z.literal(false),
    error: z.object({ kind: z.string(), message: z.string() }),
  }),
]);

/** Every answer's envelope: its request's id, and ok or a typed error. */
export const answerSchema = z.union([
  z.object({ id: z.number().int(), ok: z.literal(true) }).passthrough(),
  z.object({
    id: z.number().int().nullable(),
    ok: z.literal(false),
    error: z.object({ kind: z.string(), message: z.string() }),
  }),
]);

const paramValue = z.union([z.string(), z.number(), z.boolean()]);

export const openAnswer = z.object({ trials: z.number().int().min(0) });
export const askAnswer = z.object({
  number: z.number().int().min(0),
  params: z.record(z.string(), paramValue),
});
export const reportAnswer = z.object({ should_prune: z.boolean() });
export const tellAnswer = z.object({ state: z.enum(TRIAL_STATES) });
export const emptyAnswer = z.object({});

const trialSchema = z.object({
  number: z.number().int().min(0),
  state: z.enum(TRIAL_STATES),
  params: z.record(z.string(), paramValue),
  value: z.number().nullable(),
  /** Intermediate values by step (JSON keys are strings); null for a value JSON cannot hold. */
  intermediate: z.record(z.string(), z.number().nullable()),
  attrs: z.record(z.string(), z.unknown()),
});
export type StudyTrial = z.output<typeof trialSchema>;

export const trialsAnswer = z.object({
  trials: z.array(trialSchema),
  best: z.number().int().nullable(),
});
