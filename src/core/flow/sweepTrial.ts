/**
 * A sweep's trials as train runs (the {@link TrialRunner} core/sweep/scheduler.ts drives): each
 * trial's config, its params reaching its job, its run started, followed again after a restart,
 * stopped, found and priced.
 *
 * A trial's params reach its job four ways: `params.json` in the run directory (the job's working
 * directory); `{name}` placeholders in a command trainer's command, replaced by the trial's values
 * (strings shell-quoted); environment variables OVERBRAINER_PARAM_<NAME> (uppercased, a dot
 * written `__`), from `params.env` in the run directory, which the job's launcher sources on every
 * pod (a recovered trial's too); and, for the axolotl trainer, keys of its axolotl.yaml (dotted
 * for a nested key): deep-merged into a generated config, or set in the user's own YAML (a copy
 * per trial under runs/sweeps/<name>/trials/). A trial followed again (attach) gets the same
 * config from its params.json, so a pod's death recovered then starts the same job.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import type { OverbrainerConfig, TrainerConfig } from '../config/types';
import type { SweepConfig, SweepParam } from '../config/sweep';
import { describeError } from '../errors';
import { shQuote } from '../exec/shell';
import { failRun, log } from '../pod/context';
import { runPodSpends, runTotals } from '../runs/spend';
import { sweepDir } from '../sweep/records';
import {
  nestedParams,
  paramEnv,
  ParamPathError,
  setParams,
  setParamsInYaml,
} from '../sweep/params';
import type { TrialOutcome, TrialRunner } from '../sweep/scheduler';
import type { ParamValue } from '../sweep/studyMessages';
import { axolotlSettings, deepMerge } from '../train/axolotlConfig';
import { PARAMS_ENV } from '../train/jobScripts';
import { attach } from './attach';
import { cancel } from './cancel';
import { type FlowDeps, FlowError, podCtx } from './deps';
import { evalDataUploaded } from './runFiles';
import { removeRunPod, train, type RunningJob } from './train';

/** The file a trial's params are written to, in its run directory. */
export const PARAMS_FILE = 'params.json';

type Params = Readonly<Record<string, ParamValue>>;

/** A command trainer's command with each `{name}` replaced by the trial's value. */
export function commandWithParams(command: string, params: Params): string {
  return command.replace(/\{([A-Za-z_][A-Za-z0-9_.]*)\}/g, (whole, name: string) => {
    if (!Object.hasOwn(params, name)) return whole;
    const value = params[name]!;
    return typeof value === 'string' ? shQuote(value) : String(value);
  });
}

/** The config trial `number` runs with: the sweep's, its trainer given the trial's params. */
export async function trialConfig(
  deps: Pick<FlowDeps, 'store'>,
  config: OverbrainerConfig,
  workspaceDir: string,
  sweep: { name: string; number: number; python: string | null },
  params: Params,
): Promise<OverbrainerConfig> {
  const training = config.training!;
  const trainer = training.trainer;
  let next: TrainerConfig = trainer;
  if (trainer.kind === 'command') {
    next = { ...trainer, command: commandWithParams(trainer.command, params) };
  } else if (trainer.model !== null) {
    checkPaths(config, workspaceDir, params);
    const extra = deepMerge(trainer.model.extra as never, nestedParams(params) as never);
    next = { ...trainer, model: { ...trainer.model, extra } };
  } else if (trainer.configPath !== null) {
    const text = fs.readFileSync(path.join(workspaceDir, trainer.configPath), 'utf8');
    const yaml = await pathsChecked(() =>
      setParamsInYaml(sweep.python, text, params, trainer.configPath!),
    );
    const dir = path.join(sweepDir(deps.store.runsDir, sweep.name), 'trials');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `${sweep.number}.axolotl.yaml`);
    fs.writeFileSync(file, yaml);
    const rel = path.relative(workspaceDir, file);
    if (rel.startsWith('..') || path.isAbsolute(rel))
      throw new FlowError(
        'bad_config',
        `the sweep's runs/ (${deps.store.runsDir}) is outside the workspace: a trial's axolotl.yaml cannot be placed`,
        'Keep runs/ inside the workspace.',
      );
    next = { ...trainer, configPath: rel.split(path.sep).join('/') };
  }
  return { ...config, training: { ...training, trainer: next } };
}

/** A generated config's settings with the params set: a key on the way that is no mapping throws. */
function checkPaths(config: OverbrainerConfig, workspaceDir: string, params: Params): void {
  const trainer = config.training!.trainer;
  if (trainer.kind !== 'axolotl' || trainer.model === null) return;
  const settings = axolotlSettings(trainer.model, {
    evalData: evalDataUploaded(config, workspaceDir),
  });
  try {
    setParams(settings, params);
  } catch (error) {
    throw configError(error);
  }
}

async function pathsChecked<T>(go: () => Promise<T>): Promise<T> {
  try {
    return await go();
  } catch (error) {
    throw configError(error);
  }
}

function configError(error: unknown): unknown {
  if (error instanceof ParamPathError && error.kind !== 'no_yaml')
    return new FlowError('bad_config', error.message, error.hint);
  return error;
}

/** A value of each parameter (its low end, or its first choice): what a check sets. */
function sampleParams(params: Readonly<Record<string, SweepParam>>): Record<string, ParamValue> {
  const out: Record<string, ParamValue> = {};
  for (const [name, p] of Object.entries(params))
    out[name] = p.kind === 'choice' ? p.choices[0]! : p.low;
  return out;
}

/**
 * Before any trial: the params can be set in the axolotl trainer's YAML (each dotted name's way
 * through mappings), else a `bad_config` FlowError naming the parameter and what to do.
 */
export async function checkTrialParams(
  deps: Pick<FlowDeps, 'store'>,
  config: OverbrainerConfig,
  workspaceDir: string,
  sc: SweepConfig,
  python: string | null,
): Promise<void> {
  if (config.training?.trainer.kind !== 'axolotl') return;
  await trialConfig(
    deps,
    config,
    workspaceDir,
    { name: sc.name, number: -1, python },
    sampleParams(sc.params),
  );
  fs.rmSync(path.join(sweepDir(deps.store.runsDir, sc.name), 'trials', '-1.axolotl.yaml'), {
    force: true,
  });
}

/** params.json and params.env into a trial's run directory. */
function writeParams(runDir: string, params: Params): void {
  fs.writeFileSync(path.join(runDir, PARAMS_FILE), `${JSON.stringify(params, null, 2)}\n`);
  const lines = Object.entries(paramEnv(params)).map(([k, v]) => `${k}=${shQuote(v)}\n`);
  fs.writeFileSync(path.join(runDir, PARAMS_ENV), lines.join(''));
}

const paramsFile = z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]));

export function trialRunner(
  deps: FlowDeps,
  config: OverbrainerConfig,
  workspaceDir: string,
  sc: SweepConfig,
  python: string | null,
): TrialRunner {
  const outcomeOf = (runId: string | null, error: unknown): TrialOutcome => {
    if (runId !== null) {
      try {
        const run = deps.store.loadRun(runId);
        if (run.state !== 'running' && run.state !== 'preparing')
          return { state: run.state, message: run.message };
      } catch {
        // Said below.
      }
    }
    return { state: 'error', message: describeError(error) };
  };
  /**
   * A trial the sweep is about to record as ended (its follow returned, not stopped by an abort
   * of this client, whose pods keep running for a later attach) leaves no pod billing: one its
   * follow left undeleted (a lost connection, a pod that never answered again) is removed now, as
   * train removes one, and a run still `running` on it fails saying so.
   */
  const ended = async (
    runId: string | null,
    outcome: TrialOutcome,
    signal?: AbortSignal,
  ): Promise<TrialOutcome> => {
    if (runId === null || signal?.aborted) return outcome;
    const pod = deps.store.loadPod(runId);
    if (pod === null || pod.state === 'deleted') return outcome;
    const ctx = podCtx(deps);
    await removeRunPod(ctx, pod, 'requested');
    const podId = pod.podId ?? '';
    const kept =
      deps.store.loadPod(runId)?.state === 'deleted'
        ? ''
        : `; its pod ${podId} could not be deleted: remove it with \`overbrainer pod rm ${runId}\``;
    const run = deps.store.loadRun(runId);
    if (run.state !== 'running' && run.state !== 'preparing') {
      return kept === '' ? outcome : { ...outcome, message: `${outcome.message ?? ''}${kept}` };
    }
    const message = `${outcome.message ?? 'its follow ended'}: the sweep ended the trial${kept === '' ? ` and deleted its pod ${podId} (what its job wrote there since the last retrieval did not come home)` : kept}`;
    failRun(ctx, run, 'pod_removed', message);
    return { state: 'failed', message };
  };
  const configOf = (number: number, params: Params): Promise<OverbrainerConfig> =>
    trialConfig(deps, config, workspaceDir, { name: sc.name, number, python }, params);
  /** The running job of each trial started here, while its follow holds its connection. */
  const following = new Map<string, RunningJob>();
  return {
    async run(trial, onRun, signal) {
      let runId: string | null = null;
      try {
        const own = await configOf(trial.number, trial.params);
        const result = await train(deps, own, workspaceDir, {
          target: sc.target,
          signal,
          onRun: (run) => {
            runId = run.id;
            run.sweep = { name: sc.name, trial: trial.number };
            deps.store.saveRun(run);
            writeParams(deps.store.runDir(run.id), trial.params);
            onRun(run.id);
          },
          onJob: (job) => {
            if (runId !== null) following.set(runId, job);
          },
        });
        return await ended(runId, { state: result.run.state, message: result.run.message }, signal);
      } catch (error) {
        return await ended(runId, outcomeOf(runId, error), signal);
      } finally {
        if (runId !== null) following.delete(runId);
      }
    },
    async resume(runId, signal) {
      const run = deps.store.loadRun(runId);
      if (
        run.state !== 'running' &&
        run.state !== 'preparing' &&
        deps.store.loadPod(runId) === null
      )
        return { state: run.state, message: run.message };
      try {
        // The trial's own config (its command, its YAML), so that a recovery starts its job.
        const text = fs.readFileSync(path.join(deps.store.runDir(runId), PARAMS_FILE), 'utf8');
        const params = paramsFile.parse(JSON.parse(text));
        const own = await configOf(run.sweep?.trial ?? -1, params);
        const result = await attach(deps, own, runId, signal);
        return await ended(runId, { state: result.run.state, message: result.run.message }, signal);
      } catch (error) {
        return await ended(runId, outcomeOf(runId, error), signal);
      }
    },
    async prune(runId) {
      // The trial's job is cancelled over the connection its follow holds: no look-up of the pod
      // and no new SSH connection while the pod bills. Its follow sees the job end and brings its
      // results home, deletes its pod, as after any cancel. A connection that no longer answers
      // (its pod moved, the follow ended) leaves it to the cancel below.
      const job = following.get(runId);
      if (job !== undefined) {
        try {
          await job.cancel();
          return true;
        } catch (error) {
          log(
            podCtx(deps),
            'debug',
            `run ${runId}: its job was not cancelled over its follow's connection (${describeError(error)}); cancelling it over a new one`,
          );
        }
      }
      try {
        await cancel(deps, config, runId);
      } catch (error) {
        if (error instanceof FlowError && error.kind === 'not_started') return false;
        if (error instanceof FlowError && error.kind === 'already_ended') return true;
        throw error;
      }
      return true;
    },
    findRun(name, number) {
      const found = deps.store
        .list()
        .runs.find((r) => r.sweep?.name === name && r.sweep.trial === number);
      return found?.id ?? null;
    },
    costUsd(runId) {
      const pod = deps.store.loadPod(runId);
      if (pod === null) return 0;
      const total = runTotals(runPodSpends(pod, deps.clock.nowMs()))[0];
      return total?.billedUsd ?? total?.estimatedUsd ?? null;
    },
  };
}
