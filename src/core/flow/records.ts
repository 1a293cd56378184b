/**
 * The run records and the files of a run folder as the front ends read them (the Runs view, the
 * run page, `runs ls`/`runs show`): their names, their decoders and errors, the pace and the
 * words of a run's end. Records only: reading them starts nothing.
 */
export { isAtomicTemp } from '../runs/atomic';
export { RECORD_MAX_BYTES } from '../runs/codec';
export { isRunsError } from '../runs/runsError';
export { isValidRunId } from '../runs/ids';
export { lineColumn, scanJson } from '../runs/jsonPositions';
export { decodePodRecord } from '../runs/podJson';
export { POD_FILE, type PodRecord, type PodState } from '../runs/podRecord';
export {
  decodeRunRecord,
  RUN_FILE,
  RUN_STATES,
  type RunAttempt,
  type RunRecord,
  type RunSnapshot,
} from '../runs/runRecord';
export { LOCAL_ONLY, noPodLeft, RunStore } from '../runs/store';
export { clusterCostUsd } from '../runs/clusterSpend';
export {
  clusterNodeLines,
  clusterToWire,
  type ClusterNode,
  type ClusterNodeState,
  type RunCluster,
} from '../runs/clusterRecord';
export { JOB_LOG, METRICS_FILE } from '../train/job';
export {
  GPU_SUMMARY_FILE,
  gpuReadingJson,
  readGpuSamples,
  readGpuSummary,
  type GpuFinding,
  type GpuSummary,
} from '../runs/gpuRecord';
export { gpuLine } from '../train/gpuSamples';
export { parseMetricLine } from '../train/metrics';
export * from '../train/metricsFile';
export { Pace, projectSpendUsd } from '../train/pace';
export { MetricLineThrottle } from '../train/render';
export { overrun, type DeadlineView } from '../pod/lease';
export { MAX_COST_REACHED, MAX_HOURS_REACHED } from '../pod/limitEnd';
export { followLostWords } from '../pod/watchdogWords';
export { PodError } from '../pod/podError';
export { POD_LOG_FILE, PodLogRedactor, stopPodLogCaptures } from '../pod/podLogCapture';
