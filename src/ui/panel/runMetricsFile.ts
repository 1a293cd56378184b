/** The reader of a run's local metrics.jsonl lives in the core, shared with `overbrainer runs show`. */
export {
  MAX_METRICS_FILE_BYTES,
  readMetricsFile,
  type MetricsFileRead,
} from '../../core/flow/records';
