/**
 * Whether a `[training]` can run on a target of `nodes` nodes: a cluster (2 or more) runs the
 * command under torchrun on every node (`trainer = "command"`, `launcher = "torchrun"`); one pod
 * runs it under torchrun standalone, a process per GPU (so one `[training]` serves a pod target
 * and a cluster target); this machine (local, ssh) has no GPU count to give it: refused there.
 * Checked where a run's target is chosen (train, its dry run), since `--target` picks it then.
 */
import { SELF_SERVE_MAX_NODES, type TargetConfig, type TrainingConfig } from './types';

export interface NodesProblem {
  message: string;
  /** What to write instead. */
  hint: string;
}

/** The number of nodes of `target`: 1 for a local target. */
export function nodesOf(target: TargetConfig): number {
  return target.kind === 'runpod' ? target.nodes : 1;
}

/** Why `training` cannot run on `target` as configured, or null when it can. */
export function nodesProblem(training: TrainingConfig, target: TargetConfig): NodesProblem | null {
  const nodes = nodesOf(target);
  const trainer = training.trainer;
  const launcher = trainer.kind === 'command' ? trainer.launcher : null;
  if (nodes >= 2 && launcher === null) {
    return {
      message: `target ${target.name} has nodes = ${nodes}: a run on a cluster needs trainer = "command" with launcher = "torchrun"${trainer.kind === 'axolotl' ? " (Axolotl's own multi-node launch is not supported yet)" : ''}`,
      hint: `Write trainer = "command", command = "train.py …" and launcher = "torchrun" in [training], or nodes = 1 in [targets.${target.name}].`,
    };
  }
  if (target.kind !== 'runpod' && launcher !== null) {
    return {
      message: `launcher = "torchrun" starts the command on a pod's GPUs or on every node of a cluster, but target ${target.name} ${target.kind === 'ssh' ? 'runs on your own machine' : 'runs on this machine'}`,
      hint: `Train on a runpod target, or remove launcher and write command = "torchrun --standalone --nproc_per_node=N train.py" for [targets.${target.name}].`,
    };
  }
  return null;
}

/** The line a quote adds about the nodes, or null for one pod. */
export function nodesLine(nodes: number, gpuCount: number): string | null {
  if (nodes < 2) return null;
  const self =
    nodes > SELF_SERVE_MAX_NODES
      ? `; Runpod's self-serve accounts get at most ${SELF_SERVE_MAX_NODES} nodes: ${nodes} needs its sales, else Runpod refuses the create`
      : '';
  return `Nodes: ${nodes} pods of ${gpuCount} GPU${gpuCount === 1 ? '' : 's'} (one Instant Cluster, launched by torchrun), every figure below for all ${nodes}${self}`;
}
