/**
 * A new run's files: what `[training] upload` lists (checked before any pod exists, copied into the
 * run directory while the pod boots), the metrics plugin, the trainer's config, and a resumed
 * run's checkpoint.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { EVAL_DATA, uploadHolds, type OverbrainerConfig, type TargetConfig } from '../config/types';
import { axolotlYaml } from '../train/axolotlConfig';
import { HUB_SCRIPT } from '../train/hubPush';
import { RUN_AXOLOTL_CONFIG, trainerJobOf } from '../train/trainerJob';
import type { RunRecord } from '../runs/runRecord';
import type { TrainerJob } from '../train/job';
import { placeResumeCopy } from '../train/resumeCopy';
import { type FlowDeps, FlowError } from './deps';

/** Where the shipped metrics plugin is: next to the bundle (dist/python) or in the source tree. */
export function pluginSource(): string {
  return pythonSource('overbrainer_metrics.py');
}

/** A shipped Python file (the metrics plugin, the Hub push): next to the bundle or in the source tree. */
function pythonSource(name: string): string {
  const candidates = [
    path.join(__dirname, 'python', name),
    path.join(__dirname, '..', '..', '..', 'python', name),
  ];
  const found = candidates.find((file) => fs.existsSync(file));
  if (!found)
    throw new FlowError(
      'install_broken',
      `${name === 'overbrainer_metrics.py' ? 'the metrics plugin' : name} is missing from this installation`,
      'Reinstall the extension.',
    );
  return found;
}

/** The run's files, checked and their small part in place: the big copy is {@link packRun}'s. */
export interface RunFiles {
  job: TrainerJob;
  /** The `[training] upload` entries, relative to the workspace (and to the run directory). */
  entries: string[];
}

/**
 * Checks `[training] upload` (inside the workspace, present) and puts the small files into the
 * run directory (the plugin, the trainer's config). Throws a FlowError naming the entry.
 */
export function checkRunFiles(
  config: OverbrainerConfig,
  /** Where the run trains: a torchrun launch's line depends on it. */
  target: TargetConfig,
  workspaceDir: string,
  runDir: string,
): RunFiles {
  const training = config.training;
  if (!training) {
    throw new FlowError(
      'bad_config',
      'overbrainer.toml has no [training] section',
      'Add one (see the commented template).',
    );
  }
  const entries: string[] = [];
  for (const entry of training.upload) {
    const source = path.resolve(workspaceDir, entry);
    const rel = path.relative(workspaceDir, source);
    if (rel.startsWith('..') || path.isAbsolute(rel)) {
      throw new FlowError(
        'bad_upload',
        `upload entry ${entry} is outside the workspace`,
        'List files inside the workspace.',
      );
    }
    if (!fs.existsSync(source)) {
      throw new FlowError(
        'bad_upload',
        `upload entry ${entry} does not exist`,
        `Create ${entry} or remove it from [training] upload.`,
      );
    }
    const special = specialFile(source);
    if (special !== null) {
      const name = path.relative(workspaceDir, special);
      throw new FlowError(
        'bad_upload',
        `upload entry ${entry} holds ${name}, which is not a regular file, a directory or a link (a FIFO, a socket or a device cannot be copied)`,
        `Move ${name} out of ${entry}, or list only what to send in [training] upload.`,
      );
    }
    entries.push(rel);
  }
  fs.mkdirSync(path.join(runDir, 'plugin'), { recursive: true });
  fs.copyFileSync(pluginSource(), path.join(runDir, 'plugin', 'overbrainer_metrics.py'));
  if (training.hubModelId !== null) {
    fs.copyFileSync(pythonSource(HUB_SCRIPT), path.join(runDir, 'plugin', HUB_SCRIPT));
  }
  if (training.trainer.kind === 'axolotl') {
    const generated = generatedAxolotlConfig(config, workspaceDir);
    const into = path.join(runDir, RUN_AXOLOTL_CONFIG);
    if (generated !== null) fs.writeFileSync(into, generated);
    else if (training.trainer.configPath !== null)
      fs.copyFileSync(path.join(workspaceDir, training.trainer.configPath), into);
  }
  return { job: trainerJobOf(training, '', target), entries };
}

/**
 * The Axolotl config Overbrainer generates from `[training]`'s model keys (what the run uploads as
 * `axolotl.yaml`, `train --dry-run` prints and Train's confirmation shows); null when the config
 * is the user's own YAML, or the trainer a command.
 */
export function generatedAxolotlConfig(
  config: OverbrainerConfig,
  workspaceDir: string,
): string | null {
  const training = config.training;
  if (training?.trainer.kind !== 'axolotl' || training.trainer.model === null) return null;
  return axolotlYaml(training.trainer.model, {
    evalData: evalDataUploaded(config, workspaceDir),
  });
}

/** Whether `data/eval.jsonl` is uploaded (then a generated config evaluates on it). */
export function evalDataUploaded(config: OverbrainerConfig, workspaceDir: string): boolean {
  return (
    uploadHolds(config.training?.upload ?? [], EVAL_DATA) &&
    fs.existsSync(path.join(workspaceDir, ...EVAL_DATA.split('/')))
  );
}

/**
 * The first file under `entry` (itself included) the copy cannot take, or null. Checked before
 * any pod exists, since the copy runs while the pod boots; links are not followed.
 */
function specialFile(entry: string): string | null {
  const stats = fs.lstatSync(entry);
  if (stats.isDirectory()) {
    for (const name of fs.readdirSync(entry)) {
      const found = specialFile(path.join(entry, name));
      if (found !== null) return found;
    }
    return null;
  }
  return stats.isFile() || stats.isSymbolicLink() ? null : entry;
}

/**
 * Copies the checked upload entries into the run directory (asynchronously: the pod boots
 * meanwhile), then places a resumed run's checkpoint. Resolves with the job's extra env.
 */
export async function packRun(
  deps: FlowDeps,
  run: RunRecord,
  workspaceDir: string,
  files: RunFiles,
  resume: ResumeSource | null,
): Promise<Record<string, string>> {
  const runDir = deps.store.runDir(run.id);
  for (const rel of files.entries) {
    await fs.promises.cp(path.join(workspaceDir, rel), path.join(runDir, rel), {
      recursive: true,
      dereference: false,
      verbatimSymlinks: true,
    });
  }
  return resume === null ? {} : await placeResume(deps, run, resume, files.job);
}

/** Where a resumed run starts: the earlier run's snapshot, checked before anything is created. */
export interface ResumeSource {
  runId: string;
  step: number;
  /** The snapshot's checkpoint directory, as it came home under runs/<earlier run>/. */
  localDir: string;
}

export function resumeSource(deps: FlowDeps, runId: string): ResumeSource {
  const earlier = deps.store.loadRun(runId);
  if (earlier.state === 'running' || earlier.state === 'preparing') {
    throw new FlowError(
      'no_snapshot',
      `run ${runId} is still ${earlier.state}: it has no snapshot to resume from yet`,
      `Stop it first with \`overbrainer train stop ${runId}\` (VS Code: Stop and Snapshot), then resume.`,
    );
  }
  const snapshot = earlier.snapshot;
  if (!snapshot) {
    throw new FlowError(
      'no_snapshot',
      `run ${runId} ended ${earlier.state} without a snapshot: there is no checkpoint to resume from`,
      'Runs that were stopped (`overbrainer train stop`, Stop and Snapshot, or a limit the watchdog saw coming) have one; start this one afresh.',
    );
  }
  const localDir = path.join(deps.store.runDir(runId), snapshot.checkpoint);
  if (!fs.existsSync(localDir) || !fs.statSync(localDir).isDirectory()) {
    throw new FlowError(
      'no_snapshot',
      `the snapshot of run ${runId} (${snapshot.checkpoint}, step ${snapshot.step}) is not in runs/${runId}/: its results were not brought home`,
      `Bring them home with \`overbrainer train attach ${runId}\` while its pod still exists.`,
    );
  }
  return { runId, step: snapshot.step, localDir };
}

/**
 * Puts the earlier run's checkpoint into the new run's directory (`resume/checkpoint-N/`, uploaded
 * with it) and returns the job's env naming it where the job runs. The run records where it
 * resumes from before (train).
 */
function placeResume(
  deps: FlowDeps,
  run: RunRecord,
  source: ResumeSource,
  job: TrainerJob,
): Promise<Record<string, string>> {
  return placeResumeCopy(
    deps.store.runDir(run.id),
    run,
    job,
    source.localDir,
    `checkpoint-${source.step}`,
    `this run resumes run ${source.runId} from step ${source.step}`,
  );
}
