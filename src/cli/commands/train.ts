/**
 * `train …`: start a run and follow it (or only quote it: --dry-run), follow one again
 * (attach), stop it with a snapshot, cancel it, keep or release its pod. Ctrl-C as the run
 * lifecycle says: before the job starts the pod is deleted and the run failed; once the job
 * runs only the following stops; a delete is never interrupted.
 */
import {
  afterTrainingS,
  attach,
  beforeTrain,
  cancel,
  chooseTarget,
  CONFIG_FILE,
  keepPod,
  nodesProblem,
  liveQuote,
  quoteLines,
  stop,
  train,
  trainingPlanLines,
} from '../../core/flow';
import { sshCommand } from '../../core/flow/ssh';
import { ConfigProblem, EXIT_FAILED, EXIT_OK, Interrupts, type Session } from '../session';

/**
 * `train --dry-run`: the quote and the plan (GPU types in order with rates and stock, data
 * centers, volume) from the live catalog. Read-only: no run directory, no pod, no secret.
 */
export async function dryRun(s: Session, targetName: string | null): Promise<number> {
  const config = s.config(true)!;
  const { name, target } = chooseTarget(config, targetName);
  if (target === undefined) {
    throw new ConfigProblem([
      `no target ${name ?? '(none given)'} in ${CONFIG_FILE}: name one with --target`,
    ]);
  }
  const problem = config.training ? nodesProblem(config.training, target) : null;
  if (problem !== null) throw new ConfigProblem([`${problem.message}. ${problem.hint}`]);
  const plan = trainingPlanLines(config, s.dir);
  if (target.kind !== 'runpod') {
    s.io.stdout(
      target.kind === 'ssh'
        ? `dry run: target ${target.name} runs on your own machine over SSH: Overbrainer bills nothing there`
        : `dry run: target ${target.name} runs on this machine: it costs nothing`,
    );
    for (const line of plan) s.io.stdout(line);
    return EXIT_OK;
  }
  const client = s.api(true)!;
  const q = await s.readOnly(client, (api, signal) =>
    liveQuote(api, s.store, s.timingOf(), target, { signal, afterS: afterTrainingS(config) }),
  );
  s.io.stdout(`dry run: target ${target.name}; nothing is created`);
  s.io.stdout(
    `GPU types, in the order tried (${target.gpuCount} GPU${target.gpuCount === 1 ? '' : 's'}${target.nodes > 1 ? ` on each of ${target.nodes} nodes` : ''}):`,
  );
  if (q.rates.length === 0) s.io.stdout('  none in stock within the limits');
  q.rates.forEach((r, i) =>
    s.io.stdout(
      `  ${i + 1}. ${r.gpuType}  ${r.usdPerHour === null ? 'no price' : `$${r.usdPerHour.toFixed(2)}/h`}  stock ${r.availability ?? 'unknown'}`,
    ),
  );
  s.io.stdout(
    `Data centers: ${target.dataCenterIds === 'auto' || target.dataCenterIds.length === 0 ? 'any' : target.dataCenterIds.join(', ')}`,
  );
  s.io.stdout(
    `Volume: ${target.networkVolumeId === null ? 'none' : `network volume ${target.networkVolumeId} at /workspace/data`}; container disk ${target.containerDiskGb} GB`,
  );
  for (const line of plan) s.io.stdout(line);
  for (const line of quoteLines(q)) s.io.stdout(line);
  return EXIT_OK;
}

export async function trainCommand(
  s: Session,
  targetName: string | null,
  keepPodFlag: boolean,
  resumeFrom: string | null,
): Promise<number> {
  if (resumeFrom !== null) s.store.runDir(resumeFrom); // refused first if it would leave runs/
  const config = s.config(true)!;
  const { target } = chooseTarget(config, targetName);
  const client = s.api(target?.kind === 'runpod');
  // The pods nothing will delete, the secrets ended runs left (a Runpod target), the runs a dead
  // client left (on a target without pods, those that have none).
  await beforeTrain(s.deps(target?.kind === 'runpod' ? client : null), config);
  s.interrupts = new Interrupts(s.io, s.renderer, (jobStarted) =>
    jobStarted
      ? 'stopping to follow the run; its job and pod keep running'
      : "stopping: the run's pod is deleted, since its job has not started (a delete is never interrupted)",
  );
  s.listenForRun();
  const result = await train(s.deps(client), config, s.dir, {
    target: targetName ?? undefined,
    keepPod: keepPodFlag,
    resumeFrom: resumeFrom ?? undefined,
    signal: s.interrupts.signal,
    onRun: (run) => {
      s.runId = run.id;
      s.io.stderr(`train: run ${run.id} on target ${run.target} (runs/${run.id})`);
    },
  });
  return s.finished(result);
}

export async function attachOrCancel(
  s: Session,
  kind: 'attach' | 'cancel',
  runId: string,
): Promise<number> {
  s.store.runDir(runId); // an ID that would leave runs/ is refused first
  const config = s.config(false);
  const client = s.api(s.hasPodRecord(runId));
  s.runId = runId;
  s.interrupts = new Interrupts(s.io, s.renderer, () =>
    kind === 'attach'
      ? 'stopping to follow the run; its job and pod keep running'
      : 'stopping; a cancel already sent still ends the job',
  );
  s.interrupts.jobStarted = true;
  if (kind === 'attach') {
    return s.finished(await attach(s.deps(client), config, runId, s.interrupts.signal));
  }
  const result = await cancel(s.deps(client), config, runId, s.interrupts.signal);
  s.renderer.flush();
  s.io.stdout(result.summary);
  s.summaryPrinted = true;
  // Success is the run ending cancelled; another client following it collects it then.
  return result.run.state === 'cancelled' || result.run.state === 'running' ? EXIT_OK : EXIT_FAILED;
}

/** `train stop`: a snapshot is asked for; success is the run ending `stopped`. */
export async function stopRun(s: Session, runId: string): Promise<number> {
  s.store.runDir(runId);
  const config = s.config(false);
  const client = s.api(s.hasPodRecord(runId));
  s.runId = runId;
  s.interrupts = new Interrupts(
    s.io,
    s.renderer,
    () => 'stopping to follow the run; the snapshot asked for is still saved and its job stops',
  );
  s.interrupts.jobStarted = true;
  const { result } = await stop(s.deps(client), config, runId, s.interrupts.signal);
  s.renderer.flush();
  if (result === null) {
    s.io.stdout(
      `train: run ${runId} asked for a snapshot; the client following it brings the snapshot home`,
    );
    s.summaryPrinted = true;
    return EXIT_OK;
  }
  s.io.stdout(result.summary);
  s.summaryPrinted = true;
  return result.run.state === 'stopped' ? EXIT_OK : EXIT_FAILED;
}

export async function keepCommand(s: Session, runId: string, keep: boolean): Promise<number> {
  s.store.runDir(runId);
  const client = s.api(true);
  const pod = await keepPod(s.deps(client), runId, keep, keep ? null : s.config(false));
  s.io.stdout(
    keep
      ? `pod: ${pod.podId ?? ''} kept: \`${sshCommand(runId)}\`; remove it with \`overbrainer pod rm ${runId}\`; nothing deletes it automatically`
      : pod.state === 'deleted'
        ? `pod: ${pod.podId ?? ''} released and deleted: the results of run ${runId} are retrieved`
        : `pod: ${pod.podId ?? ''} released: its watchdog's deadline (${pod.deadline ?? 'none'}) and graces apply again`,
  );
  return EXIT_OK;
}
