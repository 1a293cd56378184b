/**
 * `runs/<run-id>/run.json` (RunRecord): what is needed to find the job again.
 * The JSON keeps snake_case names (the overbrainer CLI's, so its runs stay readable);
 * TypeScript uses camelCase.
 */
import { z } from 'zod';
import type { RunState } from '../events';
import { decodeRecord, encodeRecord, invalidAt, splitExtra, type ExtraFields } from './codec';
import { hubPushFromJson, hubPushSchema, hubPushToJson, type HubPush } from './hubPushRecord';
import { causeRead, isEnded, olderCause, type RunEnd } from './runEnd';
import { clusterFromWire, clusterSchema, clusterToWire, type RunCluster } from './clusterRecord';

export const RUN_FILE = 'run.json';

export const RUN_STATES: readonly RunState[] = [
  'preparing',
  'running',
  'succeeded',
  'failed',
  'cancelled',
  'stopped',
];

/** The started job: where it runs and its process. */
export interface JobRef {
  /** The run directory on the target. */
  dir: string;
  /** The job's process ID on the target; never 0 or 1 (killing those would hit everything). */
  pid: number;
  /**
   * Always null: this version runs no job in a container. The key stays in run.json for the
   * overbrainer CLI's format (`{dir, pid, container}`); a record naming a container (that CLI's
   * docker runtime) is refused on load, since this version could neither follow nor stop it.
   */
  container: null;
}

export type SnapshotReason = 'requested' | 'deadline' | 'cost' | 'disk';

export interface RunSnapshot {
  checkpoint: string;
  step: number;
  reason: SnapshotReason;
}

/** How a pod of the run ended while its job ran (the run went on on a new pod). */
export type AttemptEnd =
  /** Runpod deleted it behind the client's back (404, gone from the list). */
  | 'pod_deleted'
  /** It stopped under the job (EXITED: a lost host, a killed container). */
  | 'pod_exited'
  /**
   * Its host stopped answering under the job while Runpod listed it RUNNING: the client deleted
   * it (its watchdog, on the same host, could not act).
   */
  | 'host_lost'
  /**
   * A node of its cluster failed under the job (its pod gone or dead, its host unreachable, its
   * job killed): the whole cluster was deleted, Runpod cannot replace one member.
   */
  | 'node_failed';

export const ATTEMPT_ENDS: readonly AttemptEnd[] = [
  'pod_deleted',
  'pod_exited',
  'host_lost',
  'node_failed',
];

/**
 * One pod's part of a run (`attempts` in run.json, written once a pod died and the run went on
 * on a new one): the first attempt, then one per recovery.
 */
export interface RunAttempt {
  /** Its pod's ID; on a cluster, the cluster's (its members are in `earlierClusters`/`cluster`). */
  podId: string | null;
  /** When its pod was created, RFC 3339 UTC. */
  startedAt: string;
  /** When it ended (its pod found dead, or the run's end); null while it runs. */
  endedAt: string | null;
  /** Why it ended; null while it runs, or when the run ended on it. */
  reason: AttemptEnd | null;
  /** The step its job resumed from (null: the first attempt, or from step 0). */
  resumedFromStep: number | null;
  /** The checkpoint it resumed from, relative to the run directory (`checkpoints/checkpoint-20`). */
  resumedFromCheckpoint: string | null;
  /**
   * What its pod cost (the client's estimate from the pod's rate and uptime; a cluster's, every
   * member's); null unknown.
   */
  costUsd: number | null;
}

export interface RunRecord {
  id: string;
  /** Target name in overbrainer.toml. */
  target: string;
  /** Creation time, RFC 3339 UTC to the second. */
  created: string;
  /** The run directory on the target. */
  remoteDir: string;
  job: JobRef | null;
  state: RunState;
  /** Why the run failed (or stopped), or null. */
  message: string | null;
  /** How the run ended (runs/runEnd.ts sets it with the state); absent while it goes on. */
  end?: RunEnd;
  /** Newer: the checkpoint a stopped run saved. */
  snapshot?: RunSnapshot | null;
  /** Newer: the run this one resumed from. */
  resumedFrom?: string | null;
  /** Newer: the run's pods, once one died mid-job and the run went on on a new one. */
  attempts?: RunAttempt[];
  /**
   * Newer: the cost cap `[budget]`'s gate gave the run. Until the run's pod record holds it (the
   * record is written before the create), the spend accounting holds it back from what is left,
   * so a second train started meanwhile cannot count the same dollars.
   */
  budgetCapUsd?: number | null;
  /** Newer: the run's Instant Cluster (a target with nodes ≥ 2); absent for a run on one pod. */
  cluster?: RunCluster | null;
  /**
   * Newer: the run's earlier clusters, each deleted whole when a node of it failed mid-job and
   * the run went on on a new cluster (oldest first); `cluster` is the newest.
   */
  earlierClusters?: RunCluster[];
  /** Newer: the sweep this run is a trial of (runs/sweeps/<sweep>/sweep.json), and its number. */
  sweep?: RunSweepLink | null;
  /** Newer: what the push to the Hugging Face Hub (`hub_model_id`) did, once the run ended. */
  hubPush?: HubPush;
  /** Fields of run.json this version does not know, written back unchanged. */
  extraFields?: ExtraFields;
}

/** A trial's run: its sweep's name and the trial's number in the sweep's study. */
export interface RunSweepLink {
  name: string;
  trial: number;
}

const MAX_PID = 2 ** 31 - 1;

const jobSchema = z.object({
  dir: z.string().min(1),
  // pid 0 or 1 in a record means damage: signalling it would hit a whole process group or init.
  pid: z.number().int().min(2).max(MAX_PID),
  container: z.string().nullable().optional(),
});

const runSchema = z.looseObject({
  id: z.string(),
  target: z.string(),
  created: z.string(),
  remote_dir: z.string(),
  job: jobSchema.nullable(),
  state: z.enum(RUN_STATES as [RunState, ...RunState[]]),
  message: z.string().nullable(),
  // Never refuses a record: an `end` this version cannot read is derived as an older record's.
  end: z.unknown().optional(),
  snapshot: z
    .object({
      checkpoint: z.string(),
      step: z.number().int().min(0),
      reason: z.enum(['requested', 'deadline', 'cost', 'disk']),
    })
    .nullable()
    .optional(),
  resumed_from: z.string().nullable().optional(),
  attempts: z
    .array(
      z.object({
        pod_id: z.string().nullable(),
        started_at: z.string(),
        ended_at: z.string().nullable(),
        reason: z.enum(ATTEMPT_ENDS as [AttemptEnd, ...AttemptEnd[]]).nullable(),
        resumed_from_step: z.number().int().min(0).nullable(),
        resumed_from_checkpoint: z.string().nullable(),
        cost_usd: z.number().min(0).nullable(),
      }),
    )
    .optional(),
  budget_cap_usd: z.number().min(0).nullable().optional(),
  cluster: clusterSchema.nullable().optional(),
  earlier_clusters: z.array(clusterSchema).optional(),
  sweep: z
    .object({ name: z.string().min(1), trial: z.number().int().min(0) })
    .nullable()
    .optional(),
  hub_push: hubPushSchema.optional(),
});

const RUN_KEYS = Object.keys(runSchema.shape);

export function decodeRunRecord(text: string, file: string): RunRecord {
  const raw = decodeRecord(text, file, runSchema, 'run record');
  if (raw.job?.container !== null && raw.job?.container !== undefined) {
    throw invalidAt(
      text,
      file,
      ['job', 'container'],
      'its job runs in a container ("job.container"), which this version can neither follow nor stop',
      'run record',
      'Stop that container yourself (`docker ps` lists it), then remove the run folder; or follow the run with the version that started it.',
    );
  }
  const record: RunRecord = {
    id: raw.id,
    target: raw.target,
    created: raw.created,
    remoteDir: raw.remote_dir,
    job: raw.job ? { dir: raw.job.dir, pid: raw.job.pid, container: null } : null,
    state: raw.state,
    message: raw.message,
  };
  const end = endRead(raw.end, raw.state, raw.message);
  if (end !== null) record.end = end;
  if (raw.snapshot !== undefined) record.snapshot = raw.snapshot;
  if (raw.resumed_from !== undefined) record.resumedFrom = raw.resumed_from;
  if (raw.attempts !== undefined) {
    record.attempts = raw.attempts.map((a) => ({
      podId: a.pod_id,
      startedAt: a.started_at,
      endedAt: a.ended_at,
      reason: a.reason,
      resumedFromStep: a.resumed_from_step,
      resumedFromCheckpoint: a.resumed_from_checkpoint,
      costUsd: a.cost_usd,
    }));
  }
  if (raw.budget_cap_usd !== undefined) record.budgetCapUsd = raw.budget_cap_usd;
  if (raw.cluster !== undefined) {
    record.cluster = raw.cluster === null ? null : clusterFromWire(raw.cluster);
  }
  if (raw.earlier_clusters !== undefined) {
    record.earlierClusters = raw.earlier_clusters.map(clusterFromWire);
  }
  if (raw.sweep !== undefined) record.sweep = raw.sweep;
  if (raw.hub_push !== undefined) record.hubPush = hubPushFromJson(raw.hub_push);
  const extra = splitExtra(raw, RUN_KEYS);
  if (extra) record.extraFields = extra;
  return record;
}

/** An ended run's `end` as run.json holds it, or as derived for a record written before it. */
function endRead(end: unknown, state: RunState, message: string | null): RunEnd | null {
  if (!isEnded(state)) return null;
  if (typeof end === 'object' && end !== null) {
    const { cause, message: words } = end as { cause?: unknown; message?: unknown };
    if (typeof cause === 'string' && (typeof words === 'string' || words === null)) {
      return { cause: causeRead(cause), message: words };
    }
  }
  return { cause: olderCause(state, message) ?? 'unknown', message };
}

/** The record as run.json holds it; throws a RangeError for a pid of 0 or 1. */
export function encodeRunRecord(record: RunRecord): string {
  if (record.job && !(Number.isInteger(record.job.pid) && record.job.pid >= 2)) {
    throw new RangeError(`run ${record.id}: a job pid must be 2 or more, not ${record.job.pid}`);
  }
  return encodeRecord(
    {
      id: record.id,
      target: record.target,
      created: record.created,
      remote_dir: record.remoteDir,
      job: record.job
        ? { dir: record.job.dir, pid: record.job.pid, container: record.job.container }
        : null,
      state: record.state,
      message: record.message,
      end: record.end,
      snapshot: record.snapshot,
      resumed_from: record.resumedFrom,
      attempts: record.attempts?.map((a) => ({
        pod_id: a.podId,
        started_at: a.startedAt,
        ended_at: a.endedAt,
        reason: a.reason,
        resumed_from_step: a.resumedFromStep,
        resumed_from_checkpoint: a.resumedFromCheckpoint,
        cost_usd: a.costUsd,
      })),
      budget_cap_usd: record.budgetCapUsd,
      cluster:
        record.cluster === undefined || record.cluster === null
          ? record.cluster
          : clusterToWire(record.cluster),
      earlier_clusters: record.earlierClusters?.map(clusterToWire),
      sweep: record.sweep,
      hub_push: record.hubPush === undefined ? undefined : hubPushToJson(record.hubPush),
    },
    record.extraFields,
  );
}
