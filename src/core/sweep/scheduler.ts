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
 *
 * A stop request (`sweep stop`, runs/sweeps/<name>/stop.json, from this client or another) is
 * looked for every `pollMs`: then no trial starts, each running trial's job is stopped (its
 * follower brings its results home and deletes its pod; a job not started yet is asked again at
 * the next look), each such trial ends FAIL as Optuna records an interrupted trial, and the sweep
 * ends `stopped`.
 */
import * as path from 'node:path';
import type { SweepConfig } from '../config/sweep';
import { describeError } from '../errors';
import { METRICS_FILE } from '../train/jobScripts';
import { readMetricsFile } from '../train/metricsFile';
import { admit, settle, type BudgetPool } from './budget';
import { noObjectiveMessage, Objective } from './objective';
import {
  clearSweepStop,
  lockSweep,
  openSweepRecord,
  saveSweep,
  STUDY_FILE,
  sweepDir,
  sweepStopRequest,
  type StopRequest,
  type SweepEnd,
  type SweepRecord,
  type TrialRecord,
} from './records';
import { StudyClient } from './study';
import type { TrialEnd } from './studyMessages';
import {
  bestTrial,
  type SweepDeps,
  type SweepOptions,
  type SweepResult,
  type TrialOutcome,
  type TrialRunner,
} from './trials';

// The scheduler's contract lives in ./trials; its users take it from here.
export * from './trials';

const money = (usd: number): string => `$${usd.toFixed(2)}`;

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
    const record = openSweepRecord(runsDir, config, deps.clock.nowMs());
    study = await StudyClient.start(options.study);
    await study.open({
      storagePath: path.join(sweepDir(runsDir, config.name), STUDY_FILE),
      study: config.name,
      direction: config.direction,
      sampler: config.sampler,
      pruner: config.pruner,
      samplerSeed: config.samplerSeed,
      minResource: config.minResource,
      maxResource: config.maxResource,
      params: config.params,
    });
    return await new Scheduler(deps, config, runner, options, study, record).run();
  } finally {
    await study?.close();
    lock.dispose();
  }
}

class Scheduler {
  private pool: BudgetPool;
  /** Why no trial can start (one failed before its run existed: the next would too), or null. */
  private unstartable: string | null = null;
  private readonly live = new Map<number, Promise<void>>();
  /** The stop request being carried out, or null. */
  private stopRequest: StopRequest | null = null;
  /** Trials whose job was asked to stop for it (or is being asked). */
  private readonly stopped = new Set<number>();
  private waker: (() => void) | null = null;

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
    const watch = new AbortController();
    void this.watchStop(watch.signal);
    try {
      return await this.loop();
    } finally {
      watch.abort();
    }
  }

  private async loop(): Promise<SweepResult> {
    const signal = this.options.signal;
    let exhausted: string | null = null;
    for (;;) {
      if (signal?.aborted) break;
      const used = this.used();
      const stopping = this.stopRequest !== null;
      const canStart = !stopping && exhausted === null && this.unstartable === null;
      if (canStart && used < this.config.trials && this.live.size < this.config.parallel) {
        const admission = admit(this.pool, -1, this.options.trialWorstUsd);
        if (admission.admitted) {
          await this.startTrial();
          continue;
        }
        if (admission.reason === 'exhausted') {
          exhausted = `the budget's ${money(Math.max(0, admission.leftUsd))} left cannot hold another trial's worst case (${money(admission.capUsd)}): the sweep starts no more trials after ${used}`;
          // A warning (VS Code notifies it) as it happens: the running trials still end first.
          this.deps.bus.publish({
            type: 'warning',
            runId: null,
            code: 'sweep_budget',
            message: `sweep ${this.config.name}: ${exhausted}`,
          });
        }
      }
      if (this.live.size === 0) {
        if (stopping) return this.endStopped();
        if (this.unstartable !== null) return this.end('stopped', this.unstartable);
        if (exhausted !== null) return this.end('budget', exhausted);
        if (used >= this.config.trials)
          return this.end('trials', `all ${this.config.trials} trials ran`);
        // Nothing live, trials to go, yet not admitted: the pool says exhausted on the next turn.
        continue;
      }
      await Promise.race([...this.live.values(), new Promise<void>((go) => (this.waker = go))]);
      this.waker = null;
    }
    // Stopped following: each trial's follower lets go of its run (its pod's watchdog goes on).
    await Promise.allSettled(this.live.values());
    this.save();
    return { record: this.record, best: bestTrial(this.record) };
  }

  /** Looks for a stop request now and every `pollMs` until `signal` (the sweep's end). */
  private async watchStop(signal: AbortSignal): Promise<void> {
    try {
      for (;;) {
        this.checkStop();
        await this.deps.clock.sleep(this.options.pollMs, signal);
      }
    } catch {
      // Aborted: the sweep ended, or stopped following.
    }
  }

  /** A new stop request is taken up (the loop woken); every live trial's job asked to stop. */
  private checkStop(): void {
    if (this.stopRequest === null) {
      const request = sweepStopRequest(this.deps.store.runsDir, this.config.name);
      if (request === null) return;
      this.stopRequest = request;
      this.say(
        `stop requested (by ${request.by} at ${request.requested_at}): no trial starts any more; the running ones are stopped, their results brought home, their pods deleted`,
      );
      this.waker?.();
    }
    for (const trial of this.record.trials) {
      const runId = trial.run_id;
      if (runId === null || !this.live.has(trial.number) || this.stopped.has(trial.number))
        continue;
      this.stopped.add(trial.number);
      this.runner.prune(runId).then(
        (asked) => {
          // Its job has not started yet: asked again at the next look.
          if (!asked) this.stopped.delete(trial.number);
        },
        (error: unknown) => {
          this.say(`trial ${trial.number}: its job was not stopped: ${describeError(error)}`);
          this.stopped.delete(trial.number);
        },
      );
    }
  }

  private endStopped(): SweepResult {
    const request = this.stopRequest!;
    const n = this.stopped.size;
    clearSweepStop(this.deps.store.runsDir, this.config.name);
    return this.end(
      'stopped',
      `stopped on request (by ${request.by}): no trial started after it; ${n} running trial(s) stopped, their results brought home, their pods deleted`,
    );
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
    if (end === 'fail' && outcome.state === 'cancelled' && this.stopped.has(trial.number))
      message = 'stopped with the sweep (`sweep stop`)';
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
