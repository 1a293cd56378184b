/**
 * The emulator's billing ledger: every pod ever created, with what it cost, as Runpod bills it.
 * Billing is per second from creation (image pull included) until deletion: the GPU rate while the
 * pod is PROVISIONING, STARTING or RUNNING, and only its disks (the catalog's stopped-disk rate)
 * while it is EXITED or ERROR. Only a delete stops all charges. Time comes from the injected clock.
 *
 * The tests read it to assert "no pod left billing" and "GPU seconds billed".
 */
import type { Clock } from '../../src/core/clock';

/** Who ended a pod: the account key, the pod's own key, or Runpod itself (a vanished pod). */
export type DeletedBy = 'account' | 'pod' | 'provider';
export type BillingMode = 'gpu' | 'disk' | 'none';

export interface LedgerPodInput {
  id: string;
  name: string;
  /** The run marker: env `OVERBRAINER_RUN_ID` of the create call, or null. */
  runId: string | null;
  gpuTypeId: string;
  gpuCount: number;
  dataCenterId: string;
  cloud: string;
  /** GPU price × count. */
  gpuUsdPerHour: number;
  /** Container disk + persistent volume, billed while stopped. */
  diskGb: number;
  /** Stopped-disk price per GB and month. */
  diskUsdPerGbMonth: number;
  /** The cluster a member pod belongs to (billed per member, per second, as any pod). */
  clusterId?: string;
}

export interface LedgerEntry extends LedgerPodInput {
  createdAtMs: number;
  deletedAtMs: number | null;
  deletedBy: DeletedBy | null;
  /** Still costing money (created and not deleted). */
  billing: boolean;
  /** The pod's status now (`DELETED` once deleted). */
  status: string;
  /** Seconds billed at the GPU rate. */
  gpuBilledSeconds: number;
  /** `gpuBilledSeconds` × GPU count. */
  gpuSeconds: number;
  /** Seconds billed for disks only (stopped). */
  diskBilledSeconds: number;
  costUsd: number;
}

export interface LedgerSnapshot {
  atMs: number;
  pods: LedgerEntry[];
  totals: {
    podsCreated: number;
    /** Pods not deleted (still billing). */
    podsBilling: number;
    gpuSeconds: number;
    costUsd: number;
  };
}

interface Interval {
  mode: BillingMode;
  fromMs: number;
}

interface Record_ {
  input: LedgerPodInput;
  createdAtMs: number;
  deletedAtMs: number | null;
  deletedBy: DeletedBy | null;
  status: string;
  intervals: Interval[];
}

const HOURS_PER_MONTH = 30 * 24;

export class Ledger {
  private readonly records = new Map<string, Record_>();

  constructor(private readonly clock: Clock) {}

  /**
   * A pod was created at `nowMs`: it bills at the GPU rate from then, the moment its `createdAt`
   * says (not from when its container's files were laid out after it).
   */
  open(input: LedgerPodInput, status: string, nowMs = this.clock.nowMs()): void {
    this.records.set(input.id, {
      input: { ...input },
      createdAtMs: nowMs,
      deletedAtMs: null,
      deletedBy: null,
      status,
      intervals: [{ mode: 'gpu', fromMs: nowMs }],
    });
  }

  /** The pod's status changed; its billing follows the status. */
  status(id: string, status: string): void {
    const record = this.records.get(id);
    if (!record || record.deletedAtMs !== null) return;
    record.status = status;
    const mode: BillingMode =
      status === 'EXITED' || status === 'ERROR' ? 'disk' : status === 'TERMINATED' ? 'none' : 'gpu';
    const last = record.intervals[record.intervals.length - 1];
    if (last?.mode !== mode) record.intervals.push({ mode, fromMs: this.clock.nowMs() });
  }

  /** The pod was deleted: billing stops now. */
  close(id: string, deletedBy: DeletedBy): void {
    const record = this.records.get(id);
    if (!record || record.deletedAtMs !== null) return;
    const nowMs = this.clock.nowMs();
    record.intervals.push({ mode: 'none', fromMs: nowMs });
    record.deletedAtMs = nowMs;
    record.deletedBy = deletedBy;
    record.status = 'DELETED';
  }

  entry(id: string): LedgerEntry | undefined {
    const record = this.records.get(id);
    return record ? this.toEntry(record, this.clock.nowMs()) : undefined;
  }

  /** Every pod ever created (their ids), oldest first. */
  ids(): string[] {
    return [...this.records.keys()];
  }

  /**
   * What pod `id` was charged in [fromMs, toMs): GPU seconds at the GPU rate and stopped seconds
   * at the disk rate, the amounts `GET /v2/billing/pods` reports for one bucket. Null when the
   * pod was never created or did not exist in that window.
   */
  chargedBetween(
    id: string,
    fromMs: number,
    toMs: number,
  ): { gpuUsd: number; diskUsd: number } | null {
    const record = this.records.get(id);
    if (!record) return null;
    const nowMs = this.clock.nowMs();
    const aliveTo = record.deletedAtMs ?? nowMs;
    if (record.createdAtMs >= toMs || aliveTo < fromMs || fromMs >= nowMs) return null;
    let gpuMs = 0;
    let diskMs = 0;
    record.intervals.forEach((interval, i) => {
      const endMs = Math.min(record.intervals[i + 1]?.fromMs ?? nowMs, toMs);
      const spanMs = Math.max(0, endMs - Math.max(interval.fromMs, fromMs));
      if (interval.mode === 'gpu') gpuMs += spanMs;
      else if (interval.mode === 'disk') diskMs += spanMs;
    });
    const input = record.input;
    const diskUsdPerHour = (input.diskGb * input.diskUsdPerGbMonth) / HOURS_PER_MONTH;
    return {
      gpuUsd: (gpuMs / 3_600_000) * input.gpuUsdPerHour,
      diskUsd: (diskMs / 3_600_000) * diskUsdPerHour,
    };
  }

  snapshot(): LedgerSnapshot {
    const atMs = this.clock.nowMs();
    const pods = [...this.records.values()].map((r) => this.toEntry(r, atMs));
    return {
      atMs,
      pods,
      totals: {
        podsCreated: pods.length,
        podsBilling: pods.filter((p) => p.billing).length,
        gpuSeconds: round(
          pods.reduce((sum, p) => sum + p.gpuSeconds, 0),
          3,
        ),
        costUsd: round(
          pods.reduce((sum, p) => sum + p.costUsd, 0),
          6,
        ),
      },
    };
  }

  private toEntry(record: Record_, atMs: number): LedgerEntry {
    let gpuMs = 0;
    let diskMs = 0;
    record.intervals.forEach((interval, i) => {
      const endMs = record.intervals[i + 1]?.fromMs ?? atMs;
      const spanMs = Math.max(0, endMs - interval.fromMs);
      if (interval.mode === 'gpu') gpuMs += spanMs;
      else if (interval.mode === 'disk') diskMs += spanMs;
    });
    const input = record.input;
    const diskUsdPerHour = (input.diskGb * input.diskUsdPerGbMonth) / HOURS_PER_MONTH;
    const costUsd =
      (gpuMs / 3_600_000) * input.gpuUsdPerHour + (diskMs / 3_600_000) * diskUsdPerHour;
    return {
      ...input,
      createdAtMs: record.createdAtMs,
      deletedAtMs: record.deletedAtMs,
      deletedBy: record.deletedBy,
      billing: record.deletedAtMs === null,
      status: record.status,
      gpuBilledSeconds: round(gpuMs / 1000, 3),
      gpuSeconds: round((gpuMs / 1000) * input.gpuCount, 3),
      diskBilledSeconds: round(diskMs / 1000, 3),
      costUsd: round(costUsd, 6),
    };
  }
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
