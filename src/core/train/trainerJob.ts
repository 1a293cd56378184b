/** The job a run's `[training]` starts: Axolotl on the run's `axolotl.yaml` (then its merge), or a command. */
import type { TrainingConfig } from '../config/types';
import { MERGED_DIR, type TrainerJob } from './jobScripts';
import type { HubJob } from './hubPush';
import { mergeEstimateS } from './mergeEstimate';
import { torchrunCommand } from './torchrun';

/** The config every Axolotl run trains on, in its run directory (the user's, or generated). */
export const RUN_AXOLOTL_CONFIG = 'axolotl.yaml';

/** The job of `training` with Axolotl from `venv` (empty where the target fills it in later). */
export function trainerJobOf(training: TrainingConfig, venv: string): TrainerJob {
  const trainer = training.trainer;
  const hub = hubJobOf(training);
  if (trainer.kind === 'command') {
    const command =
      trainer.launcher === 'torchrun' ? torchrunCommand(trainer.command) : trainer.command;
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
