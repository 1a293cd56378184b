/**
 * `runs/<run-id>/pod.json` (PodRecord, version 1): what overbrainer knows of
 * a run's pod, saved before every call that can create or delete one, so a
 * crash never loses a pod. It never holds a private key, the API key or the
 * pod's env: only the public host key and what Runpod reported.
 *
 * The JSON keeps snake_case names (the overbrainer CLI's, so its runs stay readable); the class
 * uses camelCase with units in names.
 */
import { z } from 'zod';
import { rfc3339 } from '../clock';
import { decodeRecord, encodeRecord, splitExtra, type ExtraFields } from './codec';
import { podSpendUsd } from './spend';
import { billedFrom, endOther, otherSpendUsd, rate, type OtherPod } from './podMoney';

export { billedFrom, otherSpendUsd, type OtherPod };

export const POD_FILE = 'pod.json';
export const POD_RECORD_VERSION = 1;

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

/** What {@link PodRecord.created} needs of the pod Runpod created. */
export interface CreatedPod {
  id: string;
  /** The GPU type Runpod placed, when it says. */
  gpuTypeId?: string | null;
  dataCenterId?: string | null;
  /** Runpod's `cost` (USD per hour); 0 or null while not running. */
  costPerHourUsd?: number | null;
  /** Runpod's `createdAt` (RFC 3339), when it says: when it started billing the pod. */
  createdAt?: string | null;
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

const unixS = (ms: number): number => Math.floor(ms / 1000);

export class PodRecord {
  version = POD_RECORD_VERSION;
  state: PodState = 'creating';
  /** When the watchdog deletes the current pod at the latest, RFC 3339; null when kept. */
  deadline: string | null = null;
  deadlineUnixS: number | null = null;
  attempts: Attempt[] = [];
  podId: string | null = null;
  gpuType: string | null = null;
  dataCenterId: string | null = null;
  /** The first non-zero rate Runpod reported. */
  costPerHourUsd: number | null = null;
  /** When it was created, RFC 3339, from the local clock. */
  createdAt: string | null = null;
  createdUnixS: number | null = null;
  /**
   * When Runpod started billing the current pod, unix ms: its `createdAt` as the API gives it,
   * but never before its create call was sent (the pod exists from somewhere inside that call;
   * `createdAt` counts whole seconds), and the call's sending when the API gives no `createdAt`
   * this client's clock can hold (one later than the answer). The spend estimate counts from
   * here; deadlines count from `createdUnixS`, the call's answer.
   */
  billedFromMs: number | null = null;
  readyAt: string | null = null;
  ssh: SshEndpoint | null = null;
  deletedAt: string | null = null;
  /** The same to the millisecond: when the API confirmed the deletion (absent from older records). */
  deletedMs: number | null = null;
  deletedBy: DeletedBy | null = null;
  /** Rate × uptime, in USD, to 1/10000. */
  estimatedSpendUsd: number | null = null;
  /** What Runpod billed the pod (`GET /billing/pods`), USD; null until read. */
  billedUsd: number | null = null;
  /** When the billed amount was read, RFC 3339. */
  billedCheckedAt: string | null = null;
  /** Other pods of the run whose deletion could not be confirmed. */
  strayPods: string[] = [];
  /**
   * Every other pod the run had (earlier attempts, pods the walk or a sweep deleted, strays),
   * with its money: the budget and `spend` count them with the current pod.
   */
  otherPods: OtherPod[] = [];
  /**
   * Create calls made for the run before this record (earlier attempts of a recovered run):
   * attempt names count on from there, so no two attempts of a run share a name.
   */
  earlierAttempts = 0;
  /**
   * A create went unanswered and the run's pods could not be listed since: a pod of the run
   * that this record does not name may exist (Runpod may list it late).
   */
  unconfirmedCreate = false;
  /** The run's cost cap; null when kept or unset. */
  maxCostUsd: number | null = null;
  networkVolumeId: string | null = null;
  maxVolumeGb: number | null = null;
  /** Fields of pod.json this version does not know, written back unchanged. */
  extraFields?: ExtraFields;

  constructor(
    readonly runId: string,
    /** Whether the pod is kept (`--keep-pod`): no deadline, only `pod rm` deletes it. */
    public keep: boolean,
    public gpuCount: number,
    /** The pod's public host key, `ssh-ed25519 AAAA…`. */
    public hostKey: string,
  ) {}

  /**
   * Appends a create call for `gpuType`, sent at `nowMs`, and returns it. Its
   * pod would be deleted by its watchdog `maxHours` later, unless kept.
   */
  beginAttempt(gpuType: string, nowMs: number, maxHours: number): Attempt {
    const attempt: Attempt = {
      name: `overbrainer-${this.runId}-${this.earlierAttempts + this.attempts.length + 1}`,
      gpuType,
      sentAt: rfc3339(nowMs),
      sentMs: nowMs,
      deadlineUnixS: this.keep ? null : unixS(nowMs) + hoursS(maxHours),
      result: 'sent',
    };
    this.state = 'creating';
    this.attempts.push(attempt);
    return attempt;
  }

  /** Records how the last create call ended (`detail`: the client's own fixed words). */
  endAttempt(result: AttemptResult, detail?: string): void {
    const last = this.attempts[this.attempts.length - 1];
    if (!last) return;
    last.result = result;
    if (detail === undefined) delete last.detail;
    else last.detail = detail;
  }

  /**
   * Makes `pod`, created (or adopted) by the last call at `nowMs`, the current
   * pod: its deadline is that call's (create-call time + max_hours).
   */
  created(pod: CreatedPod, result: 'created' | 'adopted', nowMs: number): void {
    const last = this.attempts[this.attempts.length - 1];
    const deadlineUnixS = last?.deadlineUnixS ?? null;
    if (last) {
      last.result = result;
      last.podId = pod.id;
      this.gpuType = pod.gpuTypeId ?? last.gpuType;
    }
    this.state = 'provisioning';
    this.podId = pod.id;
    this.dataCenterId = pod.dataCenterId ?? null;
    this.costPerHourUsd = rate(pod.costPerHourUsd);
    this.createdAt = rfc3339(nowMs);
    this.createdUnixS = unixS(nowMs);
    // An older record's call has only its whole second: still no later than the pod.
    const sentMs = last ? (last.sentMs ?? Date.parse(last.sentAt)) : nowMs;
    this.billedFromMs = billedFrom(pod.createdAt, sentMs, nowMs);
    this.deadlineUnixS = deadlineUnixS;
    this.deadline = deadlineUnixS === null ? null : rfc3339(deadlineUnixS * 1000);
    this.readyAt = null;
    this.ssh = null;
  }

  /** Keeps the first non-zero rate Runpod reports. */
  noteRate(costPerHourUsd: number | null | undefined): void {
    if (this.costPerHourUsd === null) this.costPerHourUsd = rate(costPerHourUsd);
  }

  /** The current pod as one of the run's other pods (its money so far, or in all once deleted). */
  currentAsOther(): OtherPod | null {
    if (this.podId === null) return null;
    const deletedMs =
      this.deletedMs ?? (this.deletedAt === null ? NaN : Date.parse(this.deletedAt));
    const ended = this.state === 'deleted' && !Number.isNaN(deletedMs);
    return {
      podId: this.podId,
      costPerHourUsd: this.costPerHourUsd,
      billedFromMs:
        this.billedFromMs ?? (this.createdUnixS === null ? null : this.createdUnixS * 1000),
      endedMs: ended ? deletedMs : null,
      estimatedSpendUsd: ended ? this.estimatedSpendUsd : null,
      billedUsd: ended ? this.billedUsd : null,
      billedCheckedAt: ended ? this.billedCheckedAt : null,
    };
  }

  /**
   * Notes another pod of the run (a duplicate or stray a sweep found, `pod` as listed), ended at
   * `endedMs` (its deletion confirmed) or still billing (null). Known pods are updated.
   */
  noteOtherPod(
    pod: { id: string; costPerHourUsd?: number | null; createdAt?: string | null },
    endedMs: number | null,
  ): void {
    if (pod.id === this.podId) return;
    let other = this.otherPods.find((o) => o.podId === pod.id);
    if (other === undefined) {
      const createdMs = pod.createdAt ? Date.parse(pod.createdAt) : NaN;
      other = {
        podId: pod.id,
        costPerHourUsd: rate(pod.costPerHourUsd),
        billedFromMs: Number.isNaN(createdMs) ? null : createdMs,
        endedMs: null,
        estimatedSpendUsd: null,
        billedUsd: null,
        billedCheckedAt: null,
      };
      this.otherPods.push(other);
    }
    other.costPerHourUsd ??= rate(pod.costPerHourUsd);
    if (endedMs !== null && other.endedMs === null) endOther(other, endedMs);
  }

  /** Another pod of the run, `podId`, was confirmed gone at `endedMs` (a stray found gone). */
  otherPodGone(podId: string, endedMs: number): void {
    const other = this.otherPods.find((o) => o.podId === podId);
    if (other !== undefined && other.endedMs === null) endOther(other, endedMs);
  }

  /**
   * Makes this record, of a run going on on a new pod, carry what `earlier` (the record of its
   * pod that died) knew of the run's pods: that pod and its other pods, with their money, the
   * strays, and the count of create calls, so that attempt names count on.
   */
  carryOver(earlier: PodRecord): void {
    this.earlierAttempts = earlier.earlierAttempts + earlier.attempts.length;
    const current = earlier.currentAsOther();
    this.otherPods = [
      ...earlier.otherPods.map((o) => ({ ...o })),
      ...(current === null ? [] : [current]),
    ];
    this.strayPods = [...earlier.strayPods];
    this.unconfirmedCreate = earlier.unconfirmedCreate;
  }

  /** What every pod of the run has cost by `nowMs` (the current one and the others), USD. */
  runSpendUsd(nowMs: number): number {
    const current = this.state === 'deleted' ? this.estimatedSpendUsd : this.spendUsd(nowMs);
    const others = this.otherPods.map((o) => otherSpendUsd(o, nowMs) ?? 0);
    return Math.round(((current ?? 0) + others.reduce((a, b) => a + b, 0)) * 10_000) / 10_000;
  }

  /** Forgets the current pod once it is deleted, before another attempt. */
  forgetPod(): void {
    this.podId = null;
    this.state = 'creating';
    this.createdAt = null;
    this.createdUnixS = null;
    this.billedFromMs = null;
    this.costPerHourUsd = null;
    this.deadline = null;
    this.deadlineUnixS = null;
    this.ssh = null;
    // Its end and its money went with it (into `otherPods`): none of it is the next pod's.
    this.deletedAt = null;
    this.deletedMs = null;
    this.deletedBy = null;
    this.estimatedSpendUsd = null;
    this.billedUsd = null;
    this.billedCheckedAt = null;
  }

  /** The pod is reachable at `endpoint` with a working watchdog. */
  ready(endpoint: SshEndpoint, nowMs: number): void {
    this.state = 'ready';
    this.ssh = { ...endpoint };
    this.readyAt = rfc3339(nowMs);
  }

  /** How long the current pod has existed at `nowMs` (whole seconds); null before it was created. */
  uptimeMs(nowMs: number): number | null {
    if (this.createdUnixS === null) return null;
    return Math.max(0, unixS(nowMs) - this.createdUnixS) * 1000;
  }

  /** What the current pod has cost by `nowMs` ({@link podSpendUsd}). */
  spendUsd(nowMs: number): number | null {
    return podSpendUsd(this, nowMs);
  }

  /**
   * The pod was found gone, removed by `by`: `nowMs` is the moment the API confirmed it (the
   * delete's answer, or the first 404 of the looks that confirmed it gone), never before Runpod
   * stopped billing it. Its spend is estimated to then ({@link spendUsd}).
   */
  deleted(by: DeletedBy, nowMs: number): void {
    this.estimatedSpendUsd = this.spendUsd(nowMs);
    this.state = 'deleted';
    this.deletedAt = rfc3339(nowMs);
    this.deletedMs = nowMs;
    this.deletedBy = by;
  }

  /**
   * Records the other pods of the run whose deletion could not be confirmed (replacing the list);
   * with `nowMs`, an earlier stray left out of it is recorded ended then.
   */
  setStrayPods(ids: readonly string[], nowMs?: number): void {
    this.strayPods = [...new Set(ids)];
    // A stray no longer listed as one was confirmed gone (by `nowMs`): it bills no more.
    if (nowMs === undefined) return;
    for (const other of this.otherPods) {
      if (other.endedMs === null && !this.strayPods.includes(other.podId)) endOther(other, nowMs);
    }
  }

  /** Whether a pod of the run other than `podId` may exist: a stray, or an unconfirmed create. */
  mayHaveOtherPods(): boolean {
    return this.strayPods.length > 0 || this.unconfirmedCreate;
  }

  /**
   * One line for `runs ls`: `pod running k3x9abc $0.53/h`, `pod deleted about
   * $0.64`, `pod kept k3x9abc`, `pod awaiting retrieval k3x9abc`…
   */
  summary(): string {
    const id = this.podId ?? '(no pod)';
    switch (this.state) {
      case 'deleted':
        return this.estimatedSpendUsd === null
          ? 'pod deleted'
          : `pod deleted about $${this.estimatedSpendUsd.toFixed(2)}`;
      case 'kept':
      case 'awaiting_retrieval':
        return `pod ${stateName(this.state)} ${id}`;
      default:
        return this.costPerHourUsd === null
          ? `pod ${stateName(this.state)} ${id}`
          : `pod ${stateName(this.state)} ${id} $${this.costPerHourUsd.toFixed(2)}/h`;
    }
  }

  /** A deep copy (for a model that must not share arrays with the saved record). */
  clone(): PodRecord {
    return decodePodRecord(encodePodRecord(this), '(copy)');
  }
}

/** The state in words: `awaiting retrieval` for `awaiting_retrieval`. */
export function stateName(state: PodState): string {
  return state === 'awaiting_retrieval' ? 'awaiting retrieval' : state;
}

/** `max_hours` in whole seconds, 0 when it cannot be one (the config refuses such values). */
function hoursS(maxHours: number): number {
  const seconds = Math.floor(maxHours * 3600);
  return Number.isFinite(seconds) && seconds > 0 ? seconds : 0;
}

/**
 * The record of a run whose pod does not exist yet (state `creating`).
 * `maxCostUsd` is dropped for a kept pod, which has no cap.
 */
export function newPodRecord(
  runId: string,
  keep: boolean,
  gpuCount: number,
  hostPublicKey: string,
  options: {
    maxCostUsd?: number | null;
    networkVolumeId?: string | null;
    maxVolumeGb?: number | null;
  } = {},
): PodRecord {
  const record = new PodRecord(runId, keep, gpuCount, publicKeyFields(hostPublicKey));
  record.maxCostUsd = keep ? null : (options.maxCostUsd ?? null);
  record.networkVolumeId = options.networkVolumeId ?? null;
  record.maxVolumeGb = options.maxVolumeGb ?? null;
  return record;
}

/** `ssh-ed25519 AAAA… comment` → `ssh-ed25519 AAAA…`. */
export function publicKeyFields(line: string): string {
  return line.trim().split(/\s+/).slice(0, 2).join(' ');
}

// ---------------------------------------------------------------------------
// pod.json

const nullableString = z.string().nullable();
const unix = z.number().int().min(0).nullable();
const podId = z.string().refine(isPodId, 'not a Runpod pod ID');

const attemptSchema = z.looseObject({
  name: z.string(),
  gpu_type: z.string(),
  sent_at: z.string(),
  sent_ms: z.number().int().min(0).optional(),
  deadline_unix: unix,
  result: z.enum(ATTEMPT_RESULTS as [AttemptResult, ...AttemptResult[]]),
  detail: z.string().optional(),
  pod_id: podId.optional(),
});
const ATTEMPT_KEYS = Object.keys(attemptSchema.shape);

const msOrNull = z.number().int().min(0).nullable();
const otherPodSchema = z.object({
  pod_id: podId,
  cost_per_hour: z.number().min(0).nullable(),
  billed_from_ms: msOrNull,
  ended_ms: msOrNull,
  estimated_spend: z.number().min(0).nullable(),
  billed_usd: z.number().min(0).nullable(),
  billed_checked_at: nullableString,
});

const podSchema = z.looseObject({
  version: z.literal(POD_RECORD_VERSION),
  run_id: z.string(),
  state: z.enum(POD_STATES as [PodState, ...PodState[]]),
  keep: z.boolean(),
  deadline: nullableString,
  deadline_unix: unix,
  attempts: z.array(attemptSchema),
  pod_id: podId.nullable(),
  gpu_type: nullableString,
  gpu_count: z.number().int().min(1),
  data_center_id: nullableString,
  cost_per_hour: z.number().min(0).nullable(),
  created_at: nullableString,
  created_unix: unix,
  ready_at: nullableString,
  ssh: z
    .object({
      host: z.string(),
      port: z.number().int().min(1).max(65535),
      user: z.string(),
    })
    .nullable(),
  // Pinned into known_hosts: anything but one key line could smuggle in other hosts.
  host_key: z.string().regex(HOST_KEY),
  deleted_at: nullableString,
  deleted_by: z.enum(DELETED_BY as [DeletedBy, ...DeletedBy[]]).nullable(),
  estimated_spend: z.number().min(0).nullable(),
  // Newer fields: absent from records of older versions.
  stray_pods: z.array(podId).optional(),
  unconfirmed_create: z.boolean().optional(),
  max_cost_usd: z.number().gt(0).nullable().optional(),
  network_volume_id: nullableString.optional(),
  max_volume_gb: z.number().int().min(1).nullable().optional(),
  billed_usd: z.number().min(0).nullable().optional(),
  billed_checked_at: nullableString.optional(),
  billed_from_ms: z.number().int().min(0).nullable().optional(),
  deleted_ms: z.number().int().min(0).nullable().optional(),
  other_pods: z.array(otherPodSchema).optional(),
  earlier_attempts: z.number().int().min(0).optional(),
});
const POD_KEYS = Object.keys(podSchema.shape);

export function decodePodRecord(text: string, file: string): PodRecord {
  const raw = decodeRecord(text, file, podSchema, 'pod record');
  const record = new PodRecord(raw.run_id, raw.keep, raw.gpu_count, raw.host_key);
  record.state = raw.state;
  record.deadline = raw.deadline;
  record.deadlineUnixS = raw.deadline_unix;
  record.attempts = raw.attempts.map((a) => {
    const attempt: Attempt = {
      name: a.name,
      gpuType: a.gpu_type,
      sentAt: a.sent_at,
      deadlineUnixS: a.deadline_unix,
      result: a.result,
    };
    if (a.sent_ms !== undefined) attempt.sentMs = a.sent_ms;
    if (a.detail !== undefined) attempt.detail = a.detail;
    if (a.pod_id !== undefined) attempt.podId = a.pod_id;
    const extra = splitExtra(a, ATTEMPT_KEYS);
    if (extra) attempt.extraFields = extra;
    return attempt;
  });
  record.podId = raw.pod_id;
  record.gpuType = raw.gpu_type;
  record.dataCenterId = raw.data_center_id;
  record.costPerHourUsd = raw.cost_per_hour;
  record.createdAt = raw.created_at;
  record.createdUnixS = raw.created_unix;
  record.readyAt = raw.ready_at;
  record.ssh = raw.ssh;
  record.deletedAt = raw.deleted_at;
  record.deletedBy = raw.deleted_by;
  record.estimatedSpendUsd = raw.estimated_spend;
  record.strayPods = raw.stray_pods ?? [];
  record.unconfirmedCreate = raw.unconfirmed_create ?? false;
  record.maxCostUsd = raw.max_cost_usd ?? null;
  record.networkVolumeId = raw.network_volume_id ?? null;
  record.maxVolumeGb = raw.max_volume_gb ?? null;
  record.billedUsd = raw.billed_usd ?? null;
  record.billedCheckedAt = raw.billed_checked_at ?? null;
  record.billedFromMs = raw.billed_from_ms ?? null;
  record.otherPods = (raw.other_pods ?? []).map((o) => ({
    podId: o.pod_id,
    costPerHourUsd: o.cost_per_hour,
    billedFromMs: o.billed_from_ms,
    endedMs: o.ended_ms,
    estimatedSpendUsd: o.estimated_spend,
    billedUsd: o.billed_usd,
    billedCheckedAt: o.billed_checked_at,
  }));
  record.earlierAttempts = raw.earlier_attempts ?? 0;
  record.deletedMs = raw.deleted_ms ?? null;
  const extra = splitExtra(raw, POD_KEYS);
  if (extra) record.extraFields = extra;
  return record;
}

/** Throws a RangeError for a record pod.json must never hold (a bad pod ID or host key). */
export function encodePodRecord(record: PodRecord): string {
  for (const id of [
    record.podId,
    ...record.strayPods,
    ...record.attempts.map((a) => a.podId),
    ...record.otherPods.map((o) => o.podId),
  ]) {
    if (id !== null && id !== undefined && !isPodId(id)) {
      throw new RangeError(
        `run ${record.runId}: ${JSON.stringify(id.slice(0, 70))} is not a Runpod pod ID`,
      );
    }
  }
  if (!HOST_KEY.test(record.hostKey)) {
    throw new RangeError(`run ${record.runId}: the host key is not one "ssh-ed25519 AAAA…" key`);
  }
  return encodeRecord(
    {
      version: record.version,
      run_id: record.runId,
      state: record.state,
      keep: record.keep,
      deadline: record.deadline,
      deadline_unix: record.deadlineUnixS,
      attempts: record.attempts.map(
        (a) =>
          JSON.parse(
            encodeRecord(
              {
                name: a.name,
                gpu_type: a.gpuType,
                sent_at: a.sentAt,
                sent_ms: a.sentMs,
                deadline_unix: a.deadlineUnixS,
                result: a.result,
                detail: a.detail,
                pod_id: a.podId,
              },
              a.extraFields,
            ),
          ) as unknown,
      ),
      pod_id: record.podId,
      gpu_type: record.gpuType,
      gpu_count: record.gpuCount,
      data_center_id: record.dataCenterId,
      cost_per_hour: record.costPerHourUsd,
      created_at: record.createdAt,
      created_unix: record.createdUnixS,
      ready_at: record.readyAt,
      ssh: record.ssh,
      host_key: record.hostKey,
      deleted_at: record.deletedAt,
      deleted_by: record.deletedBy,
      estimated_spend: record.estimatedSpendUsd,
      stray_pods: record.strayPods,
      unconfirmed_create: record.unconfirmedCreate ? true : undefined,
      max_cost_usd: record.maxCostUsd,
      network_volume_id: record.networkVolumeId,
      max_volume_gb: record.maxVolumeGb,
      billed_usd: record.billedUsd ?? undefined,
      billed_checked_at: record.billedCheckedAt ?? undefined,
      billed_from_ms: record.billedFromMs ?? undefined,
      deleted_ms: record.deletedMs ?? undefined,
      other_pods:
        record.otherPods.length === 0
          ? undefined
          : record.otherPods.map((o) => ({
              pod_id: o.podId,
              cost_per_hour: o.costPerHourUsd,
              billed_from_ms: o.billedFromMs,
              ended_ms: o.endedMs,
              estimated_spend: o.estimatedSpendUsd,
              billed_usd: o.billedUsd,
              billed_checked_at: o.billedCheckedAt,
            })),
      earlier_attempts: record.earlierAttempts === 0 ? undefined : record.earlierAttempts,
    },
    record.extraFields,
  );
}
