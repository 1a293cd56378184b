/** The job a run's `[training]` starts: Axolotl on the run's `axolotl.yaml` (then its merge), or a command. */
import type { TargetConfig, TrainingConfig } from '../config/types';
import { MERGED_DIR, type TrainerJob } from './jobScripts';
import type { HubJob } from './hubPush';
import { mergeEstimateS } from './mergeEstimate';
import { torchrunCommand, torchrunStandaloneCommand } from './torchrun';

/** The config every Axolotl run trains on, in its run directory (the user's, or generated). */
export const RUN_AXOLOTL_CONFIG = 'axolotl.yaml';

/**
 * The job of `training` on `target` with Axolotl from `venv` (empty where the target fills it in
 * later). A torchrun launch runs standalone on one pod, a process per GPU, and on every node of
 * a cluster from Runpod's variables (a launcher on this machine is refused before: nodesProblem).
 */
export function trainerJobOf(
  training: TrainingConfig,
  venv: string,
  target: TargetConfig,
): TrainerJob {
  const trainer = training.trainer;
  const hub = hubJobOf(training);
  if (trainer.kind === 'command') {
    const onePod = target.kind === 'runpod' && target.nodes < 2;
    const command =
      trainer.launcher !== 'torchrun'
        ? trainer.command
        : onePod
          ? torchrunStandaloneCommand(trainer.command, target.gpuCount)
          : torchrunCommand(trainer.command);
    return { trainer: 'command', command, ...(hub === null ? {} : { hub }) };
  }
  const job: TrainerJob = { trainer: 'axolotl', config: RUN_AXOLOTL_CONFIG, venv };
  if (training.merge) {
    job.merge = true;
    job.afterS = mergeEstimateS(trainer.model?.baseModel ?? null);
  }
  if (hub !== null) job.hub = hub;
  return job;
}

/**
 * The push of `hub_model_id`, or null: `output/merged/` when Axolotl merges the LoRA
 * (`merge = true`), else `output/`.
 */
export function hubJobOf(training: TrainingConfig): HubJob | null {
  if (training.hubModelId === null) return null;
  const merged = training.merge && training.trainer.kind === 'axolotl';
  return {
    repoId: training.hubModelId,
    endpoint: training.hubEndpoint ?? 'https://huggingface.co',
    folder: merged ? MERGED_DIR : 'output',
  };
}
