/**
 * Sweeps for both front ends: `[sweep]` run as an Optuna study whose trials are ordinary train
 * runs (core/sweep/scheduler.ts decides; this file hands it train, attach and cancel), its quote
 * (`sweep --dry-run`), attach (a sweep whose client died, followed again from its records) and
 * stop (no new trial; the running ones stopped, their results home, their pods deleted), and its
 * records for `sweep ls` / `sweep show`.
 *
 * One client at a time runs a sweep (its lock): attach is refused, naming the holder, while
 * another live client runs it, and takes it over once that one died. Stop works either way: it
 * asks the client running the sweep (stop.json) and waits for the record to say stopped, or,
 * with none running it, carries the stop out itself.
 *
 * A trial's params reach its job as ./sweepTrial.ts says (params.json, `{name}` placeholders,
 * OVERBRAINER_PARAM_<NAME>, axolotl.yaml keys); they are checked to fit before any pod.
 */
import type { OverbrainerConfig, RunpodTargetConfig } from '../config/types';
import type { SweepConfig } from '../config/sweep';
import { quoteSweepBudget, type SweepBudgetQuote } from '../sweep/budget';
import { SweepError } from '../sweep/records';
import {
  clearSweepStop,
  listSweeps,
  loadSweep,
  requestSweepStop,
  sweepHolder,
  type SweepRecord,
} from '../sweep/records';
import { bestTrial, runSweep, type SweepResult } from '../sweep/scheduler';
import { type FlowDeps, FlowError } from './deps';
import { liveQuote } from './quote';
import { checkTrialParams, trialRunner } from './sweepTrial';

export { bestTrial, type SweepResult } from '../sweep/scheduler';
export { metricValue } from '../sweep/objective';
export { type SweepRecord, type TrialRecord, SweepError } from '../sweep/records';
export { StudyError } from '../sweep/study';

export { commandWithParams, PARAMS_FILE } from './sweepTrial';

export interface SweepRunOptions {
  /** The Python with Optuna; null: `python3`. */
  python?: string | null;
  /** How the user names another Python, for hints. */
  choosePython?: string;
  signal?: AbortSignal;
}

/** `[sweep]` and its runpod target, or a FlowError saying what is missing. */
function sweepOf(config: OverbrainerConfig): { sweep: SweepConfig; target: RunpodTargetConfig } {
  const sweep = config.sweep ?? null;
  if (sweep === null) {
    throw new FlowError(
      'bad_config',
      'overbrainer.toml has no [sweep] section',
      'Add [sweep] with name, metric, direction, trials, budget_usd and [sweep.params] (examples/sweep has one).',
    );
  }
  const target = config.targets[sweep.target];
  if (target?.kind !== 'runpod') {
    throw new FlowError(
      'bad_config',
      `the sweep's target "${sweep.target}" is not a runpod target`,
    );
  }
  if (target.maxCostUsd === null) {
    throw new FlowError(
      'bad_config',
      `the sweep's target "${target.name}" has no max_cost_usd: a trial's worst case would be bounded by max_hours alone, and the sweep's budget could not hold it`,
      `Set max_cost_usd under [targets.${target.name}]: each trial's pod is armed with it.`,
    );
  }
  return { sweep, target };
}

/** The sweep's quote: a trial's worst case at the catalog's dearest rate, against the budget. */
export interface SweepQuote extends SweepBudgetQuote {
  name: string;
  budgetUsd: number;
  trials: number;
  parallel: number;
  /** A trial's worst case: its pod's cap and what its watchdog lets past it, USD. */
  trialWorstUsd: number;
  /** What a trial is expected to cost at least (earlier runs of the target), or its worst case. */
  trialLeastUsd: number;
}

export async function sweepQuote(
  deps: FlowDeps,
  config: OverbrainerConfig,
  signal?: AbortSignal,
): Promise<SweepQuote> {
  const { sweep, target } = sweepOf(config);
  if (deps.client === null) throw new FlowError('no_api_key', 'no Runpod API key is set');
  const q = await liveQuote(deps.client, deps.store, deps.timing, target, { signal });
  if (q.worstUsd === null) {
    throw new FlowError(
      'bad_config',
      `the Runpod catalog gives no price for ${q.rates.map((r) => r.gpuType).join(', ')}: a trial's worst case is unknown`,
      `Pick GPU types the catalog prices in [targets.${target.name}] gpu_types.`,
    );
  }
  const least = q.expected?.basis === 'history' ? Math.max(q.expected.lowUsd, 0.0001) : q.worstUsd;
  const budget = quoteSweepBudget({
    budgetUsd: sweep.budgetUsd,
    capUsd: q.worstUsd,
    minTrialUsd: least,
    trials: sweep.trials,
    parallel: sweep.parallel,
  });
  return {
    ...budget,
    name: sweep.name,
    budgetUsd: sweep.budgetUsd,
    trials: sweep.trials,
    parallel: sweep.parallel,
    trialWorstUsd: q.worstUsd,
    trialLeastUsd: least,
  };
}

const money = (usd: number): string => `$${usd.toFixed(2)}`;

/** The quote in lines, for `sweep --dry-run` and VS Code's confirmation. */
export function sweepQuoteLines(q: SweepQuote): string[] {
  return [
    `sweep ${q.name}: ${q.trials} trials, ${q.parallel} at once, budget ${money(q.budgetUsd)} (a hard limit, all pods together)`,
    `a trial's worst case: ${money(q.trialWorstUsd)} (its pod's max_cost_usd and what its watchdog lets past it at the dearest GPU type)`,
    `${q.trials} trials at their worst case: ${money(q.allTrialsAtCapUsd)}${q.coversAllTrials ? ' (the budget covers them all)' : ''}`,
    `the budget starts ${q.trialsAtWorst} trial(s) if each spends its worst case, up to ${q.trialsAtBest} if each costs ${money(q.trialLeastUsd)}; ${q.podsAtOnce} pod(s) at once at the start`,
  ];
}

/** Runs (or resumes, from its records) the sweep of `config` to its end. */
export async function sweep(
  deps: FlowDeps,
  config: OverbrainerConfig,
  workspaceDir: string,
  options: SweepRunOptions = {},
): Promise<SweepResult> {
  const { sweep: sc } = sweepOf(config);
  const quote = await sweepQuote(deps, config, options.signal);
  const python = options.python ?? null;
  await checkTrialParams(deps, config, workspaceDir, sc, python);
  const runner = trialRunner(deps, config, workspaceDir, sc, python);
  return runSweep(
    { store: deps.store, bus: deps.bus, clock: deps.clock, owner: deps.owner },
    sc,
    runner,
    {
      trialWorstUsd: quote.trialWorstUsd,
      study: { python, choosePython: options.choosePython },
      pollMs: deps.timing.statusPollMs,
      signal: options.signal,
    },
  );
}

/** The sweeps of the workspace's runs/ (for `sweep ls`), and the ones that could not be read. */
export function sweepList(deps: Pick<FlowDeps, 'store'>): {
  sweeps: SweepRecord[];
  warnings: string[];
} {
  return listSweeps(deps.store.runsDir);
}

/** One sweep's record (for `sweep show`); a FlowError when there is none. */
export function sweepShow(deps: Pick<FlowDeps, 'store'>, name: string): SweepRecord {
  const record = loadSweep(deps.store.runsDir, name);
  if (record === null)
    throw new FlowError(
      'bad_option',
      `no sweep ${name} in ${deps.store.runsDir}`,
      '`overbrainer sweep ls` lists the sweeps; `overbrainer sweep` starts the one of [sweep].',
    );
  return record;
}

/** Spent (ended trials) and committed (running trials' worst cases) of a record. */
export function sweepMoney(record: SweepRecord): { spentUsd: number; committedUsd: number } {
  let spentUsd = 0;
  let committedUsd = 0;
  for (const t of record.trials) {
    if (t.cost_usd !== null) spentUsd += t.cost_usd;
    else if (t.state === 'running' || t.state === 'starting') committedUsd += t.cap_usd;
  }
  return { spentUsd, committedUsd };
}

/** The sweep named `name` must be the config's [sweep]: its trials are runs of its [training]. */
function ownSweep(config: OverbrainerConfig, name: string): void {
  const { sweep: sc } = sweepOf(config);
  if (sc.name !== name) {
    throw new FlowError(
      'bad_option',
      `sweep ${name} is not the [sweep] of overbrainer.toml (it names ${sc.name}): its trials are runs of the [training] of the workspace that started it`,
      `Run it in the workspace whose [sweep] has name = "${name}", or set that name back.`,
    );
  }
}

/**
 * `sweep attach NAME`: a sweep whose client stopped (crashed, closed, Ctrl-C) followed again from
 * its records: every live trial's run followed (or ended) to its end, and new trials started
 * while trials and budget remain. A sweep that ended is returned as it is. Refused (`busy`,
 * naming the holder) while another live client runs it.
 */
export async function sweepAttach(
  deps: FlowDeps,
  config: OverbrainerConfig,
  workspaceDir: string,
  name: string,
  options: SweepRunOptions = {},
): Promise<SweepResult> {
  ownSweep(config, name);
  const record = sweepShow(deps, name);
  if (record.state === 'ended') return { record, best: bestTrial(record) };
  return sweep(deps, config, workspaceDir, options);
}

/** What {@link sweepStop} did: the sweep's record at its end, and who carried the stop out. */
export interface SweepStopResult extends SweepResult {
  /** `here`: this client stopped the trials; `holder`: the client running the sweep did; `ended`: it had ended. */
  by: 'here' | 'holder' | 'ended';
}

/**
 * `sweep stop NAME`: no new trial; every running trial's job stopped, its results brought home,
 * its pod deleted; the record ends `stopped`. When a live client runs the sweep (here, or in
 * another window or process), it is asked to (runs/sweeps/NAME/stop.json) and this waits until
 * the record says it ended; when none does, or that client dies meanwhile, this client carries
 * the stop out itself. `onWait` is told once who is asked.
 */
export async function sweepStop(
  deps: FlowDeps,
  config: OverbrainerConfig,
  workspaceDir: string,
  name: string,
  options: SweepRunOptions & { onWait?: (holder: string) => void } = {},
): Promise<SweepStopResult> {
  ownSweep(config, name);
  const runsDir = deps.store.runsDir;
  const first = sweepShow(deps, name);
  if (first.state === 'ended') return { record: first, best: bestTrial(first), by: 'ended' };
  requestSweepStop(runsDir, name, deps.owner, deps.clock.nowMs());
  let told = false;
  for (;;) {
    const record = sweepShow(deps, name);
    if (record.state === 'ended') {
      // Ended by the client that ran it (stopped, or its trials or budget done first).
      clearSweepStop(runsDir, name);
      return { record, best: bestTrial(record), by: 'holder' };
    }
    const holder = sweepHolder(runsDir, name, deps.clock);
    if (holder === null) {
      try {
        return { ...(await sweep(deps, config, workspaceDir, options)), by: 'here' };
      } catch (error) {
        // Taken meanwhile by another client: it sees the request; wait for it.
        if (!(error instanceof SweepError && error.kind === 'busy')) throw error;
      }
    } else if (!told) {
      told = true;
      options.onWait?.(`pid ${holder.pid ?? '?'}${holder.owner ? `, ${holder.owner}` : ''}`);
    }
    await deps.clock.sleep(deps.timing.statusPollMs, options.signal);
  }
}
