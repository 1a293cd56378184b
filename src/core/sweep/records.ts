/**
 * A sweep's records: runs/sweeps/<name>/sweep.json (what the client knows of each trial: its
 * params, its run, its state, its objective and its cost), Optuna's storage beside it
 * (study.db), and a lock (.lock) so that two clients never run one sweep. sweep.json is written
 * atomically at each change; each trial's run is an ordinary run in runs/ whose run.json names
 * the sweep and the trial's number.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import type { Clock } from '../clock';
import { HintedError } from '../errors';
import { writeFileAtomicSync } from '../runs/atomic';
import { acquireLock, DEFAULT_LOCK_TIMING, inspectLock, type RunLock } from '../runs/lock';

export const SWEEPS_DIR = 'sweeps';
export const SWEEP_FILE = 'sweep.json';
export const STUDY_FILE = 'study.db';
const LOCK = '.lock';

/**
 * A trial as the client records it. `starting`: asked of the study, its run not yet made;
 * `running`: its run made (run_id), followed to its end; then how it ended.
 */
export const TRIAL_RECORD_STATES = ['starting', 'running', 'complete', 'pruned', 'fail'] as const;
export type TrialRecordState = (typeof TRIAL_RECORD_STATES)[number];

const paramValue = z.union([z.string(), z.number(), z.boolean()]);

const trialSchema = z.object({
  number: z.number().int().min(0),
  params: z.record(z.string(), paramValue),
  run_id: z.string().nullable(),
  state: z.enum(TRIAL_RECORD_STATES),
  /** The last value of the sweep's metric the job wrote (its result when complete). */
  objective: z.number().nullable(),
  /** The cap armed on its pod: what the budget holds back while it runs, USD. */
  cap_usd: z.number().min(0),
  /** What it cost (its pods' bills, else their estimates); null while it runs. */
  cost_usd: z.number().min(0).nullable(),
  message: z.string().nullable(),
});

export const SWEEP_ENDS = ['trials', 'budget', 'stopped'] as const;
export type SweepEnd = (typeof SWEEP_ENDS)[number];

const sweepSchema = z.object({
  version: z.literal(1),
  name: z.string().min(1),
  metric: z.string().min(1),
  direction: z.enum(['minimize', 'maximize']),
  trials_max: z.number().int().min(1),
  parallel: z.number().int().min(1),
  budget_usd: z.number().gt(0),
  created: z.string(),
  /** `running` until it ends; how it ended, and the words of it. */
  state: z.enum(['running', 'ended']),
  end: z.enum(SWEEP_ENDS).nullable(),
  message: z.string().nullable(),
  trials: z.array(trialSchema),
});

export type TrialRecord = z.output<typeof trialSchema>;
export type SweepRecord = z.output<typeof sweepSchema>;

export type SweepErrorKind = 'busy' | 'invalid' | 'not_found' | 'mismatch' | 'no_cap' | 'io';

export class SweepError extends HintedError<SweepErrorKind> {}

/** runs/sweeps/<name>/ */
export function sweepDir(runsDir: string, name: string): string {
  return path.join(runsDir, SWEEPS_DIR, name);
}

/** The sweep's record, or null when it has none yet. Throws `invalid` for a damaged one. */
export function loadSweep(runsDir: string, name: string): SweepRecord | null {
  const file = path.join(sweepDir(runsDir, name), SWEEP_FILE);
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new SweepError(
      'io',
      `cannot read ${file}: ${(error as Error).message}`,
      'Check the file’s permissions.',
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const result = sweepSchema.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new SweepError(
      'invalid',
      `${file} is damaged${issue ? ` (${issue.path.join('.') || 'top'}: ${issue.message})` : ''}`,
      `Restore it from a backup, or move runs/sweeps/${name}/ away to start the sweep afresh (its trials' runs stay in runs/).`,
    );
  }
  return result.data;
}

/** Writes sweep.json atomically. */
export function saveSweep(runsDir: string, record: SweepRecord): void {
  const dir = sweepDir(runsDir, record.name);
  fs.mkdirSync(dir, { recursive: true });
  writeFileAtomicSync(dir, SWEEP_FILE, `${JSON.stringify(sweepSchema.parse(record), null, 2)}\n`);
}

/** Every sweep with a readable record, by name. */
export function listSweeps(runsDir: string): { sweeps: SweepRecord[]; warnings: string[] } {
  const root = path.join(runsDir, SWEEPS_DIR);
  let names: string[];
  try {
    names = fs.readdirSync(root).sort();
  } catch {
    return { sweeps: [], warnings: [] };
  }
  const sweeps: SweepRecord[] = [];
  const warnings: string[] = [];
  for (const name of names) {
    try {
      const record = loadSweep(runsDir, name);
      if (record !== null) sweeps.push(record);
    } catch (error) {
      warnings.push(`skipping sweep ${name}: ${(error as Error).message}`);
    }
  }
  return { sweeps, warnings };
}

/** Takes the sweep's lock; `busy` (naming its holder) when another live client runs it. */
export function lockSweep(runsDir: string, name: string, owner: string, clock: Clock): RunLock {
  const dir = sweepDir(runsDir, name);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, LOCK);
  const lock = acquireLock(file, `sweep ${name}`, owner, clock, DEFAULT_LOCK_TIMING);
  if (lock !== null) return lock;
  const holder = inspectLock(file, clock, DEFAULT_LOCK_TIMING);
  throw new SweepError(
    'busy',
    `sweep ${name} is run by another client${holder ? ` (pid ${holder.pid ?? '?'}${holder.owner ? `, ${holder.owner}` : ''})` : ''}`,
    'Watch it there, or close that client and start the sweep again here: it resumes from its records.',
  );
}

/** The sweep's trial `number`; throws when the record has none (a bug, not an input). */
export function trialOf(record: SweepRecord, number: number): TrialRecord {
  const trial = record.trials.find((t) => t.number === number);
  if (trial === undefined) throw new RangeError(`sweep ${record.name} has no trial ${number}`);
  return trial;
}
