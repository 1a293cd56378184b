/**
 * Runs without a pod: the local machine's, and the user's own machine over SSH (`kind = "ssh"`):
 * which executor reaches a run's job, and a new run started on the user's machine (its files
 * uploaded, its job detached, then followed home by follow/host.ts). No watchdog, nothing deleted.
 */
import type { OverbrainerConfig, SshTargetConfig } from '../config/types';
import { sshHostEnvVar } from '../config/types';
import { describeError } from '../errors';
import type { Executor } from '../exec/executor';
import { LocalExecutor } from '../exec/local';
import { shQuote } from '../exec/shell';
import { connectUserHost } from '../exec/userHost';
import { uploadRunDir } from '../follow/startJob';
import { followLocal } from '../follow/collect';
import { followOnHost, type HostResults } from '../follow/host';
import { failRun, log } from '../pod/context';
import { INTERRUPTED_BEFORE_JOB } from '../runs/runEnd';
import type { RunRecord } from '../runs/runRecord';
import { cancelJob, startJob, type TrainerJob } from '../train/job';
import { jobScript } from '../train/jobScripts';
import {
  type FlowDeps,
  FlowError,
  type FlowResult,
  artifactsOf,
  maxRetrieveGbOf,
  publishState,
  summaryLine,
} from './deps';

/**
 * The executor that reaches the job of `run`, a run with no pod: its ssh target's machine, or this
 * one. A run whose job is not in its local run directory needs its target from the config.
 */
export async function hostExecutor(
  deps: FlowDeps,
  config: OverbrainerConfig | null,
  run: RunRecord,
  signal?: AbortSignal,
): Promise<Executor> {
  const target = config?.targets[run.target];
  if (target?.kind === 'ssh') return connectTarget(deps, target, signal);
  if (run.remoteDir !== deps.store.runDir(run.id)) {
    throw new FlowError(
      'bad_config',
      `run ${run.id} ran on target "${run.target}" at ${run.remoteDir}, which overbrainer.toml no longer defines as an ssh target`,
      `Add [targets.${run.target}] with kind = "ssh" back (and set ${sshHostEnvVar(run.target)}), then run the command again.`,
    );
  }
  return new LocalExecutor({ clock: deps.clock });
}

/** Connects to an ssh target's machine as the user's own ssh would. */
export async function connectTarget(
  deps: FlowDeps,
  target: SshTargetConfig,
  signal?: AbortSignal,
): Promise<Executor> {
  if (target.host === null) {
    const envVar = sshHostEnvVar(target.name);
    throw new FlowError(
      'bad_config',
      `target "${target.name}" has no address: ${envVar} is not set`,
      `Set ${envVar}=user@host[:port] (the environment only), then run the command again.`,
    );
  }
  return connectUserHost(target.host, {
    env: deps.env ?? process.env,
    clock: deps.clock,
    timing: deps.timing,
    ...(signal === undefined ? {} : { signal }),
  });
}

/** The workdir as an absolute path on the machine (a relative one is under the SSH user's home). */
async function absoluteWorkdir(executor: Executor, target: SshTargetConfig): Promise<string> {
  const workdir = target.workdir;
  if (workdir.startsWith('/')) return workdir.replace(/\/+$/, '');
  const home = await executor.exec('printf %s "$HOME"');
  const dir = home.stdout.toString().trim();
  if (home.code !== 0 || !dir.startsWith('/')) {
    throw new FlowError(
      'bad_config',
      `cannot read the SSH user's home directory on target "${target.name}" (for workdir = "${workdir}")`,
      `Write an absolute workdir under [targets.${target.name}], then train again.`,
    );
  }
  return `${dir}/${workdir.replace(/^~\/?/, '').replace(/\/+$/, '')}`;
}

/** What a new run's job starts with: its trainer, its environment, its secrets (on stdin). */
export interface JobLaunch {
  job: TrainerJob;
  env: Record<string, string>;
  secrets: Record<string, string>;
}

/**
 * Starts `run` on the user's machine and follows it home: connects (their known_hosts, their
 * agent), puts the run in `<workdir>/<run-id>`, uploads its files, starts its job detached (the
 * secrets on its stdin), records it running, then follows it to its verified results.
 */
export async function trainOnHost(
  deps: FlowDeps,
  config: OverbrainerConfig,
  target: SshTargetConfig,
  run: RunRecord,
  launch: JobLaunch,
  signal?: AbortSignal,
): Promise<FlowResult> {
  let executor: Executor;
  try {
    executor = await connectTarget(deps, target, signal);
  } catch (error) {
    failRun(deps, run, 'start_failed', `cannot reach ${target.name}: ${describeError(error)}`);
    throw error;
  }
  try {
    try {
      run.remoteDir = `${await absoluteWorkdir(executor, target)}/${run.id}`;
      deps.store.saveRun(run);
      await executor.exec(`mkdir -p ${shQuote(run.remoteDir)}`);
      await uploadRunDir(deps, executor, run);
      const { job } = launch;
      const trainer =
        job.trainer === 'axolotl' && target.venv !== null ? { ...job, venv: target.venv } : job;
      await startRecorded(deps, executor, run, { ...launch, job: trainer }, signal);
    } catch (error) {
      if (run.state !== 'running') {
        // A job launched but not recorded (an abort, a failed save) never runs on unfollowed.
        await cancelJob(executor, run.remoteDir).catch(() => undefined);
        failRun(deps, run, 'start_failed', `the job could not start: ${describeError(error)}`);
      }
      throw error;
    }
    return await followOnHost(deps, executor, run, hostResults(config, run), signal);
  } finally {
    executor.dispose();
  }
}

/** Starts a run's job on this machine and follows it to its end. */
export async function trainLocal(
  deps: FlowDeps,
  run: RunRecord,
  launch: JobLaunch,
  signal?: AbortSignal,
): Promise<FlowResult> {
  const executor = new LocalExecutor({ clock: deps.clock });
  try {
    await startRecorded(deps, executor, run, launch, signal);
    return await followLocal(deps, executor, run, signal);
  } finally {
    executor.dispose();
  }
}

/** Starts `job` detached in the run's directory and records the run running. */
async function startRecorded(
  deps: FlowDeps,
  executor: Executor,
  run: RunRecord,
  launch: JobLaunch,
  signal?: AbortSignal,
): Promise<void> {
  const script = jobScript(launch.job, { runDir: run.remoteDir, jobEnvFile: null });
  const { env, secrets } = launch;
  const { pid } = await startJob(executor, { runDir: run.remoteDir, script, env, secrets, signal });
  run.job = { dir: run.remoteDir, pid, container: null };
  run.state = 'running';
  deps.store.saveRun(run);
  publishState(deps, run);
}

/** What a run on the user's machine brings home: `[training] artifacts`, within its limit. */
export function hostResults(config: OverbrainerConfig | null, run: RunRecord): HostResults {
  return { artifacts: artifactsOf(config), maxRetrieveGb: maxRetrieveGbOf(config, run) };
}

/**
 * A run with no pod left `preparing` by a client that died before its job started (nothing will
 * start it): as for a pod, no job is left that nobody follows and the run fails `interrupted
 * before the job started`. On the user's machine a job launched but never recorded is cancelled
 * and the run's own directory (`<workdir>/<run-id>`: a half upload, nothing the job finished) is
 * removed, never anything beside it; a local run's job is cancelled, its folder kept. A machine
 * that cannot be reached does not keep the run `preparing`: its message says what may be left
 * there and how to remove it.
 */
export async function abandonWithoutPod(
  deps: FlowDeps,
  config: OverbrainerConfig | null,
  run: RunRecord,
  signal?: AbortSignal,
): Promise<FlowResult> {
  const target = config?.targets[run.target];
  const local = run.remoteDir === deps.store.runDir(run.id);
  let leftover: string | null = null;
  // trainOnHost records the absolute directory before it makes it: a relative one made nothing.
  if (local || run.remoteDir.startsWith('/')) {
    log(deps, 'info', `run ${run.id} was left before its job started (its client stopped)`);
    let executor: Executor | null = null;
    try {
      executor = await hostExecutor(deps, config, run, signal);
      const dir = shQuote(run.remoteDir);
      const launched = await executor.exec(`test -e ${dir}/job.pid`, { signal });
      if (launched.code === 0) await cancelJob(executor, run.remoteDir, { signal });
      if (!local && target?.kind === 'ssh') {
        const own = `${await absoluteWorkdir(executor, target)}/${run.id}`;
        if (own !== run.remoteDir) {
          leftover = `${run.remoteDir} on target ${run.target} is not under its workdir now, so it was left there`;
        } else if ((await executor.exec(`rm -rf -- ${dir}`, { signal })).code !== 0) {
          leftover = `${run.remoteDir} on target ${run.target} could not be removed`;
        }
      }
    } catch (error) {
      leftover = `what it left at ${run.remoteDir} on target ${run.target} was not cleaned (${describeError(error)}): check that no job of it runs there and remove the directory`;
    } finally {
      executor?.dispose();
    }
  }
  const message =
    leftover === null ? INTERRUPTED_BEFORE_JOB : `${INTERRUPTED_BEFORE_JOB}; ${leftover}`;
  failRun(deps, run, 'interrupted', message);
  return { run, pod: null, ending: null, summary: summaryLine(deps, run, null) };
}
