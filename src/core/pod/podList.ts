/**
 * The account's pods as overbrainer sees them (`pod ls`, the stray warning before each
 * `train`): every pod with a run marker or named `overbrainer-*`, matched with `runs/`, plus the
 * pods `runs/` records that the account's list no longer shows. The CLI prints the rows as a
 * table; the extension's Pods view renders the same model.
 *
 * Nothing here deletes a pod because it "looks gone": `listPods` only looks and records what it
 * confirmed.
 */
import { isValidRunId } from '../runs/ids';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import type { Pod } from '../runpod/api';
import { log, type PodCtx } from './context';
import { goneBy } from './lease';
import { forgetKeys, lookUpAll, type Look } from './remove';
import { describeError } from '../errors';
import { memberClass } from './clusterRows';

/** Characters kept of a cell taken from the Runpod account (or a local record). */
export const CELL_CHARS = 64;

/** The note of a stray: a pod carrying a run's marker that its pod.json does not hold as its pod. */
export const STRAY_NOTE = 'stray, not deleted';
/** The note of a pod named like overbrainer's without a usable run marker. */
export const NO_MARKER_NOTE = 'no run marker';
/** The note of a pod whose run directory holds a run.json that cannot be read. */
export const UNREADABLE_NOTE = 'run record unreadable';
/** The message a forced `pod rm` leaves in the run.json of a run in progress. */
export const FAILED_BY_POD_RM = 'pod deleted by `pod rm` before its results were retrieved';
/** Who `pod rm` says it is, in the run lock. */
export const POD_RM_OWNER = 'overbrainer pod rm';

/** What overbrainer knows of a pod of `pod ls`. */
export type PodRowKind =
  /** Its run is preparing or running. */
  | 'in_progress'
  /** Its run has ended, and the pod is still there: nothing will delete it but its watchdog, or `pod rm`. */
  | 'ended'
  /** Kept (`--keep-pod` or at runtime): only `pod rm` deletes it. */
  | 'kept'
  /** Its results were not retrieved; its watchdog deletes it after its retrieve grace. */
  | 'awaiting_retrieval'
  /** One of its run's `stray_pods`, or a pod carrying the marker other than the run's recorded pod. */
  | 'stray'
  /** A stray beside the run's kept or awaiting pod: `pod rm` of the run deletes that pod too. */
  | 'stray_beside_kept'
  /** Its run is not in this project's runs/: it may belong to another checkout. */
  | 'not_in_runs'
  /** Its run directory is here, but the run record cannot be read. */
  | 'unreadable'
  /** Named like overbrainer's pods, but without a usable run marker. */
  | 'no_marker'
  /** Recorded in runs/, and now confirmed gone (recorded deleted). */
  | 'gone';

/** A row of `pod ls`. Every text from the account is one line of at most {@link CELL_CHARS} printable ASCII characters. */
export interface PodRow {
  /** The run the pod belongs to (its marker, or the run recording it); null without one. */
  runId: string | null;
  podId: string;
  /** What Runpod says (`RUNNING`…), `GONE` for a recorded pod confirmed gone, `UNCHECKED` when its look failed. */
  status: string;
  gpu: string | null;
  /** USD per hour as Runpod reports it; null when unknown (or 0: not billing the GPU now). */
  costPerHourUsd: number | null;
  /** When it was created (Runpod's text, or the local record's). */
  created: string | null;
  /** What overbrainer knows of it, in words. */
  note: string;
  kind: PodRowKind;
  /** Whether nothing will delete it on its own (see {@link isOrphan}). */
  orphan: boolean;
  /** A member of an Instant Cluster: its cluster and rank (absent for a pod of its own). */
  cluster?: { id: string; rank: number | null };
}

/**
 * Whether nothing deletes the pod of `kind` on its own: its run ended, it is a
 * stray, its run is not here, or it has no marker. A kept pod, or one awaiting
 * retrieval, is not (the user chose it, or its watchdog deletes it).
 */
export function isOrphan(kind: PodRowKind): boolean {
  return (
    kind === 'ended' ||
    kind === 'stray' ||
    kind === 'stray_beside_kept' ||
    kind === 'not_in_runs' ||
    kind === 'no_marker'
  );
}

/** `text` as one short line of printable ASCII (account text may hold anything). */
export function cell(text: string): string {
  return [...text]
    .filter((c) => c >= ' ' && c <= '~')
    .slice(0, CELL_CHARS)
    .join('');
}

/** The note of a run absent from runs/: how to remove its pods if no other checkout owns them. */
export function notInRunsNote(runId: string): string {
  return `not in this project's runs/; if no other checkout owns it, \`overbrainer pod rm ${runId} --force\``;
}

/** What runs/ holds, read once per listing. */
class Known {
  readonly runs = new Map<string, RunRecord>();
  readonly pods = new Map<string, PodRecord>();
  readonly unreadable = new Set<string>();

  constructor(ctx: Pick<PodCtx, 'store' | 'bus'>) {
    const listed = ctx.store.list();
    for (const run of listed.runs) this.runs.set(run.id, run);
    for (const warning of listed.warnings) {
      this.unreadable.add(warning.runId);
      log(ctx, 'warn', warning.message);
    }
    for (const id of this.runs.keys()) {
      try {
        const pod = ctx.store.loadPod(id);
        if (pod) this.pods.set(id, pod);
      } catch (error) {
        log(
          ctx,
          'warn',
          `skipping the unreadable pod record of run ${id}: ${describeError(error)}`,
        );
      }
    }
  }

  /** Whether `id` is among the strays a pod.json records. */
  private isStray(id: string): boolean {
    for (const pod of this.pods.values()) if (pod.strayPods.includes(id)) return true;
    return false;
  }

  /** What runs/ says of the pod `podId` carrying the marker `runId`. */
  classify(runId: string | null, podId: string): { kind: PodRowKind; note: string } {
    if (runId === null || !isValidRunId(runId)) return { kind: 'no_marker', note: NO_MARKER_NOTE };
    const run = this.runs.get(runId);
    if (!run) {
      if (this.unreadable.has(runId)) return { kind: 'unreadable', note: UNREADABLE_NOTE };
      return { kind: 'not_in_runs', note: notInRunsNote(runId) };
    }
    const pod = this.pods.get(runId);
    // Another pod carrying the marker (left by an unclear create) is a stray: the run's
    // state says nothing about it, and beside a kept pod no watchdog would delete it.
    const extra = pod !== undefined && pod.podId !== null && pod.podId !== podId;
    if (extra || this.isStray(podId)) {
      const besideKept = pod?.state === 'kept' || pod?.state === 'awaiting_retrieval';
      return { kind: besideKept ? 'stray_beside_kept' : 'stray', note: STRAY_NOTE };
    }
    if (pod?.state === 'kept') return { kind: 'kept', note: 'kept' };
    if (pod?.state === 'awaiting_retrieval') {
      return { kind: 'awaiting_retrieval', note: 'awaiting retrieval' };
    }
    if (run.state === 'preparing' || run.state === 'running') {
      return { kind: 'in_progress', note: `run ${run.state}` };
    }
    return { kind: 'ended', note: `run ${run.state}, not deleted` };
  }

  /** The row of a pod the API shows, carrying `runId` (its marker, or the run recording it). */
  row(runId: string | null, pod: Pod): PodRow {
    const member = pod.cluster;
    const { kind, note } =
      member === null
        ? this.classify(runId, pod.id)
        : memberClass(runId, member.clusterId, this.runs, this.unreadable);
    return {
      runId: runId === null ? null : cell(runId),
      podId: pod.id,
      status: cell(pod.status),
      gpu: pod.gpu ? cell(pod.gpu.id) : null,
      costPerHourUsd: pod.costPerHourUsd > 0 ? pod.costPerHourUsd : null,
      created: pod.createdAt === null ? null : cell(pod.createdAt),
      note:
        member === null
          ? note
          : cell(`node ${member.rank ?? '?'} of cluster ${member.clusterId}; ${note}`),
      kind,
      orphan: isOrphan(kind),
      ...(member === null ? {} : { cluster: { id: cell(member.clusterId), rank: member.rank } }),
    };
  }

  /** The row of a recorded pod the API did not show, from what pod.json says. */
  recordedRow(entry: Unlisted, status: string, kind: PodRowKind, note: string): PodRow {
    const record = entry.stray ? undefined : this.pods.get(entry.runId);
    return {
      runId: entry.runId,
      podId: entry.podId,
      status,
      gpu: record?.gpuType ? cell(record.gpuType) : null,
      costPerHourUsd: record?.costPerHourUsd ?? null,
      created: record?.createdAt ? cell(record.createdAt) : null,
      note,
      kind,
      orphan: isOrphan(kind),
    };
  }

  /** The pods of `pods` overbrainer created: those with a run marker or named `overbrainer-*`. */
  listed(pods: readonly Pod[]): PodRow[] {
    return pods
      .filter((pod) => pod.runMarker !== null || pod.name.startsWith('overbrainer-'))
      .map((pod) => this.row(pod.runMarker, pod));
  }

  /** The recorded pods and strays that `pods` does not show. */
  unlisted(pods: readonly Pod[]): Unlisted[] {
    const shown = new Set(pods.map((pod) => pod.id));
    const out: Unlisted[] = [];
    for (const [runId, record] of this.pods) {
      if (record.podId !== null && record.state !== 'deleted' && !shown.has(record.podId)) {
        out.push({ runId, podId: record.podId, stray: false });
      }
      for (const id of record.strayPods) {
        if (!shown.has(id) && id !== record.podId) out.push({ runId, podId: id, stray: true });
      }
    }
    return out;
  }
}

interface Unlisted {
  runId: string;
  podId: string;
  stray: boolean;
}

function sortRows(rows: PodRow[]): PodRow[] {
  const key = (row: PodRow): string => `${row.runId ?? '-'}\u0000${row.podId}`;
  return rows.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

export interface ListPodsOptions {
  /**
   * Look up the recorded pods the list does not show (default true): each is
   * looked at `goneLooks` times, `goneIntervalMs` apart, then against a second
   * list, and recorded deleted only once confirmed gone. `false` gives only
   * what one list shows (the stray warning before `train`): nothing is recorded.
   */
  lookUpUnlisted?: boolean;
  signal?: AbortSignal;
}

/**
 * `pod ls`: every pod of the account with a run marker or named
 * `overbrainer-*`, plus the pods runs/ records (a run's pod and its strays)
 * that the list does not show. A recorded pod confirmed gone is recorded
 * `deleted` in its pod.json (its row says `GONE`), a stray confirmed gone is
 * dropped from `stray_pods` (no row); a pod whose look failed keeps a row with
 * status `UNCHECKED`. Rows are sorted by run, then pod. Throws the ApiError of
 * the account's list, or a RunsError when runs/ cannot be read.
 */
export async function listPods(ctx: PodCtx, options: ListPodsOptions = {}): Promise<PodRow[]> {
  // Cluster members too: Runpod lists them only when asked.
  const pods = await ctx.client.listPods({ signal: options.signal, includeClusterPods: true });
  if (options.lookUpUnlisted === false) return podRows(ctx, pods);
  const known = new Known(ctx);
  const rows = known.listed(pods);
  const unlisted = known.unlisted(pods);
  if (unlisted.length > 0) {
    const looks = await lookUpAll(
      ctx,
      unlisted.map((entry) => entry.podId),
      options.signal,
    );
    const gone: string[] = [];
    unlisted.forEach((entry, index) => {
      const look: Look = looks[index] ?? { kind: 'failed', message: 'the pod was not looked at' };
      const row = settle(ctx, known, entry, look, gone);
      if (row) rows.push(row);
    });
    // Every pod of those runs is confirmed gone: their keys are of no use any more.
    for (const runId of gone) await forgetKeys(ctx, runId);
  }
  return sortRows(rows);
}

/**
 * The rows of the pods of one listing of the account, classified against `runs/` as `pod ls`
 * does, without looking anything up: what that one list shows, sorted; nothing is recorded.
 */
export function podRows(ctx: Pick<PodCtx, 'store' | 'bus'>, pods: readonly Pod[]): PodRow[] {
  return sortRows(new Known(ctx).listed(pods));
}

/** The row of an unlisted recorded pod once looked up, recording it gone when it is. */
function settle(
  ctx: PodCtx,
  known: Known,
  entry: Unlisted,
  look: Look,
  gone: string[],
): PodRow | null {
  switch (look.kind) {
    case 'found':
      return known.row(entry.runId, look.pod);
    case 'gone':
      if (entry.stray) {
        editPodRecord(ctx, entry.runId, (record) =>
          record.setStrayPods(
            record.strayPods.filter((id) => id !== entry.podId),
            ctx.clock.nowMs(),
          ),
        );
        log(ctx, 'info', `stray pod ${entry.podId} of run ${entry.runId} is gone`);
        return null;
      }
      if (recordGone(ctx, entry.runId, entry.podId)) gone.push(entry.runId);
      return known.recordedRow(entry, 'GONE', 'gone', 'gone');
    case 'failed': {
      log(ctx, 'warn', `cannot look up pod ${entry.podId} of run ${entry.runId}: ${look.message}`);
      const { kind, note } = known.classify(entry.runId, entry.podId);
      return known.recordedRow(entry, 'UNCHECKED', kind, note);
    }
  }
}

/**
 * Records the pod `podId` of the run gone, on a fresh pod.json, when it is
 * still the run's pod (another process may have changed the record since it
 * was listed). Deleted by its watchdog past its deadline, else by nobody known.
 * Whether the run now has no pod left (no stray either): its keys can go.
 */
function recordGone(ctx: PodCtx, runId: string, podId: string): boolean {
  const nowMs = ctx.clock.nowMs();
  const record = editPodRecord(ctx, runId, (pod) => {
    if (pod.podId !== podId || pod.state === 'deleted') return false;
    pod.deleted(goneBy(pod, nowMs), nowMs);
    return true;
  });
  return record !== null && !record.mayHaveOtherPods();
}

/**
 * Applies `edit` to the run's pod.json read again just before, and saves it
 * (unless `edit` returns false), so a concurrent writer is not overwritten
 * with a stale copy. Returns the saved record; null when there is none or it
 * cannot be read or written (warned about).
 */
export function editPodRecord(
  ctx: PodCtx,
  runId: string,
  edit: (record: PodRecord) => boolean | void,
): PodRecord | null {
  try {
    const record = ctx.store.loadPod(runId);
    if (record === null) return null;
    if (edit(record) === false) return null;
    ctx.store.savePod(record);
    return record;
  } catch (error) {
    log(ctx, 'warn', `cannot update the pod record of run ${runId}: ${describeError(error)}`);
    return null;
  }
}

/** The rows as the aligned table `pod ls` prints, header first; nothing when there is no row. */
export function podTable(rows: readonly PodRow[]): string[] {
  if (rows.length === 0) return [];
  const pad = (text: string, width: number): string => text.padEnd(width);
  const line = (cells: string[], rate: string): string =>
    `${pad(cells[0] ?? '', 28)}  ${pad(cells[1] ?? '', 14)}  ${pad(cells[2] ?? '', 12)}  ${pad(cells[3] ?? '', 24)}  ${rate.padStart(5)}  ${pad(cells[4] ?? '', 20)}  ${cells[5] ?? ''}`.trimEnd();
  return [
    line(['RUN', 'POD', 'STATUS', 'GPU', 'CREATED', 'NOTE'], '$/H'),
    ...rows.map((row) =>
      line(
        [row.runId ?? '-', row.podId, row.status, row.gpu ?? '-', row.created ?? '-', row.note],
        row.costPerHourUsd === null ? '-' : row.costPerHourUsd.toFixed(2),
      ),
    ),
  ];
}

/** One warning per orphan among `rows`, saying how to remove it. Never deletes anything. */
export function orphanWarnings(rows: readonly PodRow[]): string[] {
  return rows
    .filter((row) => row.orphan)
    .map((row) => {
      const rate = row.costPerHourUsd === null ? '' : ` at $${row.costPerHourUsd.toFixed(2)}/h`;
      switch (row.kind) {
        case 'no_marker':
          return `pod ${row.podId} is named like an overbrainer pod but has no run marker; if it is yours, delete it from the Runpod console`;
        case 'not_in_runs':
          return `pod ${row.podId} is still on Runpod${rate}: ${row.note}`;
        case 'stray_beside_kept':
          return `pod ${row.podId} (${row.note}) is still on Runpod${rate}: remove it with \`overbrainer pod rm ${row.runId ?? ''}\` (this also deletes the run's kept pod)`;
        default:
          return `pod ${row.podId} (${row.note}) is still on Runpod${rate}: remove it with \`overbrainer pod rm ${row.runId ?? ''}\``;
      }
    });
}

/**
 * The warning shown before each `train` (and by the extension before a run):
 * the pods nothing will delete on their own — a run that ended with its pod
 * alive, strays, pods of runs not in this project's runs/, pods without a run
 * marker — one sentence per pod; null when there is none. Never deletes.
 */
export function strayWarning(rows: readonly PodRow[]): string | null {
  const warnings = orphanWarnings(rows);
  if (warnings.length === 0) return null;
  return warnings.join('\n');
}
