/** The most digits a tick label's mantissa gets (beyond it, ticks that close are one value). */
const MAX_DECIMALS = 8;

/**
 * Exponent-notation labels for an axis of small values (the learning rate), with the mantissa's
 * precision chosen from the tick spacing: enough decimals that neighbouring ticks differ (a
 * narrow range such as 0.2875…0.3 reads 2.875e-1 … 3.000e-1, not 2.9e-1, 2.9e-1, 3.0e-1), one
 * decimal when the spacing allows it. Every label of the axis has the same number of decimals.
 */
export function exponentTickLabels(splits: readonly number[]): string[] {
  const nonZero = splits.filter((v) => v !== 0 && Number.isFinite(v));
  let decimals = 1;
  if (nonZero.length > 1) {
    let spacing = Infinity;
    for (let i = 1; i < splits.length; i++) {
      const gap = Math.abs(splits[i]! - splits[i - 1]!);
      if (gap > 0) spacing = Math.min(spacing, gap);
    }
    const largest = Math.max(...nonZero.map((v) => Math.abs(v)));
    const exponent = Math.floor(Math.log10(largest));
    // The spacing in units of the largest value's exponent (0.0025 of 2.9e-1 → 0.025): as many
    // decimals as write it exactly (3: 2.875e-1, 2.900e-1, …), so every tick reads its value.
    const unit = spacing / 10 ** exponent;
    if (Number.isFinite(unit) && unit > 0) {
      decimals = Math.max(1, Math.ceil(-Math.log10(unit) - 1e-9));
      while (decimals < MAX_DECIMALS) {
        const scaled = unit * 10 ** decimals;
        if (Math.abs(scaled - Math.round(scaled)) <= 1e-6 * scaled) break;
        decimals++;
      }
    }
  }
  const label = (v: number, d: number): string => (v === 0 ? '0' : v.toExponential(d));
  for (; decimals < MAX_DECIMALS; decimals++) {
    const labels = splits.map((v) => label(v, decimals));
    if (new Set(labels).size === labels.length) return labels;
  }
  return splits.map((v) => label(v, MAX_DECIMALS));
}
