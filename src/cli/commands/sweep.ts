/**
 * `sweep …`: run (or resume) the sweep of `[sweep]` (`sweep start`; `--dry-run`: only its quote),
 * attach to one whose client stopped, stop one (wherever it runs), list the sweeps, show one with
 * its trials, the best, and its money.
 *
 * Exit codes: `sweep` 0 when the sweep ended (all its trials ran, or its budget could hold no
 * more) with a best trial; 1 when it failed, ended with no complete trial, or stopped following
 * (Ctrl-C: running trials go on under their pods' watchdogs; `overbrainer sweep` resumes); 2 for a
 * usage or configuration error. `sweep attach` as `sweep`. `sweep stop` 0 once the sweep ended
 * (stopped, or before), 1 otherwise (Ctrl-C: the stop request stays; the client that runs or
 * attaches the sweep next carries it out). `sweep ls` and `sweep show` 0, or 1 for an unknown
 * sweep.
 */
import {
  beforeTrain,
  bestTrial,
  sweep,
  sweepList,
  sweepMoney,
  sweepQuote,
  sweepQuoteLines,
  sweepShow,
  sweepAttach,
  sweepStop,
  type SweepRecord,
  type SweepResult,
  type TrialRecord,
} from '../../core/flow';
import { EXIT_FAILED, EXIT_OK, Interrupts, printJson, type Session } from '../session';

const money = (usd: number | null): string => (usd === null ? '-' : `$${usd.toFixed(4)}`);

/** `sweep --dry-run`: the quote against the budget; nothing is created. */
export async function sweepDryRun(s: Session): Promise<number> {
  const config = s.config(true)!;
  const client = s.api(true)!;
  const q = await sweepQuote(s.deps(client), config);
  s.io.stdout('dry run: nothing is created');
  for (const line of sweepQuoteLines(q)) s.io.stdout(line);
  return EXIT_OK;
}

/** `sweep` / `sweep start`: starts the sweep of [sweep], or resumes it from its records. */
export function sweepCommand(s: Session): Promise<number> {
  return following(s, (deps, config, options) => sweep(deps, config, s.dir, options));
}

/** `sweep attach NAME`: follows a sweep whose client stopped, from its records. */
export function sweepAttachCommand(s: Session, name: string): Promise<number> {
  return following(s, (deps, config, options) => sweepAttach(deps, config, s.dir, name, options));
}

type Deps = ReturnType<Session['deps']>;
type Config = NonNullable<ReturnType<Session['config']>>;
type RunOptions = Parameters<typeof sweep>[3];

/** Runs `go` with Ctrl-C, the sweep's lines on stderr, and its record printed at the end. */
async function following(
  s: Session,
  go: (deps: Deps, config: Config, options: RunOptions) => Promise<SweepResult>,
): Promise<number> {
  const config = s.config(true)!;
  const client = s.api(true)!;
  await beforeTrain(s.deps(client), config);
  s.interrupts = new Interrupts(
    s.io,
    s.renderer,
    () =>
      'stopping to follow the sweep: its running trials go on under their pods’ watchdogs; `overbrainer sweep attach NAME` follows it again',
  );
  sweepLines(s);
  const result = await go(s.deps(client), config, pythonOptions(s.interrupts.signal));
  for (const line of showLines(result.record)) s.io.stdout(line);
  if (result.record.state !== 'ended') return EXIT_FAILED;
  return result.best === null ? EXIT_FAILED : EXIT_OK;
}

const pythonOptions = (signal: AbortSignal): RunOptions => ({
  python: process.env.OVERBRAINER_SWEEP_PYTHON ?? null,
  choosePython: 'or name a Python that has it in OVERBRAINER_SWEEP_PYTHON',
  signal,
});

/** The sweep's own lines (`sweep NAME: …`) on stderr as they come. */
function sweepLines(s: Session): void {
  s.bus.on((event) => {
    if (event.type === 'log' && event.level === 'info' && event.message.startsWith('sweep '))
      s.io.stderr(event.message);
  });
}

/** `sweep stop NAME`: no new trial; running ones stopped, results home, pods deleted. */
export async function sweepStopCommand(s: Session, name: string): Promise<number> {
  const config = s.config(true)!;
  const client = s.api(true)!;
  s.interrupts = new Interrupts(
    s.io,
    s.renderer,
    () =>
      `stopping to wait: the stop request stays, and the client that runs the sweep (or \`overbrainer sweep attach ${name}\`) carries it out`,
  );
  sweepLines(s);
  const result = await sweepStop(s.deps(client), config, s.dir, name, {
    ...pythonOptions(s.interrupts.signal),
    onWait: (holder) =>
      s.io.stderr(
        `sweep ${name} is run by another client (${holder}): it was asked to stop; waiting for it`,
      ),
  });
  if (result.by === 'ended') s.io.stderr(`sweep ${name} had already ended: nothing to stop`);
  for (const line of showLines(result.record)) s.io.stdout(line);
  return result.record.state === 'ended' ? EXIT_OK : EXIT_FAILED;
}

export function sweepLs(s: Session, json: boolean): number {
  const { sweeps, warnings } = sweepList(s);
  for (const w of warnings) s.io.stderr(`warning: ${w}`);
  if (json) return printJson(s, { sweeps: sweeps.map(summary) });
  if (sweeps.length === 0) {
    s.io.stdout('no sweeps (`overbrainer sweep` starts the one of [sweep])');
    return EXIT_OK;
  }
  s.io.stdout('NAME  STATE  TRIALS  BEST  SPENT  BUDGET');
  for (const r of sweeps) {
    const best = bestTrial(r);
    const { spentUsd } = sweepMoney(r);
    s.io.stdout(
      `${r.name}  ${r.state === 'ended' ? `ended (${r.end ?? '?'})` : 'running'}  ${r.trials.length}/${r.trials_max}  ${best?.objective ?? '-'}  ${money(spentUsd)}  $${r.budget_usd}`,
    );
  }
  return EXIT_OK;
}

export function sweepShowCommand(s: Session, name: string, json: boolean): number {
  const record = sweepShow(s, name);
  if (json) return printJson(s, { ...summary(record), trials: record.trials });
  for (const line of showLines(record)) s.io.stdout(line);
  return EXIT_OK;
}

function summary(r: SweepRecord): Record<string, unknown> {
  const { spentUsd, committedUsd } = sweepMoney(r);
  const best = bestTrial(r);
  return {
    name: r.name,
    state: r.state,
    end: r.end,
    message: r.message,
    metric: r.metric,
    direction: r.direction,
    trials: r.trials.length,
    trials_max: r.trials_max,
    budget_usd: r.budget_usd,
    spent_usd: round4(spentUsd),
    committed_usd: round4(committedUsd),
    best:
      best === null
        ? null
        : { number: best.number, value: best.objective, params: best.params, run_id: best.run_id },
  };
}

const round4 = (usd: number): number => Math.round(usd * 10_000) / 10_000;

function trialLine(t: TrialRecord): string {
  return `  ${t.number}  ${t.state.toUpperCase()}  ${t.objective ?? '-'}  ${money(t.cost_usd)}  ${t.run_id ?? '-'}  ${JSON.stringify(t.params)}${t.message && t.state === 'fail' ? `  (${t.message})` : ''}`;
}

function showLines(r: SweepRecord): string[] {
  const { spentUsd, committedUsd } = sweepMoney(r);
  const best = bestTrial(r);
  return [
    `sweep ${r.name}: ${r.state === 'ended' ? `ended (${r.end ?? '?'}): ${r.message ?? ''}` : `running (or stopped following: \`overbrainer sweep attach ${r.name}\` follows it again)`}`,
    `${r.direction} ${r.metric}; ${r.trials.length} of at most ${r.trials_max} trials, ${r.parallel} at once`,
    `budget $${r.budget_usd}: spent ${money(spentUsd)}, committed ${money(committedUsd)} (running trials' worst cases), left ${money(Math.max(0, r.budget_usd - spentUsd - committedUsd))}`,
    best === null
      ? 'best: none yet'
      : `best: trial ${best.number}, ${r.metric} ${best.objective}, ${JSON.stringify(best.params)} (run ${best.run_id ?? '-'})`,
    'trials (NUMBER  STATE  VALUE  COST  RUN  PARAMS):',
    ...r.trials.map(trialLine),
  ];
}
