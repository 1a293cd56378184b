/**
 * How long Axolotl's LoRA merge (`merge = true`) takes after training, for the ETA and the
 * quote. The merge loads the base model in 16 bits, folds the adapter in and writes the merged
 * model: its time follows the model's size. The rule: 40 s per billion parameters, at least
 * 2 minutes; the size is read from the model's name (`Qwen2.5-0.5B` → 0.5, `Llama-3-8b` → 8,
 * a mixture `8x7B` → 56), 8 billion when the name does not say (or the YAML is the user's own).
 */

/** Seconds of merge per billion parameters. */
export const MERGE_S_PER_BILLION = 40;
/** The least a merge is counted for (loading and writing even a small model). */
export const MERGE_MIN_S = 120;
/** Parameters assumed when the model's name does not give them, in billions. */
export const MERGE_DEFAULT_BILLIONS = 8;

/** The parameters `baseModel`'s name gives, in billions; null when it gives none. */
export function billionsFromName(baseModel: string | null): number | null {
  if (baseModel === null) return null;
  const name = baseModel.split('/').pop() ?? baseModel;
  const mixture = /(?:^|[^A-Za-z0-9.])(\d{1,3})x(\d{1,4}(?:\.\d+)?)[bB](?![A-Za-z])/.exec(name);
  if (mixture) return Number(mixture[1]) * Number(mixture[2]);
  const plain = /(?:^|[^A-Za-z0-9.])(\d{1,4}(?:\.\d+)?)[bB](?![A-Za-z])/.exec(name);
  if (plain) return Number(plain[1]);
  const millions = /(?:^|[^A-Za-z0-9.])(\d{1,4})[mM](?![A-Za-z])/.exec(name);
  if (millions) return Number(millions[1]) / 1000;
  return null;
}

/** Seconds the merge of a LoRA of `baseModel` is counted for (see the file's comment). */
export function mergeEstimateS(baseModel: string | null): number {
  const billions = billionsFromName(baseModel) ?? MERGE_DEFAULT_BILLIONS;
  return Math.max(MERGE_MIN_S, Math.ceil(billions * MERGE_S_PER_BILLION));
}
