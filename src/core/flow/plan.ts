/**
 * What a run of `[training]` will do, in lines both front ends show before it starts (`train
 * --dry-run`, VS Code's Train confirmation): the Axolotl config (generated from the model keys,
 * in full, or the user's own file), the LoRA merge after training, the push to the Hub at the end.
 */
import type { OverbrainerConfig } from '../config/types';
import { mergeEstimateS } from '../train/mergeEstimate';
import { hubJobOf, RUN_AXOLOTL_CONFIG } from '../train/trainerJob';
import { MERGED_DIR } from '../train/jobScripts';
import { generatedAxolotlConfig } from './runFiles';

export function trainingPlanLines(config: OverbrainerConfig, workspaceDir: string): string[] {
  const training = config.training;
  if (!training) return [];
  const lines: string[] = [];
  const trainer = training.trainer;
  if (trainer.kind === 'command') {
    // The command is in overbrainer.toml as the user wrote it: nothing to add.
  } else if (trainer.configPath !== null) {
    lines.push(
      `Axolotl config: your own ${trainer.configPath} (uploaded as ${RUN_AXOLOTL_CONFIG})`,
    );
  } else {
    const yaml = generatedAxolotlConfig(config, workspaceDir) ?? '';
    lines.push(`Axolotl config generated from [training] (uploaded as ${RUN_AXOLOTL_CONFIG}):`);
    for (const line of yaml.trimEnd().split('\n')) lines.push(`  ${line}`);
  }
  if (training.merge && trainer.kind === 'axolotl') {
    const minutes = Math.max(1, Math.round(mergeEstimateS(trainer.model?.baseModel ?? null) / 60));
    lines.push(
      `After training: Axolotl's LoRA merge into ${MERGED_DIR}/ (about ${minutes} min), retrieved and verified with the rest`,
    );
  }
  const hub = hubJobOf(training);
  if (hub !== null) {
    lines.push(
      `At the job's end: ${hub.folder}/ pushed from the pod to the Hub as ${hub.repoId} (${hub.endpoint}), with your HF token; a failed push keeps the results`,
    );
  }
  return lines;
}
