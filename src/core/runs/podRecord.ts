/**
 * `runs/<run-id>/pod.json` (PodRecord, version 1): what overbrainer knows of
 * a run's pod, saved before every call that can create or delete one, so a
 * crash never loses a pod. It never holds a private key, the API key or the
 * pod's env: only the public host key and what Runpod reported.
 *
 * The JSON keeps snake_case names (the overbrainer CLI's, so its runs stay readable); the class
 * uses camelCase with units in names. Its fields' words are in ./podStates.ts, its reading and
 * writing in ./podJson.ts.
 */
import { rfc3339 } from '../clock';
import type { ExtraFields } from './codec';
import {
  type Attempt,
  type AttemptResult,
  type DeletedBy,
  type PodState,
  type SshEndpoint,
} from './podStates';
import { podSpendUsd } from './spend';
import { billedFrom, endOther, otherSpendUsd, rate, type OtherPod } from './podMoney';

export { billedFrom, otherSpendUsd, type OtherPod };
export { isPodId, type DeletedBy, type PodState, type SshEndpoint } from './podStates';

export const POD_FILE = 'pod.json';
export const POD_RECORD_VERSION = 1;

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
  /** Who deleted it; while `deleting`, who is deleting it. */
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
  /**
   * The cost cap armed on this pod's watchdog (pod.json `max_cost_usd`): the target's
   * max_cost_usd, or the budget's cap for the run (`budgetCapUsd`), or what a recovered run has
   * left of it; null when kept or unset.
   */
  costCapUsd: number | null = null;
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
 * `costCapUsd` is dropped for a kept pod, which has no cap.
 */
export function newPodRecord(
  runId: string,
  keep: boolean,
  gpuCount: number,
  hostPublicKey: string,
  options: {
    costCapUsd?: number | null;
    networkVolumeId?: string | null;
    maxVolumeGb?: number | null;
  } = {},
): PodRecord {
  const record = new PodRecord(runId, keep, gpuCount, publicKeyFields(hostPublicKey));
  record.costCapUsd = keep ? null : (options.costCapUsd ?? null);
  record.networkVolumeId = options.networkVolumeId ?? null;
  record.maxVolumeGb = options.maxVolumeGb ?? null;
  return record;
}

/** `ssh-ed25519 AAAA… comment` → `ssh-ed25519 AAAA…`. */
export function publicKeyFields(line: string): string {
  return line.trim().split(/\s+/).slice(0, 2).join(' ');
}
