/**
 * What runs cost as the front ends show it (`spend`, `runs show`, the Spend view, the run page):
 * the estimates from the records, the bills Runpod reports and the budget's lines.
 */
export { billedMismatch, billSettled, recordBilled, recordOtherBills } from '../pod/billing';
export {
  budgetLines,
  podSpendUsd,
  projectSpend,
  runPodSpends,
  runSpendLines,
  runTotals,
  usd4,
  type ProjectSpend,
} from '../runs/spend';
