/**
 * The sweep's scheduler: asks the study for params, starts trials as ordinary runs (through the
 * flow's train, handed in as a {@link TrialRunner}), at most `parallel` at once, reports each
 * trial's metric values to the study as they arrive (stopping a trial Optuna's pruner cuts) and
 * tells the study how each ended.
 *
 * The budget is a hard limit: a trial starts only when what the sweep spent + the worst case of
 * every running trial + its own worst case fit in `budget_usd` (./budget.ts); when none can fit
 * any more, the sweep ends saying so. Every step is written to sweep.json before the next one
 * (./records.ts), so a client that dies is resumed from its records: a trial whose run exists is
 * followed again (never started twice), one asked of the study but never made into a run is
 * recorded failed (never lost).
 */
import * as path from 'node:path';
import type { Clock } from '../clock';
import type { SweepConfig } from '../config/sweep';
import { describeError } from '../errors';
import type { EventBus, RunState } from '../events';
import type { RunStore } from '../runs/store';
import { METRICS_FILE } from '../train/jobScripts';
import { readMetricsFile } from '../train/metricsFile';
import { admit, settle, type BudgetPool } from './budget';
import { noObjectiveMessage, Objective } from './objective';
import {
  loadSweep,
  lockSweep,
  saveSweep,
  STUDY_FILE,
  sweepDir,
  SweepError,
  type SweepEnd,
  type SweepRecord,
  type TrialRecord,
} from './records';
import { StudyClient, type StudyStartOptions } from './study';
import type { ParamValue, TrialEnd } from './studyMessages';

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
  /** Stops a running trial's job (a prune): its follower brings its results home, ends its pod. */
  prune(runId: string): Promise<void>;
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
  /** Aborting stops following: running trials go on under their pods' watchdogs; resume later. */
  signal?: AbortSignal;
}

export interface SweepResult {
  record: SweepRecord;
  best: TrialRecord | null;
}

const money = (usd: number): string => `$${usd.toFixed(2)}`;

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

/** Runs (or resumes) the sweep `config` to its end: trials done, budget spent, or stopped. */
export async function runSweep(
  deps: SweepDeps,
  config: SweepConfig,
  runner: TrialRunner,
  options: SweepOptions,
): Promise<SweepResult> {
  const runsDir = deps.store.runsDir;
  const lock = lockSweep(runsDir, config.name, deps.owner, deps.clock);
  let study: StudyClient | null = null;
  try {
    const record = openRecord(runsDir, config, deps.clock.nowMs());
    study = await StudyClient.start(options.study);
    await study.open({
      storagePath: path.join(sweepDir(runsDir, config.name), STUDY_FILE),
      study: config.name,
      direction: config.direction,
      sampler: config.sampler,
      pruner: config.pruner,
      samplerSeed: config.samplerSeed,
      params: config.params,
    });
    return await new Scheduler(deps, config, runner, options, study, record).run();
  } finally {
    await study?.close();
    lock.dispose();
  }
}

/** The sweep's record: a new one, or the stored one with the config's limits (checked to match). */
function openRecord(runsDir: string, config: SweepConfig, nowMs: number): SweepRecord {
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

class Scheduler {
  private pool: BudgetPool;
  /** Why no trial can start (one failed before its run existed: the next would too), or null. */
  private unstartable: string | null = null;
  private readonly live = new Map<number, Promise<void>>();

  constructor(
    private readonly deps: SweepDeps,
    private readonly config: SweepConfig,
    private readonly runner: TrialRunner,
    private readonly options: SweepOptions,
    private readonly study: StudyClient,
    private readonly record: SweepRecord,
  ) {
    const spent = record.trials.reduce((sum, t) => sum + (t.cost_usd ?? 0), 0);
    this.pool = { budgetUsd: config.budgetUsd, spentUsd: spent, live: {} };
  }

  async run(): Promise<SweepResult> {
    await this.reconcile();
    const signal = this.options.signal;
    let exhausted: string | null = null;
    for (;;) {
      if (signal?.aborted) break;
      const used = this.used();
      const canStart = exhausted === null && this.unstartable === null;
      if (canStart && used < this.config.trials && this.live.size < this.config.parallel) {
        const admission = admit(this.pool, -1, this.options.trialWorstUsd);
        if (admission.admitted) {
          await this.startTrial();
          continue;
        }
        if (admission.reason === 'exhausted') {
          exhausted = `the budget's ${money(Math.max(0, admission.leftUsd))} left cannot hold another trial's worst case (${money(admission.capUsd)}): the sweep starts no more trials after ${used}`;
          this.say(exhausted);
        }
      }
      if (this.live.size === 0) {
        if (this.unstartable !== null) return this.end('stopped', this.unstartable);
        if (exhausted !== null) return this.end('budget', exhausted);
        if (used >= this.config.trials)
          return this.end('trials', `all ${this.config.trials} trials ran`);
        // Nothing live, trials to go, yet not admitted: the pool says exhausted on the next turn.
        continue;
      }
      await Promise.race(this.live.values());
    }
    // Stopped following: each trial's follower lets go of its run (its pod's watchdog goes on).
    await Promise.allSettled(this.live.values());
    this.save();
    return { record: this.record, best: bestTrial(this.record) };
  }

  /** Trials that count against `trials`: every one that was made into a run, or is live. */
  private used(): number {
    return this.record.trials.filter((t) => t.run_id !== null || t.state === 'starting').length;
  }

  /**
   * After a restart: a study trial the records do not know (asked, then the client died) is
   * failed; a `starting` trial is adopted by the run that names it, or failed when none does;
   * every running trial is admitted at its worst case and followed again.
   */
  private async reconcile(): Promise<void> {
    const known = new Set(this.record.trials.map((t) => t.number));
    const { trials } = await this.study.trials();
    for (const t of trials) {
      if (t.state !== 'RUNNING' || known.has(t.number)) continue;
      await this.study.tell(t.number, 'fail');
      this.record.trials.push({
        number: t.number,
        params: t.params,
        run_id: null,
        state: 'fail',
        objective: null,
        cap_usd: this.options.trialWorstUsd,
        cost_usd: 0,
        message: 'the client stopped before this trial was recorded: it never ran',
      });
    }
    for (const trial of this.record.trials) {
      if (trial.state === 'starting') {
        const runId = this.runner.findRun(this.config.name, trial.number);
        if (runId === null) {
          await this.study.tell(trial.number, 'fail');
          Object.assign(trial, {
            state: 'fail',
            cost_usd: 0,
            message: 'the client stopped before its run was made: it never ran',
          });
          continue;
        }
        Object.assign(trial, { run_id: runId, state: 'running' });
      }
      if (trial.state === 'running' && trial.run_id !== null) {
        this.pool = { ...this.pool, live: { ...this.pool.live, [trial.number]: trial.cap_usd } };
        this.say(`trial ${trial.number} (run ${trial.run_id}) is followed again`);
        this.follow(trial, (signal) => this.runner.resume(trial.run_id!, signal));
      }
    }
    this.save();
  }

  private async startTrial(): Promise<void> {
    const worst = this.options.trialWorstUsd;
    const asked = await this.study.ask({ sweep: this.config.name });
    const admission = admit(this.pool, asked.number, worst);
    if (!admission.admitted) throw new RangeError('a trial admitted was refused');
    this.pool = admission.pool;
    const trial: TrialRecord = {
      number: asked.number,
      params: asked.params,
      run_id: null,
      state: 'starting',
      objective: null,
      cap_usd: worst,
      cost_usd: null,
      message: null,
    };
    this.record.trials.push(trial);
    this.save();
    this.say(`trial ${trial.number} starts: ${JSON.stringify(trial.params)}`);
    const onRun = (runId: string): void => {
      Object.assign(trial, { run_id: runId, state: 'running' });
      this.save();
      this.study.setAttrs(trial.number, { run_id: runId }).catch((error: unknown) => {
        this.say(
          `trial ${trial.number}: the study did not take its run's ID: ${describeError(error)}`,
        );
      });
    };
    this.follow(trial, (signal) =>
      this.runner.run({ number: trial.number, params: trial.params }, onRun, signal),
    );
  }

  /** Follows `trial` to its end in the background: its values reported, its end told. */
  private follow(trial: TrialRecord, start: (signal?: AbortSignal) => Promise<TrialOutcome>): void {
    const objective = new Objective(this.config.metric);
    let pruned = false;
    let reports: Promise<void> = Promise.resolve();
    const subscription = this.deps.bus.on((event) => {
      if (event.type !== 'metric' || trial.run_id === null || event.runId !== trial.run_id) return;
      const got = objective.take(event.metric);
      if (got === null) return;
      reports = reports.then(async () => {
        try {
          const { shouldPrune } = await this.study.report(trial.number, got.step, got.value);
          if (!shouldPrune || pruned || trial.run_id === null) return;
          pruned = true;
          this.say(
            `trial ${trial.number}: the pruner stops it at step ${got.step} (${this.config.metric} ${got.value})`,
          );
          await this.runner.prune(trial.run_id);
        } catch (error) {
          this.say(`trial ${trial.number}: ${describeError(error)}`);
        }
      });
    });
    const done = (async () => {
      let outcome: TrialOutcome;
      try {
        outcome = await start(this.options.signal);
      } catch (error) {
        outcome = { state: 'error', message: describeError(error) };
      }
      subscription.dispose();
      await reports;
      // Stopped following (the client stops): the trial goes on under its pod's watchdog.
      if (this.options.signal?.aborted) return;
      await this.finish(trial, outcome, objective, pruned);
    })();
    const tracked = done.finally(() => this.live.delete(trial.number));
    this.live.set(trial.number, tracked);
  }

  private async finish(
    trial: TrialRecord,
    outcome: TrialOutcome,
    live: Objective,
    pruned: boolean,
  ): Promise<void> {
    const value = (await this.finalValue(trial.run_id)) ?? live.final();
    let end: TrialEnd;
    let message = outcome.message;
    // A prune that came after the job's end stopped nothing: the trial ran to its end.
    if (pruned && outcome.state !== 'succeeded') end = 'pruned';
    else if (outcome.state === 'succeeded' && value !== null) end = 'complete';
    else {
      end = 'fail';
      if (outcome.state === 'succeeded') message = noObjectiveMessage(this.config.metric);
    }
    try {
      await this.study.tell(trial.number, end, end === 'complete' ? value : null);
    } catch (error) {
      this.say(`trial ${trial.number}: the study was not told its end: ${describeError(error)}`);
    }
    if (trial.run_id === null && outcome.state === 'error') {
      this.unstartable = `trial ${trial.number} could not start its run (${message ?? 'no reason given'}): the sweep starts no more trials`;
    }
    const cost = trial.run_id === null ? 0 : this.runner.costUsd(trial.run_id);
    // An unknown cost counts as the trial's whole worst case: the pool never says less was spent.
    const spent = cost ?? trial.cap_usd;
    Object.assign(trial, { state: end, objective: value, cost_usd: spent, message });
    this.pool = settle(this.pool, trial.number, spent);
    this.save();
    this.say(
      `trial ${trial.number} ${end}${value === null ? '' : ` (${this.config.metric} ${value})`}, cost ${money(spent)}${end === 'fail' && message ? `: ${message}` : ''}`,
    );
  }

  /** The last value of the metric in the run's metrics.jsonl as it came home; null without. */
  private async finalValue(runId: string | null): Promise<number | null> {
    if (runId === null) return null;
    try {
      const read = await readMetricsFile(path.join(this.deps.store.runDir(runId), METRICS_FILE));
      if (read === null) return null;
      const objective = new Objective(this.config.metric);
      for (const metric of read.metrics) objective.take(metric);
      return objective.final();
    } catch {
      return null;
    }
  }

  private end(end: SweepEnd, message: string): SweepResult {
    Object.assign(this.record, { state: 'ended', end, message });
    this.save();
    const best = bestTrial(this.record);
    this.say(
      `sweep ${this.config.name} ended: ${message}; spent ${money(this.pool.spentUsd)} of ${money(this.config.budgetUsd)}${best ? `; best trial ${best.number} (${this.config.metric} ${best.objective}) ${JSON.stringify(best.params)}` : ''}`,
    );
    return { record: this.record, best };
  }

  private save(): void {
    saveSweep(this.deps.store.runsDir, this.record);
  }

  private say(message: string): void {
    this.deps.bus.publish({
      type: 'log',
      level: 'info',
      message: `sweep ${this.config.name}: ${message}`,
    });
  }
}
