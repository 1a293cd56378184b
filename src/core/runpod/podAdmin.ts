/**
 * The account's pods as overbrainer sees them, and their removal (spec §9,
 * `pod ls`, `pod rm`, the stray warning before each `train`): every pod with a
 * run marker or named `overbrainer-*`, matched with `runs/`, plus the pods
 * `runs/` records that the account's list no longer shows. The CLI prints the
 * rows as a table; the extension's Pods view renders the same model.
 *
 * Nothing here deletes a pod because it "looks gone", and nothing deletes a pod
 * without `pod rm`: `listPods` only looks and records what it confirmed.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isAbortError, rfc3339 } from '../clock';
import type { RunState } from '../events';
import { isRunsError } from '../runs/errors';
import { noPodLeft, SSH_DIR } from '../runs/store';
import { isValidRunId } from '../runs/ids';
import type { RunLock } from '../runs/lock';
import type { PodRecord } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import type { Pod } from './api';
import { HOST_KEY_SECRET_PREFIX, log, type PodCtx } from './context';
import { forgetClientKey } from './keys';
import { goneBy } from './lease';
import { PodError } from './podError';
import { forgetKeys, lookUpAll, messageOf, remove, type Look } from './remove';

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

  constructor(ctx: PodCtx) {
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
        log(ctx, 'warn', `skipping the unreadable pod record of run ${id}: ${messageOf(error)}`);
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
    const { kind, note } = this.classify(runId, pod.id);
    return {
      runId: runId === null ? null : cell(runId),
      podId: pod.id,
      status: cell(pod.status),
      gpu: pod.gpu ? cell(pod.gpu.id) : null,
      costPerHourUsd: pod.costPerHourUsd > 0 ? pod.costPerHourUsd : null,
      created: pod.createdAt === null ? null : cell(pod.createdAt),
      note,
      kind,
      orphan: isOrphan(kind),
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
  const pods = await ctx.client.listPods({ signal: options.signal });
  const known = new Known(ctx);
  const rows = known.listed(pods);
  if (options.lookUpUnlisted === false) return sortRows(rows);
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
          record.setStrayPods(record.strayPods.filter((id) => id !== entry.podId)),
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
function editPodRecord(
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
    log(ctx, 'warn', `cannot update the pod record of run ${runId}: ${messageOf(error)}`);
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

// ---------------------------------------------------------------------------
// pod rm

export type PodAdminErrorKind =
  /** The run is not in this project's runs/ (its pods may belong to another checkout). */
  | 'not_in_runs'
  /** The run is still starting its pod: a pod being provisioned is never put at risk. */
  | 'still_starting'
  /** The run is in progress but its training pod is not recorded: any pod of it may be training. */
  | 'pod_not_recorded'
  /** The run is in progress (or followed by another client): its training pod was kept. */
  | 'run_still_running';

/** A `pod rm` refusal: what was (not) done, and the next action. */
export class PodAdminError extends Error {
  constructor(
    readonly kind: PodAdminErrorKind,
    message: string,
    readonly hint: string | null = null,
  ) {
    super(message);
    this.name = 'PodAdminError';
  }
}

/** A pod `pod rm` deleted (confirmed gone). */
export interface RemovedPod {
  podId: string;
  /** How long it existed, when recorded (the run's own pod only). */
  uptimeMs: number | null;
  /** Its rate times its uptime, when both are recorded. */
  estimatedSpendUsd: number | null;
}

/** What `pod rm` did: the pods it deleted, even when it failed, and how it ended. */
export interface Removal {
  runId: string;
  removed: RemovedPod[];
  /** Null on success; a {@link PodAdminError} refusal, or the first failure (a PodError, an ApiError, a RunsError). */
  error: unknown;
}

export interface RemoveOptions {
  /** Delete even the training pod of a run in progress, and the pods of a run not in runs/. */
  force?: boolean;
}

/**
 * `pod rm RUN_ID`: deletes the run's recorded pod (even kept; `deleted_by:
 * pod_rm`), its strays, and any other pod carrying its marker; every delete is
 * sent and confirmed. Without `force`, it refuses a run not in runs/
 * (`not_in_runs`), a run still starting its pod (`still_starting`: preparing,
 * or running with a last create call that has no pod), and a run in progress
 * whose pod is not recorded (`pod_not_recorded`), deleting nothing; for a run
 * in progress with a recorded pod it deletes only the other pods and fails with
 * `run_still_running` naming what it kept and deleted. A run another client
 * follows (its lock is held) counts as in progress. Forced, a run in progress
 * whose pod was deleted is saved `failed` ({@link FAILED_BY_POD_RM}). The run's
 * keys are forgotten once every pod is gone. Never throws: see {@link Removal}.
 */
export async function removePods(
  ctx: PodCtx,
  runId: string,
  options: RemoveOptions = {},
): Promise<Removal> {
  const removed: RemovedPod[] = [];
  const held: { lock: RunLock | null } = { lock: null };
  try {
    const outcome = await removeChecked(ctx, runId, options.force ?? false, removed, held);
    return { runId, removed, error: outcome };
  } catch (error) {
    return { runId, removed, error };
  } finally {
    held.lock?.dispose();
  }
}

/**
 * Deletes one pod by its ID, confirmed gone like every delete: the Pods view's Remove on a pod
 * of no run (no run marker, so `pod rm RUN_ID` cannot name it). A pod of a known run goes
 * through {@link removePods} instead, with its rules. Throws when the delete fails or stays
 * unconfirmed (a PodError `not_deleted`: it may still bill).
 */
export async function removePodById(ctx: PodCtx, podId: string): Promise<RemovedPod> {
  await deleteConfirmed(ctx, '', podId, 'requested');
  return { podId, uptimeMs: null, estimatedSpendUsd: null };
}

async function removeChecked(
  ctx: PodCtx,
  runId: string,
  force: boolean,
  removed: RemovedPod[],
  held: { lock: RunLock | null },
): Promise<unknown> {
  ctx.store.runDir(runId); // an ID that would leave runs/ throws here
  let run: RunRecord | null = null;
  try {
    run = ctx.store.loadRun(runId);
  } catch (error) {
    if (!isRunsError(error, 'not_found')) {
      // A damaged run.json never blocks a forced removal either.
      if (!force) throw error;
      log(ctx, 'warn', `${messageOf(error)}: looking for the pods of run ${runId} by their marker`);
    } else if (!force) {
      return new PodAdminError(
        'not_in_runs',
        `run ${runId} is not in this project's runs/: its pods may belong to another checkout; if none owns it, pass --force`,
        `Check "overbrainer pod ls"; if no other checkout owns run ${runId}, run "overbrainer pod rm ${runId} --force".`,
      );
    }
  }
  // Another live client following the run (a VS Code window, another CLI) makes it a run in
  // progress: without --force its pod stays; with it, the follower finds the pod gone.
  let follower: string | null = null;
  if (run !== null) {
    const lock = ctx.store.lock(runId, POD_RM_OWNER);
    if (lock === null) {
      const holder = ctx.store.lockHolder(runId);
      follower = holder
        ? `${holder.owner ?? 'another client'}, pid ${holder.pid ?? '?'}`
        : 'another client';
    } else {
      held.lock = lock;
    }
  }
  const state: RunState | null = run?.state ?? null;
  const runInProgress = state === 'preparing' || state === 'running';
  const inProgress = runInProgress || follower !== null;
  let record: PodRecord | null = null;
  try {
    record = run === null ? null : ctx.store.loadPod(runId);
  } catch (error) {
    // A damaged pod.json never blocks removal: forced, the run's pods are found by their marker.
    if (!force) throw error;
    log(ctx, 'warn', `${messageOf(error)}: looking for the pods of run ${runId} by their marker`);
  }
  if (!force && starting(state, record)) {
    return new PodAdminError(
      'still_starting',
      `run ${runId} is still starting its pod; wait for it, or use \`overbrainer train cancel ${runId}\` once it runs, or \`pod rm ${runId} --force\``,
      'A pod being provisioned is deleted by its own run if it fails; nothing was deleted.',
    );
  }
  const keepTraining = inProgress && !force;
  const training =
    record !== null && record.state !== 'deleted' && record.podId !== null ? record.podId : null;
  if (keepTraining && training === null) {
    return new PodAdminError(
      'pod_not_recorded',
      `run ${runId} is in progress but its pod is not recorded, so its pods are left alone; if the run is really dead, use \`overbrainer pod rm ${runId} --force\``,
      null,
    );
  }
  let failed: unknown = null;
  const note = (error: unknown): void => {
    if (failed === null) failed = error;
  };
  if (!keepTraining && record !== null && training !== null) {
    const uptimeMs = record.uptimeMs(ctx.clock.nowMs());
    try {
      await remove(ctx, record, 'requested', 'pod_rm');
      removed.push({ podId: training, uptimeMs, estimatedSpendUsd: record.estimatedSpendUsd });
    } catch (error) {
      note(error);
    }
  }
  const tried = new Set<string>(training === null ? [] : [training]);
  if (run !== null) await removeStrays(ctx, runId, removed, tried, note);
  await removeMarked(ctx, runId, removed, tried, note);
  if (runInProgress && !keepTraining && removed.length > 0) {
    try {
      const fresh = ctx.store.loadRun(runId);
      fresh.state = 'failed';
      fresh.message = FAILED_BY_POD_RM;
      ctx.store.saveRun(fresh);
      ctx.bus.publish({ type: 'runState', runId, state: 'failed', message: FAILED_BY_POD_RM });
    } catch (error) {
      note(error);
    }
  }
  if (failed !== null) return failed;
  if (keepTraining) {
    const others = removed.map((pod) => pod.podId);
    const deleted = others.length === 0 ? '' : `its other pods ${others.join(', ')} were deleted`;
    const kept =
      training === null
        ? deleted === ''
          ? ''
          : `: ${deleted}`
        : `: its training pod ${training} was kept${deleted === '' ? '' : `, and ${deleted}`}`;
    const subject =
      runInProgress || follower === null
        ? `run ${runId} is still running`
        : `run ${runId} is followed by another client (${follower})`;
    return new PodAdminError(
      'run_still_running',
      `${subject}${kept}; stop it with \`overbrainer train cancel ${runId}\` first, or pass --force`,
      null,
    );
  }
  if (run !== null) await forgetKeys(ctx, runId);
  return null;
}

/**
 * Whether the run is still starting its pod: preparing, or running with a last
 * create call that has no pod yet. Provisioning sweeps its own duplicates.
 */
function starting(state: RunState | null, record: PodRecord | null): boolean {
  if (state === 'preparing') return true;
  if (state !== 'running') return false;
  const last = record?.attempts[record.attempts.length - 1];
  return last !== undefined && last.podId === undefined;
}

/** Deletes each stray of the run, dropping it from `stray_pods` once confirmed gone. */
async function removeStrays(
  ctx: PodCtx,
  runId: string,
  removed: RemovedPod[],
  tried: Set<string>,
  note: (error: unknown) => void,
): Promise<void> {
  let strays: string[];
  try {
    strays = ctx.store.loadPod(runId)?.strayPods ?? [];
  } catch {
    // Unreadable (reported above): every stray carries the run marker, which removeMarked sweeps.
    return;
  }
  for (const id of strays) {
    if (tried.has(id)) continue;
    tried.add(id);
    try {
      await deleteConfirmed(ctx, runId, id, 'duplicate');
      editPodRecord(ctx, runId, (record) =>
        record.setStrayPods(record.strayPods.filter((stray) => stray !== id)),
      );
      removed.push({ podId: id, uptimeMs: null, estimatedSpendUsd: null });
    } catch (error) {
      log(ctx, 'warn', `cannot confirm the deletion of stray pod ${id}: ${messageOf(error)}`);
      note(error);
    }
  }
}

/** Deletes every other listed pod carrying the run's marker; one whose delete fails becomes a stray. */
async function removeMarked(
  ctx: PodCtx,
  runId: string,
  removed: RemovedPod[],
  tried: Set<string>,
  note: (error: unknown) => void,
): Promise<void> {
  let pods: Pod[];
  try {
    pods = await ctx.client.listPods({ runMarker: runId });
  } catch (error) {
    note(error);
    return;
  }
  // Listed: a create that went unanswered is unconfirmed no more (its pod, if any, is below).
  editPodRecord(ctx, runId, (record) => {
    if (!record.unconfirmedCreate) return false;
    record.unconfirmedCreate = false;
    if (record.podId === null && record.state === 'creating') {
      record.state = 'deleted';
      record.deletedAt = rfc3339(ctx.clock.nowMs());
    }
    return true;
  });
  for (const pod of pods) {
    if (pod.runMarker !== runId || tried.has(pod.id)) continue;
    tried.add(pod.id);
    try {
      await deleteConfirmed(ctx, runId, pod.id, 'duplicate');
      removed.push({ podId: pod.id, uptimeMs: null, estimatedSpendUsd: null });
    } catch (error) {
      const recorded = editPodRecord(ctx, runId, (record) =>
        record.setStrayPods([...record.strayPods, pod.id]),
      );
      log(
        ctx,
        'warn',
        `cannot confirm the deletion of pod ${pod.id}: ${messageOf(error)}${recorded ? '' : ' (and it is not recorded as a stray)'}`,
      );
      note(error);
    }
  }
}

/**
 * Deletes the pod `id` (not the run's recorded pod) and confirms it gone: the
 * delete is always sent, then the pod is looked at until Runpod answers its
 * 404, for `deleteConfirmMs`. Throws when the delete fails or stays unconfirmed.
 */
async function deleteConfirmed(
  ctx: PodCtx,
  runId: string,
  id: string,
  reason: 'duplicate' | 'requested',
): Promise<void> {
  ctx.bus.publish({ type: 'pod', runId, status: { kind: 'deleting', podId: id, reason } });
  await ctx.client.deletePod(id);
  const untilMs = ctx.clock.nowMs() + ctx.timing.deleteConfirmMs;
  let lastError: unknown;
  for (;;) {
    try {
      if ((await ctx.client.getPod(id)) === null) {
        ctx.bus.publish({
          type: 'pod',
          runId,
          status: { kind: 'deleted', podId: id, uptimeMs: null, estimatedSpendUsd: null },
        });
        return;
      }
      lastError = undefined;
    } catch (error) {
      if (isAbortError(error)) throw error;
      lastError = error;
    }
    if (ctx.clock.nowMs() >= untilMs) break;
    await ctx.clock.sleep(ctx.timing.deletePollMs);
  }
  throw new PodError(
    'not_deleted',
    lastError === undefined
      ? `pod ${id} may still exist and bill: it still shows ${Math.round(ctx.timing.deleteConfirmMs / 1000)} s after its delete`
      : `pod ${id} may still exist and bill: it cannot be looked up after its delete: ${messageOf(lastError)}`,
    `Check it with "overbrainer pod ls" and run "overbrainer pod rm ${runId}" again.`,
  );
}

/**
 * At `train`'s start (after the orphan warning): deletes the host-key secret (a pod's private
 * host key, kept as an account secret) of every run of runs/ that ended and has no pod left,
 * with its private client key: a client killed before it could forget them leaves them behind.
 * A run is left alone while it is preparing or running, while a client holds its lock, while its
 * records say a pod may exist, while `rows` (the pods Runpod lists) show a pod carrying its
 * marker, and when it is not in runs/ (another checkout may own it). Returns the runs swept.
 */
export async function sweepHostKeySecrets(ctx: PodCtx, rows: readonly PodRow[]): Promise<string[]> {
  const listed = new Set(rows.map((row) => row.runId));
  const swept: string[] = [];
  for (const secret of await ctx.client.listSecrets()) {
    if (!secret.name.startsWith(HOST_KEY_SECRET_PREFIX)) continue;
    const runId = secret.name.slice(HOST_KEY_SECRET_PREFIX.length);
    if (!isValidRunId(runId) || listed.has(runId)) continue;
    let run: RunRecord;
    try {
      run = ctx.store.loadRun(runId);
    } catch {
      continue; // not in runs/, or unreadable: not ours to judge
    }
    if (run.state === 'preparing' || run.state === 'running') continue;
    if (ctx.store.lockHolder(runId) !== null || !noPodLeft(ctx.store, runId)) continue;
    try {
      await ctx.client.deleteSecret(secret.id);
    } catch (error) {
      log(
        ctx,
        'warn',
        `cannot delete the host-key secret of ended run ${runId}: ${messageOf(error)}`,
      );
      continue;
    }
    forgetClientKey(path.join(ctx.store.runDir(runId), SSH_DIR));
    swept.push(runId);
  }
  return swept;
}

/**
 * `pod rm ID` for an ID that names no run of runs/: when Runpod lists a pod with that ID (as
 * `pod ls` shows it), that one pod is deleted, confirmed gone, after the same refusals as
 * `pod rm RUN_ID`: a stray, a pod of an ended run, of a run not in runs/ or without a marker goes
 * at once; the pod a run trains on, or a kept or awaiting pod, is its run's: without `force` that
 * is refused naming the run, with it the run's own `pod rm RUN_ID --force` does it (its records
 * follow). Otherwise the ID is taken as a run's ({@link removePods}). Never throws.
 */
export async function removeRunOrPod(
  ctx: PodCtx,
  id: string,
  options: RemoveOptions = {},
): Promise<Removal> {
  let isRun: boolean;
  try {
    isRun = fs.existsSync(ctx.store.runDir(id));
  } catch {
    // Not an ID runs/ can hold (it would leave runs/): refused there, without an API call.
    isRun = true;
  }
  if (isRun) return removePods(ctx, id, options);
  let rows: PodRow[];
  try {
    rows = await listPods(ctx, { lookUpUnlisted: false });
  } catch (error) {
    return { runId: id, removed: [], error };
  }
  const row = rows.find((r) => r.podId === id && r.status !== 'GONE');
  if (row === undefined) return removePods(ctx, id, options);
  const runId = row.runId;
  if (runId !== null && !isOrphan(row.kind) && row.kind !== 'stray') {
    if (!options.force) {
      return {
        runId,
        removed: [],
        error: new PodAdminError(
          'run_still_running',
          `pod ${id} is the pod of run ${runId} (${row.note || row.kind}): nothing was deleted`,
          `Remove it with "overbrainer pod rm ${runId}", or pass --force.`,
        ),
      };
    }
    return removePods(ctx, runId, { force: true });
  }
  try {
    const removed = await removePodById(ctx, id);
    if (runId !== null && isValidRunId(runId)) {
      editPodRecord(ctx, runId, (record) => {
        if (!record.strayPods.includes(id)) return false;
        record.setStrayPods(record.strayPods.filter((stray) => stray !== id));
        return true;
      });
    }
    return { runId: runId ?? id, removed: [removed], error: null };
  } catch (error) {
    return { runId: runId ?? id, removed: [], error };
  }
}
