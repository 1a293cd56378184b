/**
 * What the fields of a run's pod.json can hold: where its pod stands, how each create call ended,
 * who deleted the pod, what a pod ID and a pinned host key can be.
 */
import type { ExtraFields } from './codec';

/** Where a run's pod stands. */
export type PodState =
  /** A create call is about to be sent, or was sent. */
  | 'creating'
  /** Runpod created the pod; overbrainer waits for SSH and the watchdog. */
  | 'provisioning'
  /** Reachable, with a watchdog that can delete it. */
  | 'ready'
  /** The job was started on it. */
  | 'running'
  /** The job ended but its results were not retrieved; the watchdog deletes it after its retrieve grace. */
  | 'awaiting_retrieval'
  /** Kept (`--keep-pod` or at runtime): only `pod rm` deletes it. */
  | 'kept'
  /** A delete call is about to be sent, or was sent. */
  | 'deleting'
  /** Runpod no longer knows the pod. */
  | 'deleted';

export const POD_STATES: readonly PodState[] = [
  'creating',
  'provisioning',
  'ready',
  'running',
  'awaiting_retrieval',
  'kept',
  'deleting',
  'deleted',
];

/** How one create call ended. */
export type AttemptResult =
  | 'sent'
  | 'created'
  /** Runpod could not place the GPU type (capacity 400). */
  | 'unavailable'
  /** Runpod refused the GPU type (403). */
  | 'forbidden'
  /** No usable answer: the pod may or may not exist. */
  | 'ambiguous'
  /** No usable answer, then found by its run marker. */
  | 'adopted'
  /** Created, but not reachable in time; deleted. */
  | 'not_ready'
  /** Created, but its watchdog could not prove it can delete it; deleted. */
  | 'refused'
  /** Refused by Runpod for a reason no other GPU type would fix (402, 422, other 400). */
  | 'rejected';

export const ATTEMPT_RESULTS: readonly AttemptResult[] = [
  'sent',
  'created',
  'unavailable',
  'forbidden',
  'ambiguous',
  'adopted',
  'not_ready',
  'refused',
  'rejected',
];

/** Who removed a pod. */
export type DeletedBy = 'client' | 'watchdog' | 'pod_rm' | 'unknown';
export const DELETED_BY: readonly DeletedBy[] = ['client', 'watchdog', 'pod_rm', 'unknown'];

/** One create call. */
export interface Attempt {
  /** The pod name sent, `overbrainer-<run-id>-<n>`. */
  name: string;
  gpuType: string;
  /** When the call was sent, RFC 3339 UTC. */
  sentAt: string;
  /** The same in unix ms (absent from records of older versions). */
  sentMs?: number;
  /** When this pod's watchdog deletes it; null when kept. */
  deadlineUnixS: number | null;
  result: AttemptResult;
  /** The client's own fixed message for a failed call (never Runpod's text). */
  detail?: string;
  /** The pod it created, if any. */
  podId?: string;
  /** Fields of the attempt this version does not know, written back unchanged. */
  extraFields?: ExtraFields;
}

/** The SSH endpoint of a pod as last seen. */
export interface SshEndpoint {
  host: string;
  port: number;
  user: string;
}

/**
 * What can be a Runpod pod ID. Runpod's document types it as any string; the ones it hands out are
 * alphanumeric, but one of another shape must never break a list, a sweep, or the record of a pod
 * that bills. Refused: the empty string, control characters (they would forge log lines), the dot
 * segments (a URL path that resolves elsewhere), and anything over 256 characters. In a URL path
 * an ID is one encoded segment.
 */
export function isPodId(id: string): boolean {
  return /^[^\p{Cc}]{1,256}$/u.test(id) && id !== '.' && id !== '..';
}
/** A public host key as pod.json holds it: type and key, no comment. */
export const HOST_KEY = /^ssh-ed25519 [A-Za-z0-9+/]+={0,2}$/;
