/**
 * A sweep's records: runs/sweeps/<name>/sweep.json (what the client knows of each trial: its
 * params, its run, its state, its objective and its cost), Optuna's storage beside it
 * (study.db), and a lock (.lock) so that two clients never run one sweep. sweep.json is written
 * atomically at each change; a stop request (stop.json) asks whichever client runs the sweep to
 * stop it, and stays until a client has (a client that starts the sweep honours one it finds);
 * each trial's run is an ordinary run in runs/ whose run.json names
 * the sweep and the trial's number.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import type { Clock } from '../clock';
import type { SweepConfig } from '../config/sweep';
import { HintedError } from '../errors';
import { writeFileAtomicSync } from '../runs/atomic';
import {
  acquireLock,
  DEFAULT_LOCK_TIMING,
  inspectLock,
  type LockHolder,
  type RunLock,
} from '../runs/lock';

export const SWEEPS_DIR = 'sweeps';
export const SWEEP_FILE = 'sweep.json';
export const STUDY_FILE = 'study.db';
/** A stop request (`sweep stop`): the client running the sweep stops it when it sees one. */
export const STOP_FILE = 'stop.json';
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
    `Watch it there (\`overbrainer sweep stop ${name}\` stops it from here), or close that client and run \`overbrainer sweep attach ${name}\` here: it resumes from its records.`,
  );
}

/** Who runs the sweep now (its lock's holder, live), or null when no live client does. */
export function sweepHolder(runsDir: string, name: string, clock: Clock): LockHolder | null {
  const holder = inspectLock(path.join(sweepDir(runsDir, name), LOCK), clock, DEFAULT_LOCK_TIMING);
  return holder !== null && holder.stale === null ? holder : null;
}

/** A stop request: when it was made and by whom. */
export interface StopRequest {
  requested_at: string;
  by: string;
}

/** Asks whichever client runs the sweep to stop it (kept until one has). */
export function requestSweepStop(runsDir: string, name: string, by: string, nowMs: number): void {
  const dir = sweepDir(runsDir, name);
  fs.mkdirSync(dir, { recursive: true });
  const request: StopRequest = { requested_at: new Date(nowMs).toISOString(), by };
  writeFileAtomicSync(dir, STOP_FILE, `${JSON.stringify(request)}\n`);
}

/** The sweep's pending stop request, or null. A damaged one still asks to stop. */
export function sweepStopRequest(runsDir: string, name: string): StopRequest | null {
  let text: string;
  try {
    text = fs.readFileSync(path.join(sweepDir(runsDir, name), STOP_FILE), 'utf8');
  } catch {
    return null;
  }
  try {
    const parsed = JSON.parse(text) as Partial<StopRequest>;
    return {
      requested_at: typeof parsed.requested_at === 'string' ? parsed.requested_at : '?',
      by: typeof parsed.by === 'string' ? parsed.by : '?',
    };
  } catch {
    return { requested_at: '?', by: '?' };
  }
}

/** The stop request carried out (the sweep ended stopped): removed. */
export function clearSweepStop(runsDir: string, name: string): void {
  fs.rmSync(path.join(sweepDir(runsDir, name), STOP_FILE), { force: true });
}

/** The sweep's trial `number`; throws when the record has none (a bug, not an input). */
export function trialOf(record: SweepRecord, number: number): TrialRecord {
  const trial = record.trials.find((t) => t.number === number);
  if (trial === undefined) throw new RangeError(`sweep ${record.name} has no trial ${number}`);
  return trial;
}

/**
 * The sweep's record to run: a new one, or the stored one with the config's limits (its metric and
 * direction checked to match), saved as running.
 */
export function openSweepRecord(runsDir: string, config: SweepConfig, nowMs: number): SweepRecord {
  const stored = loadSweep(runsDir, config.name);
  if (
    stored !== null &&
    (stored.metric !== config.metric || stored.direction !== config.direction)
  ) {
    throw new SweepError(
      'mismatch',
      `sweep ${config.name} was started to ${stored.direction} "${stored.metric}", and [sweep] now says ${config.direction} "${config.metric}"`,
      `Give the sweep a new name, or set metric = "${stored.metric}" and direction = "${stored.direction}" back.`,
    );
  }
  const record: SweepRecord = {
    ...(stored ?? {
      version: 1 as const,
      name: config.name,
      metric: config.metric,
      direction: config.direction,
      created: new Date(nowMs).toISOString(),
      trials: [],
    }),
    trials_max: config.trials,
    parallel: config.parallel,
    budget_usd: config.budgetUsd,
    state: 'running',
    end: null,
    message: null,
  };
  saveSweep(runsDir, record);
  return record;
}
