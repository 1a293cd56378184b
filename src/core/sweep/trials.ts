/**
 * What the sweep's scheduler (./scheduler.ts) asks of the flow for each trial, and what it hands
 * back: the {@link TrialRunner} seam (train, attach and cancel live above this layer), the
 * options of a sweep's run, and its result with the best trial.
 */
import type { Clock } from '../clock';
import type { EventBus, RunState } from '../events';
import type { RunStore } from '../runs/store';
import type { SweepRecord, TrialRecord } from './records';
import type { StudyStartOptions } from './study';
import type { ParamValue } from './studyMessages';

/** How a trial's run ended: its run's state, or `error` when its start or its following threw. */
export interface TrialOutcome {
  state: RunState | 'error';
  message: string | null;
}

/** What the scheduler asks of the flow for each trial's run. */
export interface TrialRunner {
  /**
   * Starts trial `number`'s run with `params` and follows it to its end. `onRun` is called once
   * the run exists, before its pod is created (the trial ↔ run link is recorded then).
   */
  run(
    trial: { number: number; params: Record<string, ParamValue> },
    onRun: (runId: string) => void,
    signal?: AbortSignal,
  ): Promise<TrialOutcome>;
  /** Follows a trial's existing run to its end (after a restart of the client). */
  resume(runId: string, signal?: AbortSignal): Promise<TrialOutcome>;
  /**
   * Stops a running trial's job (a prune, or the sweep's stop): its follower brings its results
   * home and ends its pod. False when its job has not started yet (ask again later).
   */
  prune(runId: string): Promise<boolean>;
  /** The run whose run.json names trial `number` of sweep `name`, or null. */
  findRun(name: string, number: number): string | null;
  /** What the run cost (its pods' bills, else estimates): 0 without a pod, null when unknown. */
  costUsd(runId: string): number | null;
}

export interface SweepDeps {
  store: RunStore;
  bus: EventBus;
  clock: Clock;
  owner: string;
}

export interface SweepOptions {
  /** The worst case of one trial (its pod's cap and what its watchdog lets past it), USD. */
  trialWorstUsd: number;
  study: StudyStartOptions;
  /** How often a stop request (`sweep stop`) is looked for, and a not-started job asked again. */
  pollMs: number;
  /** Aborting stops following: running trials go on under their pods' watchdogs; resume later. */
  signal?: AbortSignal;
}

export interface SweepResult {
  record: SweepRecord;
  best: TrialRecord | null;
}

/** The best complete trial of a record, by its direction. */
export function bestTrial(record: SweepRecord): TrialRecord | null {
  let best: TrialRecord | null = null;
  for (const t of record.trials) {
    if (t.state !== 'complete' || t.objective === null) continue;
    const better =
      best === null ||
      (record.direction === 'minimize'
        ? t.objective < best.objective!
        : t.objective > best.objective!);
    if (better) best = t;
  }
  return best;
}
