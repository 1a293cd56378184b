/**
 * `runs show RUN_ID`: one run from its records (run.json, pod.json, metrics.jsonl once back),
 * no API call: state, target, pod, spend, steps, last loss, ETA or outcome, output path, and the
 * CLI commands that come next. {@link runView} gathers the facts, {@link spendWords} words the
 * spend (in one place, so a richer spend source can replace it), {@link runShowLines} and
 * {@link runShowJson} print them.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { TrainMetric } from '../../core/events';
import { type OverbrainerConfig } from '../../core/flow/config';
import {
  type PodRecord,
  type RunRecord,
  type RunStore,
  METRICS_FILE,
  readMetricsFile,
  Pace,
  gpuLine,
  gpuReadingJson,
  readGpuSummary,
  type GpuSummary,
  clusterNodeLines,
  clusterToWire,
} from '../../core/flow/records';
import { runSpendLines } from '../../core/flow/spend';
import {
  KeysError,
  sshCommand,
  hasShell,
  opensshCommandLine,
  prepareSshAccess,
  sshClientFor,
  SshAccessError,
} from '../../core/flow/ssh';
import { durationWords, usd } from '../format';
import { EXIT_FAILED, EXIT_OK, printJson, type Session } from '../session';
import { describeError } from '../../core/errors';

export interface RunView {
  run: RunRecord;
  pod: PodRecord | null;
  /** Why pod.json could not be read, when it could not. */
  podProblem: string | null;
  /** From the local metrics.jsonl (back with the results, or written here by a local run). */
  step: number | null;
  maxSteps: number | null;
  lastLoss: number | null;
  /** Milliseconds left at the measured pace; null once ended or unknown. */
  etaMs: number | null;
  /** runs/RUN_ID/output when it holds files. */
  outputPath: string | null;
  /** How to open a shell on the run's pod, when it has one ({@link shellWords}). */
  ssh?: ShellWords | null;
  /** What the GPUs did while the run was followed (`.pod/gpu.json`), or null. */
  gpu?: GpuSummary | null;
}

/** The shell on a run's pod: a command to type, or why there is none. */
export type ShellWords =
  | { client: 'openssh' | 'builtin'; command: string; refused: null }
  | { client: 'openssh' | 'builtin'; command: null; refused: string };

/**
 * How to open a shell on the pod of `view`, or null when it has none: with `ssh_client =
 * "openssh"`, the system `ssh` command as it is to be typed in `cwd` (no configuration file,
 * every option on its line; known_hosts written afresh now); with `builtin`, `overbrainer runs
 * ssh`, since no system command uses Overbrainer's own client. A run folder Overbrainer did not
 * write is refused, said in `refused`.
 */
export function shellWords(
  store: RunStore,
  view: RunView,
  config: OverbrainerConfig | null,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): ShellWords | null {
  if (!hasShell(view.pod)) return null;
  const client = sshClientFor(config, view.run.target, env);
  try {
    const access = prepareSshAccess(store, view.pod);
    const command =
      client === 'openssh' ? opensshCommandLine(access, cwd) : sshCommand(view.run.id);
    return { client, command, refused: null };
  } catch (error) {
    if (!(error instanceof SshAccessError) && !(error instanceof KeysError)) throw error;
    return { client, command: null, refused: `${error.message}. ${error.hint}` };
  }
}

/** Reads what the run's records say. */
export async function runView(store: RunStore, runId: string): Promise<RunView> {
  const run = store.loadRun(runId);
  let pod: PodRecord | null = null;
  let podProblem: string | null = null;
  try {
    pod = store.loadPod(runId);
  } catch (error) {
    podProblem = `pod record unreadable (${describeError(error)})`;
  }
  const dir = store.runDir(runId);
  const metrics = await readMetricsFile(path.join(dir, METRICS_FILE));
  const pace = new Pace();
  let lastLoss: number | null = null;
  let last: TrainMetric | null = null;
  for (const metric of metrics?.metrics ?? []) {
    pace.add(metric);
    last = metric;
    if (typeof metric.loss === 'number') lastLoss = metric.loss;
  }
  const progress = pace.progress();
  const output = path.join(dir, 'output');
  const hasOutput = fs.existsSync(output) && fs.readdirSync(output).length > 0;
  return {
    run,
    pod,
    podProblem,
    step: progress?.step ?? last?.step ?? null,
    maxSteps: progress?.maxSteps ?? last?.maxSteps ?? null,
    lastLoss,
    etaMs: run.state === 'running' ? pace.eta() : null,
    outputPath: hasOutput ? path.join('runs', runId, 'output') : null,
    gpu: readGpuSummary(dir),
  };
}

/**
 * The GPUs' newest sample, one line per GPU, and what was found of their use (an idle GPU, a card
 * far larger than the job), each with the rate it wastes.
 */
export function gpuLines(gpu: GpuSummary | null | undefined): string[] {
  if (gpu === null || gpu === undefined) return [];
  const lines: string[] = [];
  if (gpu.last !== null) {
    lines.push(
      `  gpu:     sampled ${new Date(gpu.last.timeMs).toISOString().replace(/\.\d+Z$/, 'Z')} (${gpu.samples} sample${gpu.samples === 1 ? '' : 's'} while followed)`,
    );
    for (const reading of gpu.last.gpus) {
      lines.push(
        `    gpu ${reading.index}${reading.name ? ` (${reading.name})` : ''}: ${gpuLine(reading)}`,
      );
    }
  }
  for (const finding of gpu.findings) lines.push(`  warning: ${finding.message}`);
  return lines;
}

/** The run's spend in words: the estimate, and what Runpod billed once read. */
export function spendWords(pod: PodRecord | null): string {
  if (pod === null) return 'none (no pod)';
  const parts: string[] = [];
  if (pod.estimatedSpendUsd !== null) parts.push(`about ${usd(pod.estimatedSpendUsd)} estimated`);
  else if (pod.costPerHourUsd !== null) parts.push(`${usd(pod.costPerHourUsd)}/h, still billing`);
  if (pod.billedUsd !== null) parts.push(`${usd(pod.billedUsd)} billed by Runpod`);
  else if (pod.state === 'deleted')
    parts.push('billed: not read yet (`overbrainer spend` reads it)');
  return parts.length === 0 ? 'not known yet' : parts.join('; ');
}

/** The CLI commands that make sense next for the run. */
export function nextCommands(view: RunView): string[] {
  const id = view.run.id;
  const podLive = view.pod !== null && view.pod.podId !== null && view.pod.state !== 'deleted';
  switch (view.run.state) {
    case 'preparing':
    case 'running':
      return [
        `overbrainer train attach ${id}   follow it, retrieve its results, end its pod`,
        `overbrainer train stop ${id}     stop it with a snapshot to resume from`,
        `overbrainer train cancel ${id}   cancel it`,
        `overbrainer runs logs ${id}      its job's log`,
      ];
    case 'stopped':
      return [
        `overbrainer train --resume-from ${id}   resume it from its snapshot`,
        ...(podLive ? [`overbrainer pod rm ${id}   delete its pod`] : []),
      ];
    default:
      return [
        `overbrainer runs logs ${id}   its job's log`,
        ...(hasShell(view.pod) ? [`overbrainer runs ssh ${id}   open a shell on its pod`] : []),
        ...(podLive ? [`overbrainer pod rm ${id}   delete its kept pod`] : []),
      ];
  }
}

/**
 * `runs show` as lines. `spendLines` (the core's runSpendLines: so far, at the ETA, the cost cap,
 * what is left of the project's budget) replace the short spend line when there are any.
 */
export function runShowLines(view: RunView, spendLines: readonly string[] = []): string[] {
  const { run, pod } = view;
  const lines = [
    `run ${run.id}`,
    `  state:   ${run.state}${run.message ? ` (${run.message})` : ''}`,
  ];
  lines.push(`  target:  ${run.target}`, `  created: ${run.created}`);
  if (view.podProblem !== null) lines.push(`  pod:     ${view.podProblem}`);
  else if (pod === null) lines.push('  pod:     none');
  else {
    const where = [pod.gpuType, pod.dataCenterId].filter((x) => x !== null).join(', ');
    lines.push(
      `  pod:     ${pod.podId ?? '(none created)'} ${pod.state}${where ? ` (${where})` : ''}${pod.keep ? ', kept' : ''}`,
    );
    if (pod.deadline !== null && pod.state !== 'deleted')
      lines.push(`  deadline: deleted by ${pod.deadline} at the latest`);
  }
  const cluster = run.cluster ?? null;
  if (cluster !== null) {
    lines.push(
      `  cluster: ${cluster.id} (${cluster.name}), ${cluster.nodes.length} nodes of ${cluster.gpuCountPerPod} × ${cluster.gpuTypeId}${cluster.costPerHourUsd === null ? '' : `, $${(cluster.costPerHourUsd * cluster.nodes.length).toFixed(2)}/h for all`}${cluster.deletedAt === null ? '' : `, deleted ${cluster.deletedAt}`}`,
    );
    for (const line of clusterNodeLines(cluster)) lines.push(`    ${line}`);
  }
  const ssh = view.ssh ?? null;
  if (ssh !== null) {
    lines.push(
      ssh.command === null
        ? `  ssh:     refused: ${ssh.refused}`
        : `  ssh:     ${ssh.command}${ssh.client === 'builtin' ? '   (ssh_client = "builtin": no system ssh command)' : ''}`,
    );
  }
  if (spendLines.length === 0) lines.push(`  spend:   ${spendWords(pod)}`);
  else lines.push(...spendLines.map((line) => `  ${line}`));
  if (view.step !== null) {
    lines.push(
      `  steps:   ${view.step}${view.maxSteps !== null ? `/${view.maxSteps}` : ''}` +
        (view.lastLoss !== null ? `, last loss ${view.lastLoss.toFixed(4)}` : ''),
    );
  } else if (run.state === 'running') {
    lines.push('  steps:   not here yet (they come back with the results; follow it to see them)');
  }
  if (run.state === 'running' || run.state === 'preparing') {
    lines.push(`  eta:     ${view.etaMs === null ? 'unknown' : durationWords(view.etaMs)}`);
  } else {
    lines.push(`  outcome: ${run.state}${run.message ? `: ${run.message}` : ''}`);
  }
  lines.push(...gpuLines(view.gpu));
  if (run.snapshot)
    lines.push(`  snapshot: step ${run.snapshot.step} (${run.snapshot.checkpoint})`);
  lines.push(`  output:  ${view.outputPath ?? 'none yet'}`);
  lines.push('next:');
  for (const command of nextCommands(view)) lines.push(`  ${command}`);
  return lines;
}

/** `runs show --json`. */
export function runShowJson(view: RunView): Record<string, unknown> {
  const { run, pod } = view;
  return {
    run_id: run.id,
    state: run.state,
    message: run.message,
    target: run.target,
    created: run.created,
    pod:
      pod === null
        ? null
        : {
            pod_id: pod.podId,
            state: pod.state,
            gpu_type: pod.gpuType,
            data_center_id: pod.dataCenterId,
            usd_per_hour: pod.costPerHourUsd,
            kept: pod.keep,
            deadline: pod.deadline,
          },
    pod_problem: view.podProblem,
    nodes: run.cluster?.nodes.length ?? 1,
    cluster: run.cluster ? clusterToWire(run.cluster) : null,
    spend: {
      estimated_usd: pod?.estimatedSpendUsd ?? null,
      billed_usd: pod?.billedUsd ?? null,
    },
    step: view.step,
    max_steps: view.maxSteps,
    last_loss: view.lastLoss,
    eta_seconds: view.etaMs === null ? null : Math.round(view.etaMs / 1000),
    output_path: view.outputPath,
    gpu: gpuJson(view.gpu ?? null),
    ssh:
      view.ssh === undefined || view.ssh === null
        ? null
        : { client: view.ssh.client, command: view.ssh.command, refused: view.ssh.refused },
    next: nextCommands(view).map((line) => line.split(/\s{2,}/)[0]?.trim() ?? line),
  };
}

function gpuJson(gpu: GpuSummary | null): Record<string, unknown> | null {
  if (gpu === null) return null;
  return {
    sampled_at: gpu.last === null ? null : new Date(gpu.last.timeMs).toISOString(),
    samples: gpu.samples,
    gpus: (gpu.last?.gpus ?? []).map(gpuReadingJson),
    findings: gpu.findings.map((f) => ({
      code: f.code,
      message: f.message,
      wasted_usd_per_hour: f.wastedUsdPerHour,
    })),
  };
}

/** The command. */
export async function runsShow(s: Session, runId: string, json: boolean): Promise<number> {
  const dir = s.store.runDir(runId); // an ID that would leave runs/ is refused first
  if (!fs.existsSync(path.join(dir))) {
    s.io.stderr(
      `runs show: no run ${runId} in ${s.store.runsDir} (overbrainer runs ls lists them)`,
    );
    return EXIT_FAILED;
  }
  const view = await runView(s.store, runId);
  let config: OverbrainerConfig | null = null;
  try {
    config = s.config(false);
  } catch {
    // A broken overbrainer.toml does not hide the run: its spend is shown without the budget.
  }
  view.ssh = shellWords(s.store, view, config, s.env, s.io.cwd);
  if (json) return printJson(s, runShowJson(view));
  const budget = config?.budget ?? null;
  const spend = runSpendLines(s.store, runId, budget, s.clock.nowMs(), { etaMs: view.etaMs });
  for (const line of runShowLines(view, spend)) s.io.stdout(line);
  return EXIT_OK;
}
