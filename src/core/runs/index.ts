/** runs/<run-id>/: run.json, pod.json, ssh/, the per-run lock. */
export { RunsError, isRunsError, type RunsErrorKind } from './runsError';
export {
  RUN_ID_MAX,
  isValidRunId,
  validateRunId,
  projectSlug,
  idTimestamp,
  runIdCandidate,
} from './ids';
export { writeFileAtomicSync, isAtomicTemp } from './atomic';
export type { ExtraFields } from './codec';
export {
  RUN_FILE,
  RUN_STATES,
  decodeRunRecord,
  encodeRunRecord,
  type RunRecord,
  type JobRef,
  type RunSnapshot,
  type SnapshotReason,
} from './runRecord';
export {
  POD_FILE,
  POD_RECORD_VERSION,
  PodRecord,
  newPodRecord,
  stateName,
  publicKeyFields,
  type CreatedPod,
} from './podRecord';
export { decodePodRecord, encodePodRecord } from './podJson';
export * from './podStates';
export { RunLock, LOCK_FILE, DEFAULT_LOCK_TIMING, type LockHolder, type LockTiming } from './lock';
export {
  RunStore,
  noPodLeft,
  SSH_DIR,
  POD_LOG_DIR,
  LOCAL_ONLY,
  type RunsWarning,
  type CreateRunOptions,
} from './store';
