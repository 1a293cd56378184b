/** The reader of a run's local metrics.jsonl lives in the core, shared with `overbrainer runs show`. */
export * from '../../core/train/metricsFile';
