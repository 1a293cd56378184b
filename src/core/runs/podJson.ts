/**
 * pod.json as it is written: the snake_case schema a saved {@link PodRecord} is read back with
 * (fields of older versions optional, fields of newer ones kept), and the writing, which refuses a
 * record pod.json must never hold.
 */
import { z } from 'zod';
import { decodeRecord, encodeRecord, splitExtra } from './codec';
import { POD_RECORD_VERSION, PodRecord } from './podRecord';
import {
  ATTEMPT_RESULTS,
  DELETED_BY,
  HOST_KEY,
  isPodId,
  POD_STATES,
  type Attempt,
  type AttemptResult,
  type DeletedBy,
  type PodState,
} from './podStates';

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
  record.costCapUsd = raw.max_cost_usd ?? null;
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
      max_cost_usd: record.costCapUsd,
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
