/**
 * The run flow both front ends drive (the extension and the CLI): train,
 * attach, cancel, keep and release, for a Runpod target (a pod per run) and the
 * local target (the job in runs/<id>/ on this machine).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { rfc3339, type Clock } from '../clock';
import type { OverbrainerConfig, RunpodTargetConfig, TargetConfig } from '../config/types';
import { DEFAULT_ARTIFACTS, workdirFor } from '../config/types';
import type { EventBus } from '../events';
import type { Executor } from '../exec/executor';
import { LocalExecutor } from '../exec/local';
import type { RunpodClient } from '../runpod/client';
import { log, warn, type PodCtx } from '../runpod/context';
import {
  endPod,
  failRun,
  followMoved,
  holdLeaseDuring,
  limitFailure,
  reconnect,
  setKeep,
  settleWatch,
  stillThere,
  watchLeased,
  type Ending,
} from '../runpod/lifecycle';
import { seedFromStream } from '../runpod/checkpointStream';
import { PodError } from '../runpod/podError';
import { startPod } from '../runpod/provision';
import { forgetKeys, messageOf, noteStrays, remove, sweep } from '../runpod/remove';
import type { Timing } from '../timing';
import { MetricsFollower, type FollowResult } from '../train/follow';
import {
  cancelJob,
  jobScript,
  jobStatus,
  POD_JOB_ENV,
  RESUME_DIR,
  RESUME_ENV,
  SNAPSHOT_JSON,
  startJob,
  type TrainerJob,
} from '../train/job';
import { jobOutcome, withSnapshot, type JobOutcome } from '../train/outcome';
import { readSnapshot, requestSnapshot, type RequestResult } from '../train/snapshot';
import { describeMismatches, retrieve } from '../train/retrieval';
import type { PodRecord } from './podRecord';
import type { RunRecord } from './runRecord';
import { LOCAL_ONLY, noPodLeft, type RunStore } from './store';
import type { RunLock } from './lock';

/** What the flow works with; `client` is null when no Runpod API key is set (local target only). */
export interface FlowDeps {
  store: RunStore;
  client: RunpodClient | null;
  bus: EventBus;
  clock: Clock;
  timing: Timing;
  version: string;
  /** Who follows, for lock messages ("VS Code window", "overbrainer CLI"). */
  owner: string;
}

/** A user-facing failure of the flow: what happened and the next action. */
export class FlowError extends Error {
  constructor(
    message: string,
    readonly hint: string | null = null,
  ) {
    super(message);
    this.name = 'FlowError';
  }
}

export interface FlowResult {
  run: RunRecord;
  pod: PodRecord | null;
  ending: Ending | null;
  /** The final line: `train: run <id> <state>; <summary>[; output in runs/<id>/output]`. */
  summary: string;
}

/** Trainer artifacts never brought back (checkpoints at any depth). */
const ARTIFACT_EXCLUDES = ['checkpoint-*'];

function podCtx(deps: FlowDeps): PodCtx {
  if (deps.client === null) {
    throw new FlowError(
      'no Runpod API key is set',
      'Run "Overbrainer: Set Runpod API Key", or set OVERBRAINER_RUNPOD__API_KEY.',
    );
  }
  return {
    store: deps.store,
    client: deps.client,
    bus: deps.bus,
    clock: deps.clock,
    timing: deps.timing,
    version: deps.version,
  };
}

function pickTarget(config: OverbrainerConfig, name: string | undefined): TargetConfig {
  const names = Object.keys(config.targets);
  const chosen = name ?? config.training?.target ?? (names.length === 1 ? names[0] : undefined);
  if (chosen === undefined) {
    throw new FlowError(
      names.length === 0
        ? 'overbrainer.toml defines no target'
        : `several targets (${names.join(', ')}) and no [training] target`,
      names.length === 0
        ? 'Add a [targets.NAME] section (Overbrainer: Create overbrainer.toml writes a commented one).'
        : 'Set target = "NAME" under [training], or pick one with --target.',
    );
  }
  const target = config.targets[chosen];
  if (!target) {
    throw new FlowError(
      `no target "${chosen}" in overbrainer.toml`,
      `Use one of: ${names.join(', ') || '(none)'}.`,
    );
  }
  return target;
}

function lockRun(deps: FlowDeps, runId: string): RunLock {
  const lock = deps.store.lock(runId, deps.owner);
  if (lock === null) {
    const holder = deps.store.lockHolder(runId);
    throw new FlowError(
      `run ${runId} is followed by another client${holder ? ` (${holder.owner}, pid ${holder.pid})` : ''}`,
      'Watch it there, or close that client and attach here.',
    );
  }
  return lock;
}

/** Where the shipped metrics plugin is: next to the bundle (dist/python) or in the source tree. */
export function pluginSource(): string {
  const candidates = [
    path.join(__dirname, 'python', 'overbrainer_metrics.py'),
    path.join(__dirname, '..', '..', '..', 'python', 'overbrainer_metrics.py'),
  ];
  const found = candidates.find((file) => fs.existsSync(file));
  if (!found)
    throw new FlowError(
      'the metrics plugin is missing from this installation',
      'Reinstall the extension.',
    );
  return found;
}

/** Copies `[training] upload` (and the trainer's files) from the workspace into the run directory. */
function prepare(config: OverbrainerConfig, workspaceDir: string, runDir: string): TrainerJob {
  const training = config.training;
  if (!training) {
    throw new FlowError(
      'overbrainer.toml has no [training] section',
      'Add one (see the commented template).',
    );
  }
  for (const entry of training.upload) {
    const source = path.resolve(workspaceDir, entry);
    const rel = path.relative(workspaceDir, source);
    if (rel.startsWith('..') || path.isAbsolute(rel)) {
      throw new FlowError(
        `upload entry ${entry} is outside the workspace`,
        'List files inside the workspace.',
      );
    }
    if (!fs.existsSync(source)) {
      throw new FlowError(
        `upload entry ${entry} does not exist`,
        `Create ${entry} or remove it from [training] upload.`,
      );
    }
    fs.cpSync(source, path.join(runDir, rel), {
      recursive: true,
      dereference: false,
      verbatimSymlinks: true,
    });
  }
  fs.mkdirSync(path.join(runDir, 'plugin'), { recursive: true });
  fs.copyFileSync(pluginSource(), path.join(runDir, 'plugin', 'overbrainer_metrics.py'));
  if (training.trainer.kind === 'axolotl') {
    fs.copyFileSync(
      path.join(workspaceDir, training.trainer.configPath),
      path.join(runDir, 'axolotl.yaml'),
    );
    return { trainer: 'axolotl', config: 'axolotl.yaml', venv: '' };
  }
  return { trainer: 'command', command: training.trainer.command };
}

/** The final line of a run. */
export function summaryLine(
  deps: Pick<FlowDeps, 'store'>,
  run: RunRecord,
  pod: PodRecord | null,
): string {
  const parts = [`train: run ${run.id} ${run.state}`];
  if (run.message) parts.push(run.message);
  if (pod) parts.push(pod.summary());
  const output = path.join(deps.store.runDir(run.id), 'output');
  if (fs.existsSync(output) && fs.readdirSync(output).length > 0)
    parts.push(`output in runs/${run.id}/output`);
  return parts.join('; ');
}

function publishState(deps: FlowDeps, run: RunRecord): void {
  deps.bus.publish({ type: 'runState', runId: run.id, state: run.state, message: run.message });
}

export interface TrainOptions {
  target?: string;
  keepPod?: boolean;
  /** Aborting before the job starts deletes the pod; after, it only stops following. */
  signal?: AbortSignal;
  /** Called once the run exists (its ID is known). */
  onRun?: (run: RunRecord) => void;
  /** A stopped (or failed) run whose snapshot this run starts from (`--resume-from`). */
  resumeFrom?: string;
}

/** Where a resumed run starts: the earlier run's snapshot, checked before anything is created. */
interface ResumeSource {
  runId: string;
  step: number;
  /** The snapshot's checkpoint directory, as it came home under runs/<earlier run>/. */
  localDir: string;
}

function resumeSource(deps: FlowDeps, runId: string): ResumeSource {
  const earlier = deps.store.loadRun(runId);
  if (earlier.state === 'running' || earlier.state === 'preparing') {
    throw new FlowError(
      `run ${runId} is still ${earlier.state}: it has no snapshot to resume from yet`,
      `Stop it first with \`overbrainer train stop ${runId}\` (VS Code: Stop and Snapshot), then resume.`,
    );
  }
  const snapshot = earlier.snapshot;
  if (!snapshot) {
    throw new FlowError(
      `run ${runId} ended ${earlier.state} without a snapshot: there is no checkpoint to resume from`,
      'Runs that were stopped (`overbrainer train stop`, Stop and Snapshot, or a limit the watchdog saw coming) have one; start this one afresh.',
    );
  }
  const localDir = path.join(deps.store.runDir(runId), snapshot.checkpoint);
  if (!fs.existsSync(localDir) || !fs.statSync(localDir).isDirectory()) {
    throw new FlowError(
      `the snapshot of run ${runId} (${snapshot.checkpoint}, step ${snapshot.step}) is not in runs/${runId}/: its results were not brought home`,
      `Bring them home with \`overbrainer train attach ${runId}\` while its pod still exists.`,
    );
  }
  return { runId, step: snapshot.step, localDir };
}

/**
 * Puts the earlier run's checkpoint into the new run's directory (`resume/checkpoint-N/`, uploaded
 * with it) and returns the job's env naming it where the job runs. An Axolotl config gets
 * `resume_from_checkpoint` too.
 */
function placeResume(
  deps: FlowDeps,
  run: RunRecord,
  source: ResumeSource,
  job: TrainerJob,
): Record<string, string> {
  const name = `checkpoint-${source.step}`;
  const runDir = deps.store.runDir(run.id);
  fs.cpSync(source.localDir, path.join(runDir, RESUME_DIR, name), {
    recursive: true,
    dereference: false,
    verbatimSymlinks: true,
  });
  const remote = `${run.remoteDir}/${RESUME_DIR}/${name}`;
  if (job.trainer === 'axolotl') {
    fs.appendFileSync(
      path.join(runDir, job.config),
      `\n# Added by Overbrainer: this run resumes run ${source.runId} from step ${source.step}.\nresume_from_checkpoint: ${JSON.stringify(remote)}\n`,
    );
  }
  run.resumedFrom = source.runId;
  deps.store.saveRun(run);
  return { [RESUME_ENV]: remote };
}

/** Starts a run on its target and follows it to its end (spec §5–§8). */
export async function train(
  deps: FlowDeps,
  config: OverbrainerConfig,
  workspaceDir: string,
  options: TrainOptions = {},
): Promise<FlowResult> {
  const target = pickTarget(config, options.target);
  if (options.keepPod && target.kind !== 'runpod') {
    throw new FlowError(
      '--keep-pod only applies to a runpod target',
      'Drop --keep-pod, or pick a runpod target.',
    );
  }
  if (!config.training) {
    throw new FlowError(
      'overbrainer.toml has no [training] section',
      'Add one (see the commented template).',
    );
  }
  const ctx = target.kind === 'runpod' ? podCtx(deps) : null;
  const resume = options.resumeFrom === undefined ? null : resumeSource(deps, options.resumeFrom);
  const run = deps.store.create({
    project: config.projectName,
    target: target.name,
    remoteDir: (id) =>
      target.kind === 'runpod' ? `${workdirFor(target)}/${id}` : deps.store.runDir(id),
  });
  const lock = lockRun(deps, run.id);
  try {
    options.onRun?.(run);
    publishState(deps, run);
    let job: TrainerJob;
    let env: Record<string, string> = {};
    try {
      job = prepare(config, workspaceDir, deps.store.runDir(run.id));
      if (resume !== null) env = placeResume(deps, run, resume, job);
    } catch (error) {
      run.state = 'failed';
      run.message = messageOf(error);
      deps.store.saveRun(run);
      publishState(deps, run);
      throw error;
    }
    if (target.kind === 'local') return await trainLocal(deps, run, job, env, options.signal);
    return await trainOnPod(ctx!, deps, target, run, job, env, options, config);
  } finally {
    lock.dispose();
  }
}

async function trainLocal(
  deps: FlowDeps,
  run: RunRecord,
  job: TrainerJob,
  env: Record<string, string>,
  signal?: AbortSignal,
): Promise<FlowResult> {
  const executor = new LocalExecutor({ clock: deps.clock });
  try {
    const script = jobScript(job, { runDir: run.remoteDir, jobEnvFile: null });
    const { pid } = await startJob(executor, { runDir: run.remoteDir, script, env, signal });
    run.job = { dir: run.remoteDir, pid, container: null };
    run.state = 'running';
    deps.store.saveRun(run);
    publishState(deps, run);
    return await followLocal(deps, executor, run, signal);
  } finally {
    executor.dispose();
  }
}

async function followLocal(
  deps: FlowDeps,
  executor: Executor,
  run: RunRecord,
  signal?: AbortSignal,
): Promise<FlowResult> {
  const follower = new MetricsFollower({
    executor,
    runId: run.id,
    runDir: run.remoteDir,
    bus: deps.bus,
    clock: deps.clock,
    timing: deps.timing,
  });
  const result = await follower.follow(signal);
  const outcome = withSnapshot(
    jobOutcome(result.status, result.metrics, run.id)!,
    await readSnapshot(executor, run.remoteDir),
  );
  finishRecord(deps, run, outcome, true, null);
  return { run, pod: null, ending: null, summary: summaryLine(deps, run, null) };
}

/** Saves the run's end: verified results, or why they are not there. */
function finishRecord(
  deps: FlowDeps,
  run: RunRecord,
  outcome: JobOutcome,
  retrieved: boolean,
  retrievalProblem: string | null,
): void {
  if (outcome.snapshot !== undefined) run.snapshot = outcome.snapshot;
  if (retrieved) {
    const output = path.join(deps.store.runDir(run.id), 'output');
    const empty = !fs.existsSync(output) || fs.readdirSync(output).length === 0;
    if (outcome.state === 'succeeded' && empty) {
      run.state = 'failed';
      run.message = 'the job succeeded but wrote nothing under output/';
    } else {
      run.state = outcome.state;
      run.message = outcome.message;
    }
  } else if (outcome.state === 'succeeded') {
    // Stays running: attach retrieves again.
    run.state = 'running';
    run.message = `${NOT_RETRIEVED}: ${retrievalProblem ?? 'unknown'}`;
  } else {
    run.state = outcome.state;
    run.message = `${outcome.message ?? outcome.state}; ${NOT_RETRIEVED}: ${retrievalProblem ?? 'unknown'}`;
  }
  deps.store.saveRun(run);
  publishState(deps, run);
}

async function trainOnPod(
  ctx: PodCtx,
  deps: FlowDeps,
  target: RunpodTargetConfig,
  run: RunRecord,
  job: TrainerJob,
  env: Record<string, string>,
  options: TrainOptions,
  config: OverbrainerConfig,
): Promise<FlowResult> {
  const keep = options.keepPod ?? false;
  const { record: pod, provisioned } = await startPod(ctx, target, run, keep, options.signal);
  const executor = provisioned.executor;
  try {
    // Shielded from the abort: once the upload starts the job is started or the pod deleted.
    // A Ctrl-C or Cancel that lands before the job is recorded running has one outcome: no
    // job is left running (one started meanwhile is cancelled), the pod is deleted and the run
    // fails "interrupted before the job started". Never a job nobody follows.
    try {
      throwIfInterrupted(options.signal);
      await executor.upload(deps.store.runDir(run.id), run.remoteDir, { exclude: LOCAL_ONLY });
      throwIfInterrupted(options.signal);
      const trainer = job.trainer === 'axolotl' ? { ...job, venv: target.venv } : job;
      const script = jobScript(trainer, { runDir: run.remoteDir, jobEnvFile: POD_JOB_ENV });
      const { pid } = await startJob(executor, { runDir: run.remoteDir, script, env });
      if (options.signal?.aborted) {
        await cancelJob(executor, run.remoteDir).catch(() => undefined);
        throwIfInterrupted(options.signal);
      }
      run.job = { dir: run.remoteDir, pid, container: null };
      run.state = 'running';
      try {
        deps.store.saveRun(run);
      } catch (error) {
        await cancelJob(executor, run.remoteDir).catch(() => undefined);
        throw error;
      }
    } catch (error) {
      const interrupted = options.signal?.aborted ?? false;
      await ctxRemove(ctx, pod, interrupted ? 'interrupted' : 'requested');
      failRun(
        ctx,
        run,
        interrupted
          ? 'interrupted before the job started'
          : `the job could not start: ${messageOf(error)}`,
      );
      throw error;
    }
    pod.state = 'running';
    ctx.store.savePod(pod);
    publishState(deps, run);
    if (keep) {
      warn(
        ctx,
        run.id,
        'kept',
        `pod ${pod.podId ?? ''} is kept: it bills ${pod.costPerHourUsd === null ? '' : `$${pod.costPerHourUsd.toFixed(2)}/h `}until you remove it`,
      );
    }
    return await followOnPod(ctx, deps, executor, run, pod, artifactsOf(config), options.signal);
  } finally {
    executor.dispose();
  }
}

function throwIfInterrupted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) {
    throw new PodError(
      'interrupted',
      'interrupted before the job started',
      'Start the run again when you are ready.',
    );
  }
}

async function ctxRemove(
  ctx: PodCtx,
  pod: PodRecord,
  reason: 'interrupted' | 'requested',
): Promise<void> {
  try {
    await remove(ctx, pod, reason, 'client');
  } catch (error) {
    log(ctx, 'error', messageOf(error));
  }
  // No pod of the run is left: its host-key secret goes with the client key (as after provisioning).
  if (noPodLeft(ctx.store, pod.runId)) await forgetKeys(ctx, pod.runId);
}

/** Follows a running pod job to its end, then retrieves and ends the pod. */
async function followOnPod(
  ctx: PodCtx,
  deps: FlowDeps,
  executor: Executor,
  run: RunRecord,
  pod: PodRecord,
  artifacts: readonly string[],
  signal?: AbortSignal,
): Promise<FlowResult> {
  const moved: Executor[] = [];
  try {
    let current = executor;
    let watched = await watchLeased(ctx, current, run, pod, signal);
    // The pod restarted on a new port (Runpod publishes a restarted container anew): follow it
    // there from where the metrics stopped, a bounded number of times.
    for (let moves = 0; watched.kind === 'failed' && moves < MAX_ENDPOINT_MOVES; moves++) {
      if (signal?.aborted) break;
      const next = await followMoved(ctx, pod, run, signal).catch((error: unknown) => {
        log(
          ctx,
          'debug',
          `run ${run.id}: cannot follow its pod to a new endpoint: ${messageOf(error)}`,
        );
        return null;
      });
      if (next === null) break;
      moved.push(next);
      current = next;
      watched = await watchLeased(ctx, current, run, pod, signal, watched.offset);
    }
    if (
      signal?.aborted &&
      watched.kind !== 'deadline_passed' &&
      watched.kind !== 'cost_cap_passed'
    ) {
      throw new FlowError(stopFollowingMessage(ctx, run, pod), null);
    }
    const result: FollowResult = await settleWatch(ctx, pod, run, watched);
    return await collect(
      ctx,
      deps,
      current,
      run,
      pod,
      jobOutcome(result.status, result.metrics, run.id)!,
      artifacts,
    );
  } finally {
    for (const next of moved) next.dispose();
  }
}

/** How many times one follow goes after its pod to a new SSH endpoint before it gives up. */
const MAX_ENDPOINT_MOVES = 3;

/** What stopping the follow leaves running (spec §8, Ctrl-C once the job runs). */
export function stopFollowingMessage(ctx: PodCtx, run: RunRecord, pod: PodRecord): string {
  if (pod.keep) {
    return `stopped following run ${run.id}: the job and its kept pod ${pod.podId ?? ''} keep running; attach again with \`overbrainer train attach ${run.id}\``;
  }
  const leaseEndMs = ctx.clock.nowMs() + ctx.timing.leaseTtlMs;
  const deadlineMs = (pod.deadlineUnixS ?? 0) * 1000;
  const at = new Date(Math.max(leaseEndMs, deadlineMs)).toISOString().replace(/\.\d+Z$/, 'Z');
  return (
    `stopped following run ${run.id}: the job and pod ${pod.podId ?? ''} keep running; attach again with ` +
    `\`overbrainer train attach ${run.id}\`, or remove the pod with \`overbrainer pod rm ${run.id}\`. ` +
    "If nobody follows, the pod's watchdog deletes it once its retrieve grace passes after the job ends, " +
    `and at ${at} at the latest (the deadline, or the lease's end, whichever is later)`
  );
}

const NOT_RETRIEVED = 'artifacts not retrieved';

/**
 * Whether the run's results were already retrieved and verified: it ended (succeeded, failed,
 * cancelled, stopped) without `artifacts not retrieved` in its message, which is how
 * {@link finishRecord} saves an ended run whose results did not come home (a successful one stays
 * `running`).
 */
function alreadyRetrieved(run: RunRecord): boolean {
  return (
    run.state !== 'running' &&
    run.state !== 'preparing' &&
    !(run.message ?? '').includes(NOT_RETRIEVED)
  );
}

/**
 * The outcome an ended run was recorded with before its results came home: its message without
 * the `artifacts not retrieved: …` that {@link finishRecord} added (a retrieval that now
 * succeeds must not keep saying so).
 */
function recordedOutcome(run: RunRecord): JobOutcome {
  const before = (run.message ?? '').split(`; ${NOT_RETRIEVED}: `)[0]!;
  const message = before === '' || before === run.state ? null : before;
  return { state: run.state as JobOutcome['state'], message };
}

/** Retrieves the results of an ended job, saves the run, ends the pod. */
async function collect(
  ctx: PodCtx,
  deps: FlowDeps,
  executor: Executor,
  run: RunRecord,
  pod: PodRecord,
  outcome: JobOutcome,
  artifacts: readonly string[],
): Promise<FlowResult> {
  let verified = false;
  let problem: string | null = null;
  try {
    // A job that stopped for a snapshot: its checkpoint comes home with the results (the other
    // checkpoints stay excluded). Not knowing whether there is one is not knowing what to fetch.
    outcome = withSnapshot(outcome, await readSnapshot(executor, run.remoteDir));
    const kept = outcome.snapshot?.checkpoint;
    // A snapshot checkpoint streamed home already is reused: only files that differ are fetched.
    const seeded = kept === undefined ? 0 : await seedFromStream(deps.store.runDir(run.id), kept);
    // The lease is renewed while the results download: the deadline never cuts a retrieval.
    const got = await holdLeaseDuring(ctx, executor, run, pod, () =>
      retrieve({
        executor,
        remoteRunDir: run.remoteDir,
        localRunDir: deps.store.runDir(run.id),
        entries: kept === undefined ? [...artifacts] : [...artifacts, SNAPSHOT_JSON, kept],
        excludes: kept === undefined ? ARTIFACT_EXCLUDES : [...ARTIFACT_EXCLUDES, `!${kept}`],
        clock: deps.clock,
      }),
    );
    verified = got.verified;
    log(
      ctx,
      'info',
      `run ${run.id}: ${got.transferredBytes} bytes fetched after the job ended (${got.reusedBytes} reused${seeded > 0 ? ', the snapshot checkpoint streamed home already' : ''})`,
    );
    if (!got.verified) {
      problem = describeMismatches(got.mismatches);
    }
  } catch (error) {
    problem = messageOf(error);
  }
  finishRecord(deps, run, outcome, verified, problem);
  const ending = await endPod(ctx, pod, executor, run, verified);
  return { run, pod, ending, summary: summaryLine(deps, run, pod) };
}

/** The artifacts to bring back: `[training] artifacts`, else the defaults. */
function artifactsOf(config: OverbrainerConfig | null): readonly string[] {
  return config?.training?.artifacts ?? DEFAULT_ARTIFACTS;
}

/**
 * Reconnects to a run after any restart and finishes it: a running job is
 * followed again; an ended one's results are retrieved and its pod ended.
 */
export async function attach(
  deps: FlowDeps,
  config: OverbrainerConfig | null,
  runId: string,
  signal?: AbortSignal,
): Promise<FlowResult> {
  const run = deps.store.loadRun(runId);
  const target = config?.targets[run.target];
  const pod = deps.store.loadPod(runId);
  const lock = lockRun(deps, runId);
  try {
    if (pod === null) {
      if (target && target.kind === 'runpod')
        throw new FlowError(`run ${runId} has no pod.json`, null);
      if (run.state !== 'running' || run.job === null) {
        return { run, pod: null, ending: null, summary: summaryLine(deps, run, null) };
      }
      const executor = new LocalExecutor({ clock: deps.clock });
      try {
        return await followLocal(deps, executor, run, signal);
      } finally {
        executor.dispose();
      }
    }
    if (target && target.kind !== 'runpod') {
      throw new FlowError(
        `run ${runId} ran on a pod but target "${run.target}" is no longer a runpod target`,
        'Restore the target in overbrainer.toml.',
      );
    }
    if (run.job === null) {
      if (run.state === 'preparing') return await abandonStart(podCtx(deps), deps, run, pod);
      return { run, pod, ending: null, summary: summaryLine(deps, run, pod) };
    }
    const ctx = podCtx(deps);
    const executor = await reconnect(ctx, pod, run, signal);
    if (executor === null) return podGone(ctx, deps, run, pod);
    try {
      const status = await jobStatus(executor, run.remoteDir);
      if (status.kind === 'running') {
        deps.bus.publish({ type: 'runWatched', runId });
        return await followOnPod(ctx, deps, executor, run, pod, artifactsOf(config), signal);
      }
      if (alreadyRetrieved(run)) {
        // Its client died after the results were verified here (before or while it ended the
        // pod): nothing to fetch again, only the pod to end.
        log(ctx, 'info', `run ${run.id} was already retrieved: ending its pod`);
        const ending = await endPod(ctx, pod, executor, run, true);
        return { run, pod, ending, summary: summaryLine(deps, run, pod) };
      }
      // Ended while nobody followed: summarize from the pod's files, then collect.
      const follower = new MetricsFollower({
        executor,
        runId,
        runDir: run.remoteDir,
        bus: deps.bus,
        clock: deps.clock,
        timing: deps.timing,
      });
      let result: FollowResult;
      try {
        result = await follower.follow(signal);
      } catch (error) {
        // The pod may have been deleted since we connected (its retrieve grace, a limit, or
        // `pod rm` elsewhere): then it is recorded gone, as when attach finds it gone.
        if (signal?.aborted || (await stillThere(ctx, pod)) !== null) throw error;
        return podGone(ctx, deps, run, pod);
      }
      const outcome =
        run.state === 'running' || run.state === 'preparing'
          ? jobOutcome(result.status, result.metrics, run.id)!
          : recordedOutcome(run);
      return await collect(ctx, deps, executor, run, pod, outcome, artifactsOf(config));
    } finally {
      executor.dispose();
    }
  } finally {
    lock.dispose();
  }
}

/**
 * The run's pod turned out gone (recorded in pod.json by the look that found it): a run still
 * `running` fails with the limit that ended it, or because its pod no longer exists.
 */
function podGone(ctx: PodCtx, deps: FlowDeps, run: RunRecord, pod: PodRecord): FlowResult {
  if (run.state === 'running') {
    failRun(
      ctx,
      run,
      limitFailure(pod, ctx.clock.nowMs())?.message ?? `pod ${pod.podId ?? ''} no longer exists`,
    );
  }
  return { run, pod, ending: 'deleted', summary: summaryLine(deps, run, pod) };
}

/**
 * Attach to a run still `preparing`: its lock was free, so the client that was starting it is
 * gone (killed before its job started) and nothing will start the job. As Ctrl-C before the job
 * starts does (spec §8): the recorded pod is deleted, every other pod carrying the run marker too
 * (a create sent but never answered leaves one pod.json does not name), the keys are forgotten
 * once no pod is left, and the run fails `interrupted before the job started`.
 */
async function abandonStart(
  ctx: PodCtx,
  deps: FlowDeps,
  run: RunRecord,
  pod: PodRecord,
): Promise<FlowResult> {
  log(
    ctx,
    'info',
    `run ${run.id} was left before its job started (its client stopped): removing its pods`,
  );
  const createInFlight = pod.podId === null && pod.state === 'creating';
  let problem: unknown = null;
  try {
    await remove(ctx, pod, 'interrupted', 'client');
  } catch (error) {
    problem = error;
  }
  // A create that was sent but never answered: Runpod may list its pod a little late.
  if (createInFlight) await deps.clock.sleep(ctx.timing.reconcileFirstWaitMs);
  noteStrays(ctx, pod, await sweep(ctx, run.id, pod.podId));
  if (pod.podId === null && pod.state === 'creating' && !pod.unconfirmedCreate) {
    pod.state = 'deleted';
    pod.deletedAt = rfc3339(deps.clock.nowMs());
    ctx.store.savePod(pod);
  }
  if (problem === null && noPodLeft(ctx.store, run.id)) await forgetKeys(ctx, run.id);
  failRun(ctx, run, 'interrupted before the job started');
  if (problem !== null) throw problem;
  return { run, pod, ending: 'deleted', summary: summaryLine(deps, run, pod) };
}

/** Cancels a run's job (spec §6 Cancel), then retrieves what it wrote and ends its pod. */
export async function cancel(
  deps: FlowDeps,
  config: OverbrainerConfig | null,
  runId: string,
  signal?: AbortSignal,
): Promise<FlowResult> {
  const run = deps.store.loadRun(runId);
  if (run.state === 'cancelled') throw new FlowError(`run ${runId} already ended: cancelled`, null);
  if (run.job === null) throw new FlowError(`run ${runId} has not started`, null);
  const pod = deps.store.loadPod(runId);
  const lock = deps.store.lock(runId, deps.owner);
  try {
    if (pod === null) {
      const executor = new LocalExecutor({ clock: deps.clock });
      try {
        await cancelJob(executor, run.remoteDir, { signal });
        if (lock !== null && (await jobStatus(executor, run.remoteDir)).kind === 'cancelled') {
          run.state = 'cancelled';
          deps.store.saveRun(run);
          publishState(deps, run);
        }
        return { run, pod: null, ending: null, summary: summaryLine(deps, run, null) };
      } finally {
        executor.dispose();
      }
    }
    const ctx = podCtx(deps);
    const executor = await reconnect(ctx, pod, run, signal);
    if (executor === null)
      throw new FlowError(`run ${runId}: no pod left, nothing to cancel`, null);
    try {
      const result = await cancelJob(executor, run.remoteDir, { signal });
      if (result === 'already_ended') {
        log(
          ctx,
          'info',
          `the job of run ${runId} had already ended: collect it with \`overbrainer train attach ${runId}\``,
        );
      }
      const status = await jobStatus(executor, run.remoteDir);
      if (status.kind !== 'cancelled' || lock === null) {
        // Another client follows the run: it sees the cancel and collects the results.
        return { run, pod, ending: null, summary: summaryLine(deps, run, pod) };
      }
      return await collect(
        ctx,
        deps,
        executor,
        run,
        pod,
        { state: 'cancelled', message: null },
        artifactsOf(config),
      );
    } finally {
      executor.dispose();
    }
  } finally {
    lock?.dispose();
  }
}

/** What {@link stop} did: the request, and the run's end when this client followed it there. */
export interface StopResult {
  request: RequestResult;
  /** Null when another client follows the run: that one brings the snapshot home. */
  result: FlowResult | null;
}

/**
 * Stops a running job with a snapshot (spec §9 `train stop`): asks the job for one
 * (`snapshot.request`, reason `requested`); the trainer saves a checkpoint at its next step end
 * and exits. When no other client follows the run, this one follows it to that end, brings the
 * checkpoint and the results home verified and ends the pod (as attach does); the run is recorded
 * `stopped` with the snapshot's step. A job that already ended is collected the same way.
 */
export async function stop(
  deps: FlowDeps,
  config: OverbrainerConfig | null,
  runId: string,
  signal?: AbortSignal,
): Promise<StopResult> {
  const request = await requestStop(deps, runId, signal);
  const holder = deps.store.lockHolder(runId);
  if (holder !== null && holder.stale === null) return { request, result: null };
  return { request, result: await attach(deps, config, runId, signal) };
}

/**
 * The first half of {@link stop}: asks the running job of `runId` for a snapshot and says so,
 * without following it (a front end that follows the run already, or attaches after, brings the
 * snapshot home).
 */
export async function requestStop(
  deps: FlowDeps,
  runId: string,
  signal?: AbortSignal,
): Promise<RequestResult> {
  const run = deps.store.loadRun(runId);
  if (run.job === null) {
    throw new FlowError(
      `run ${runId} has not started: there is no job to stop`,
      run.state === 'preparing'
        ? 'Wait until its job runs, or cancel it.'
        : 'Only a running job can be stopped.',
    );
  }
  if (run.state !== 'running') {
    throw new FlowError(`run ${runId} already ended: ${run.state}`, null);
  }
  const pod = deps.store.loadPod(runId);
  let executor: Executor | null;
  if (pod === null) {
    executor = new LocalExecutor({ clock: deps.clock });
  } else {
    executor = await reconnect(podCtx(deps), pod, run, signal);
    if (executor === null) {
      throw new FlowError(`run ${runId}: no pod left, nothing to stop`, null);
    }
  }
  let request: RequestResult;
  try {
    request = await requestSnapshot(executor, run.remoteDir, 'requested', { signal });
  } finally {
    executor.dispose();
  }
  const said =
    request.kind === 'ended'
      ? `the job of run ${runId} had already ended`
      : request.kind === 'already_requested'
        ? `the job of run ${runId} was already asked for a snapshot (${request.reason})`
        : `asked the job of run ${runId} for a snapshot: it saves a checkpoint at its next step end and stops (a trainer that does not honour snapshot requests runs on: cancel it instead)`;
  deps.bus.publish({ type: 'log', level: 'info', message: said });
  return request;
}

/**
 * Keeps (or releases) the pod of a run at runtime. A release whose job already ended while
 * nobody followed collects the run here (retrieves and verifies its results, then deletes the
 * pod, as attach would): left to its watchdog, a pod past its deadline would be deleted with
 * results nobody brought home. `config` gives the artifacts to bring back (the defaults without).
 */
export async function keepPod(
  deps: FlowDeps,
  runId: string,
  keep: boolean,
  config: OverbrainerConfig | null = null,
): Promise<PodRecord> {
  const run = deps.store.loadRun(runId);
  const pod = deps.store.loadPod(runId);
  if (pod === null || pod.podId === null || pod.state === 'deleted') {
    throw new FlowError(`run ${runId} has no pod to ${keep ? 'keep' : 'release'}`, null);
  }
  if (!['running', 'awaiting_retrieval', 'kept', 'ready'].includes(pod.state)) {
    throw new FlowError(
      `the pod of run ${runId} is ${pod.state}: only a running or awaiting pod can be ${keep ? 'kept' : 'released'}`,
      null,
    );
  }
  // A pod kept at creation carries OVERBRAINER_KEEP_POD=1 and no deadline in its env: removing
  // the runtime keep marker would leave its watchdog keeping it while pod.json said released.
  if (!keep && pod.keep && pod.deadlineUnixS === null) {
    throw new FlowError(
      `pod ${pod.podId} of run ${runId} was kept when it was created (--keep-pod): its watchdog never deletes it, so it cannot be released`,
      `Remove it with "overbrainer pod rm ${runId}" when you no longer need it.`,
    );
  }
  const ctx = podCtx(deps);
  const executor = await reconnect(ctx, pod, run);
  if (executor === null)
    throw new FlowError(`pod ${pod.podId} of run ${runId} no longer exists`, null);
  let ended: boolean;
  try {
    await setKeep(ctx, pod, run, executor, keep);
    ended =
      !keep &&
      // setKeep deletes a released pod whose results were already retrieved.
      (pod.state as PodRecord['state']) !== 'deleted' &&
      (await jobStatus(executor, run.remoteDir)).kind !== 'running' &&
      deps.store.lockHolder(runId) === null;
  } finally {
    executor.dispose();
  }
  if (!ended) return pod;
  log(
    ctx,
    'info',
    `the job of run ${runId} has ended: retrieving its results, then deleting the pod`,
  );
  const collected = await attach(deps, config, runId);
  return collected.pod ?? pod;
}

/** A run {@link recoverAbandoned} found left `preparing`, and what became of it. */
export interface Recovered {
  runId: string;
  result: FlowResult | null;
  /** Why it could not be settled (it stays `preparing`; attach retries). */
  error: unknown;
}

/**
 * Finds the runs left `preparing` by a client that died before their job started (a window
 * closed, a CLI killed: no live client holds their lock) and settles each at the next start of
 * the CLI or the extension, as attach does: the pods carrying its marker are deleted, the keys
 * forgotten, and the run fails `interrupted before the job started` (a run that never recorded a
 * pod fails so at once). None is left `preparing` silently; one that cannot be settled is
 * returned with its error.
 */
export async function recoverAbandoned(
  deps: FlowDeps,
  config: OverbrainerConfig | null,
): Promise<Recovered[]> {
  const recovered: Recovered[] = [];
  for (const run of deps.store.list().runs) {
    if (run.state !== 'preparing') continue;
    const holder = deps.store.lockHolder(run.id);
    if (holder !== null && holder.stale === null) continue;
    try {
      if (deps.store.loadPod(run.id) === null) {
        run.state = 'failed';
        run.message = 'interrupted before the job started';
        deps.store.saveRun(run);
        publishState(deps, run);
        recovered.push({
          runId: run.id,
          result: { run, pod: null, ending: null, summary: summaryLine(deps, run, null) },
          error: null,
        });
        continue;
      }
      recovered.push({ runId: run.id, result: await attach(deps, config, run.id), error: null });
    } catch (error) {
      recovered.push({ runId: run.id, result: null, error });
    }
  }
  return recovered;
}
