/**
 * The account's pods and the Runpod catalog as the front ends list them (`pod ls`, `pod gpus`…,
 * the Pods view, Pick GPU Types), `pod rm` and the Pods view's Remove, a pod's live log, and the
 * Runpod API's errors a front end words.
 */
export {
  cell,
  listPods,
  PodAdminError,
  podTable,
  removePodById,
  removePods,
  removeRunOrPod,
  type PodAdminErrorKind,
  type PodRow,
  type PodRowKind,
  type RemovedPod,
} from '../pod/podAdmin';
export {
  inStock,
  type AvailabilityLevel,
  type DataCenter,
  type GpuType,
  type NetworkVolume,
  type Pod,
  type Template,
} from '../runpod/api';
export { ApiError, isApiError, RunpodConfigError } from '../runpod/apiErrors';
export { CallLimits, type RateLimitWait } from '../runpod/callLimits';
export { streamPodLogs } from '../runpod/podLogs';
