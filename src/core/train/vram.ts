/**
 * The VRAM a job needs per GPU, estimated from `[training]`'s `base_model` and `adapter` when the
 * target chooses its GPU types itself (`gpu_types = "auto"`) and sets no `min_vram_gb`:
 *
 *   GB per GPU = ⌈ parameters (billions) × bytes per parameter × 1.2 + 4 ⌉
 *
 * with 2 bytes per parameter for `lora` (the bf16 weights), 0.5 for `qlora` (4-bit weights) and
 * 16 for `full` (bf16 weights and gradients, fp32 master weights and Adam's two moments), shared
 * by the pod's GPUs for `full` only (sharded); 1.2 for the adapter, its optimizer and the CUDA
 * context, 4 GB for the activations at the defaults' sequence length and micro batch. The
 * parameters are read from the model's name (`Qwen2.5-0.5B-Instruct`: 0.5; `Llama-3.1-8B`: 8;
 * `Mixtral-8x7B`: 56; `SmolLM-135M`: 0.135); a name without them gives no estimate.
 */
import type { RunpodTargetConfig, TrainerConfig } from '../config/types';
import { billionsFromName } from './mergeEstimate';

const BYTES_PER_PARAMETER = { lora: 2, qlora: 0.5, full: 16 } as const;

/** The GB of VRAM per GPU the rule above gives, or null without a parameter count. */
export function vramNeededGb(
  baseModel: string,
  adapter: 'lora' | 'qlora' | 'full',
  gpuCount = 1,
): number | null {
  const billions = billionsFromName(baseModel);
  if (billions === null) return null;
  const total = billions * BYTES_PER_PARAMETER[adapter] * 1.2;
  const perGpu = adapter === 'full' ? total / Math.max(1, gpuCount) : total;
  return Math.ceil(perGpu + 4);
}

/**
 * `target` with its `min_vram_gb` set to the estimate when it chooses its GPU types itself and
 * sets none, and the trainer's config is generated from a base model; else `target` unchanged.
 */
export function withVramEstimate<T extends { kind: string }>(
  target: T,
  trainer: TrainerConfig | null | undefined,
): T {
  if (target.kind !== 'runpod') return target;
  const pod = target as unknown as RunpodTargetConfig;
  if (pod.gpuTypes !== 'auto' || pod.minVramGb !== null) return target;
  if (trainer?.kind !== 'axolotl' || trainer.model === null) return target;
  const needed = vramNeededGb(trainer.model.baseModel, trainer.model.adapter, pod.gpuCount);
  return needed === null ? target : ({ ...pod, minVramGb: needed } as unknown as T);
}
