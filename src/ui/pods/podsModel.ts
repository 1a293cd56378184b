import { systemClock, type Clock } from '../../core/clock';
import { type Pod, ApiError, type PodRow, type PodRowKind } from '../../core/flow/pods';
import { LazyList } from '../lazyList';
import type { RunSummary } from '../runs/runsModel';
import { describeError } from '../../core/errors';

export { classifyAccountPods } from '../../core/flow/pods';

/**
 * The Pods view's model, free of the `vscode` module: every pod of the Runpod account that
 * carries a run marker (the core's `listPods`, as `pod ls` shows it), classified against the
 * workspace's runs/ records, with strays and orphans flagged. The account is listed at most once
 * per ACCOUNT_LIST_INTERVAL_MS (enforced here, with the injected clock): a refresh inside that
 * interval classifies the cached list again against fresh records and says when it was fetched.
 * Without an API key, or with Runpod unreachable, it falls back to the pods the local run records
 * say may exist (`podsFromRuns`) plus a message item with the next action.
 */

/** The account's pod list is fetched at most once per this interval. */
export const ACCOUNT_LIST_INTERVAL_MS = 60_000;

/** Refreshes asked within this delay (a burst of lifecycle events) are one refresh. */
export const PODS_REFRESH_DEBOUNCE_MS = 500;

export type PodRole =
  'running' | 'kept' | 'awaiting' | 'deleting' | 'stray' | 'orphan' | 'unreadable';

export interface PodEntry {
  podId: string;
  role: PodRole;
  /** The run the pod belongs to, when known. */
  runId: string | null;
  /** The run's directory when this workspace holds it (commands read it); null for an orphan without one. */
  runDir: string | null;
  gpuType: string | null;
  costPerHourUsd: number | null;
  deadlineUnixS: number | null;
  /** What Runpod says (`RUNNING`…); null when the entry comes from the local records only. */
  status?: string | null;
  /** What overbrainer knows of it, in words (the `pod ls` note). */
  note?: string | null;
  /** Where the entry comes from: the account's list, or only the local records. */
  source?: 'account' | 'records';
}

/** A row that is not a pod: why the list is incomplete, and what to do. */
export interface PodsMessage {
  kind: 'message';
  severity: 'info' | 'warning' | 'error';
  text: string;
  detail: string;
  /** The command a click runs (the next action), if any. */
  command: { id: string; title: string } | null;
}

export type PodsItem = PodEntry | PodsMessage;

export function isPodsMessage(item: PodsItem): item is PodsMessage {
  return 'kind' in item && item.kind === 'message';
}

/** The role a recorded pod's state shows as; any other live state is `running`. */
const ROLE_OF_STATE: Readonly<Record<string, PodRole>> = {
  kept: 'kept',
  awaiting_retrieval: 'awaiting',
  deleting: 'deleting',
};

/**
 * The pods the run records say may still exist and bill: a run's pod (pod.json) and its strays,
 * or, for a run on a cluster (no pod.json), each member of its cluster not confirmed deleted.
 */
export function podsFromRuns(runs: readonly RunSummary[]): PodEntry[] {
  const pods: PodEntry[] = [];
  for (const run of runs) {
    const pod = run.pod;
    const cluster = run.cluster ?? null;
    if (pod === null && cluster !== null && cluster.deletedAt === null) {
      for (const node of cluster.nodes) {
        pods.push({
          podId: node.podId,
          role: 'running',
          runId: run.id,
          runDir: run.dir,
          gpuType: cluster.gpuTypeId,
          costPerHourUsd: cluster.costPerHourUsd,
          deadlineUnixS: node.deadlineUnixS,
          note: `node ${node.rank} of cluster ${cluster.id}`,
        });
      }
    }
    if (pod === null) continue;
    if (pod.podId !== null && pod.state !== 'deleted') {
      pods.push({
        podId: pod.podId,
        role: ROLE_OF_STATE[pod.state] ?? 'running',
        runId: run.id,
        runDir: run.dir,
        gpuType: pod.gpuType,
        costPerHourUsd: pod.costPerHourUsd,
        deadlineUnixS: pod.deadlineUnixS,
      });
    }
    for (const strayId of pod.strayPodIds) {
      pods.push({
        podId: strayId,
        role: 'stray',
        runId: run.id,
        runDir: run.dir,
        gpuType: null,
        costPerHourUsd: null,
        deadlineUnixS: null,
      });
    }
  }
  return pods;
}

/** The role a `pod ls` row kind shows as (the menus key on `pod.<role>`). */
export function roleOfKind(kind: PodRowKind): PodRole | null {
  switch (kind) {
    case 'in_progress':
      return 'running';
    case 'kept':
      return 'kept';
    case 'awaiting_retrieval':
      return 'awaiting';
    case 'stray':
    case 'stray_beside_kept':
      return 'stray';
    case 'ended':
    case 'not_in_runs':
    case 'no_marker':
      return 'orphan';
    case 'unreadable':
      return 'unreadable';
    case 'gone':
      return null;
  }
}

/** The account's pods (one API call), and their rows against the local records. */
export interface PodsSource {
  /** Lists the account's pods: one API call. Throws when there is no key or Runpod fails. */
  fetchAccountPods(): Promise<readonly Pod[]>;
  /** Classifies a listing against the runs folders' records (no API call). */
  classify(pods: readonly Pod[]): readonly PodRow[];
  /** The runs of the workspace, as the Runs view reads them (for the run directories). */
  localRuns(): Promise<readonly RunSummary[]>;
}

/** What the model knows of the account's listing, for the view's message. */
export interface AccountListing {
  /** When the account was last listed (successfully or not); null before the first call. */
  fetchedAtMs: number | null;
  /** Whether the shown pods come from that listing (false: from the local records only). */
  fromAccount: boolean;
  /** When the next call to the API is allowed. */
  nextFetchAtMs: number | null;
}

/** A failed listing as the view's message row: the reason and the next action. */
export function listingProblem(error: unknown): PodsMessage {
  if (
    typeof error === 'object' &&
    error !== null &&
    (error as { needsTrust?: unknown }).needsTrust === true
  ) {
    return {
      kind: 'message',
      severity: 'warning',
      text: 'Folder not trusted',
      detail:
        'This folder is not trusted: the account’s pods are not listed (no Runpod API call) until you trust it. Shown below: the pods this workspace’s run records say may exist.',
      command: { id: 'workbench.trust.manage', title: 'Manage Workspace Trust' },
    };
  }
  const needsKey =
    (typeof error === 'object' &&
      error !== null &&
      (error as { needsKey?: unknown }).needsKey === true) ||
    (error instanceof ApiError && error.kind === 'unauthorized');
  if (needsKey) {
    const refused = error instanceof ApiError;
    return {
      kind: 'message',
      severity: 'warning',
      text: refused ? 'Runpod refused the API key' : 'Set Runpod API Key',
      detail: refused
        ? 'Runpod answered 401: set a valid key to list the account’s pods. Shown below: the pods this workspace’s run records say may exist.'
        : 'No Runpod API key is set: the account’s pods cannot be listed. Shown below: the pods this workspace’s run records say may exist.',
      command: { id: 'overbrainer.setApiKey', title: 'Set Runpod API Key' },
    };
  }
  const reason = describeError(error);
  return {
    kind: 'message',
    severity: 'error',
    text: `Runpod unreachable: ${reason.split('\n')[0] ?? ''}`.slice(0, 200),
    detail:
      'The account’s pods could not be listed; shown below: the pods this workspace’s run records say may exist. Refresh to try again (at most once a minute), or check the overbrainer.runpod.baseUrl setting.',
    command: { id: 'overbrainer.refreshPods', title: 'Refresh Pods' },
  };
}

function entryOfRow(row: PodRow, runDirs: ReadonlyMap<string, string>): PodEntry | null {
  const role = roleOfKind(row.kind);
  if (role === null) return null;
  return {
    podId: row.podId,
    role,
    runId: row.runId,
    runDir: row.runId === null ? null : (runDirs.get(row.runId) ?? null),
    gpuType: row.gpu,
    costPerHourUsd: row.costPerHourUsd,
    deadlineUnixS: null,
    status: row.status,
    note: row.note,
    source: 'account',
  };
}

/**
 * The pods, loaded lazily: the account's list (cached for ACCOUNT_LIST_INTERVAL_MS) classified
 * against fresh records, or the records' own pods when the account cannot be listed. Refreshes
 * are debounced (a burst of lifecycle events is one refresh); the first load is immediate.
 */
export class PodsModel extends LazyList<PodsItem> {
  private cached: { pods: readonly Pod[]; atMs: number } | null = null;
  private lastCallMs: number | null = null;
  private lastError: unknown = null;
  private readonly deletedIds = new Set<string>();
  private pending: Promise<void> | null = null;
  private readonly abort = new AbortController();
  private readonly clock: Clock;
  private fromAccount = false;

  /**
   * `source` is a PodsSource (account and records), or — as before the account listing — a
   * plain loader of entries (no API call: the records only).
   */
  constructor(
    source: PodsSource | (() => Promise<readonly PodsItem[]>),
    options: { clock?: Clock; debounceMs?: number } = {},
  ) {
    const late: { model?: PodsModel } = {};
    super(() => (typeof source === 'function' ? source() : late.model!.load(source)));
    late.model = this;
    this.clock = options.clock ?? systemClock;
    this.debounceMs = options.debounceMs ?? PODS_REFRESH_DEBOUNCE_MS;
  }

  private readonly debounceMs: number;

  /** When the account was listed, and whether the pods shown come from it. */
  get listing(): AccountListing {
    return {
      fetchedAtMs: this.lastCallMs,
      fromAccount: this.fromAccount,
      nextFetchAtMs: this.lastCallMs === null ? null : this.lastCallMs + ACCOUNT_LIST_INTERVAL_MS,
    };
  }

  /** A pod this window saw deleted: dropped from the cached listing at once. */
  noteDeleted(podId: string): void {
    this.deletedIds.add(podId);
  }

  /** Debounced; the first load runs at once. */
  override refresh(): Promise<void> {
    if (!this.isLoaded || this.debounceMs <= 0) return super.refresh();
    if (this.pending !== null) return this.pending;
    this.pending = this.clock.sleep(this.debounceMs, this.abort.signal).then(
      () => {
        this.pending = null;
        return super.refresh();
      },
      () => {
        this.pending = null;
      },
    );
    return this.pending;
  }

  private async load(source: PodsSource): Promise<PodsItem[]> {
    const nowMs = this.clock.nowMs();
    const due = this.lastCallMs === null || nowMs - this.lastCallMs >= ACCOUNT_LIST_INTERVAL_MS;
    if (due) {
      try {
        const pods = await source.fetchAccountPods();
        this.lastCallMs = nowMs;
        this.cached = { pods, atMs: nowMs };
        // A pod seen deleted (Runpod answered its 404) stays gone: a listing taken while it was
        // being deleted may still name it. Only a listing without it ends the note.
        const listedIds = new Set(pods.map((pod) => pod.id));
        for (const id of [...this.deletedIds]) if (!listedIds.has(id)) this.deletedIds.delete(id);
        this.lastError = null;
      } catch (error) {
        // No key, or a folder not trusted: no call was made, so the next refresh may try again
        // (the key may be set, the folder trusted by then).
        const noCall =
          typeof error === 'object' &&
          error !== null &&
          ((error as { needsKey?: unknown }).needsKey === true ||
            (error as { needsTrust?: unknown }).needsTrust === true);
        if (!noCall) this.lastCallMs = nowMs;
        this.cached = null;
        this.lastError = error;
      }
    }
    const runs = await source.localRuns();
    const runDirs = new Map(runs.map((run) => [run.id, run.dir]));
    const recorded = podsFromRuns(runs).map((entry) => ({ ...entry, source: 'records' as const }));
    if (this.cached === null) {
      this.fromAccount = false;
      const items: PodsItem[] = [];
      if (this.lastError !== null) items.push(listingProblem(this.lastError));
      // A record still saying `deleting` of a pod seen deleted: the view says what the tree says.
      return [...items, ...recorded.filter((entry) => !this.deletedIds.has(entry.podId))];
    }
    this.fromAccount = true;
    // Pods deleted since the listing: seen by this window, or recorded deleted by any process.
    const deletedByRecords = new Set(
      runs
        .filter((run) => run.pod?.state === 'deleted' && run.pod.podId !== null)
        .map((run) => run.pod!.podId!),
    );
    const listed = this.cached.pods.filter(
      (pod) => !this.deletedIds.has(pod.id) && !deletedByRecords.has(pod.id),
    );
    const rows = source.classify(listed);
    const entries: PodEntry[] = [];
    const shown = new Set<string>();
    for (const row of rows) {
      const entry = entryOfRow(row, runDirs);
      if (entry === null) continue;
      const record = recorded.find((r) => r.podId === entry.podId);
      if (record !== undefined) entry.deadlineUnixS = record.deadlineUnixS;
      entries.push(entry);
      shown.add(entry.podId);
    }
    // Pods the records hold that the listing does not show: created since, or already gone.
    const listedIds = new Set(this.cached.pods.map((pod) => pod.id));
    for (const entry of recorded) {
      if (shown.has(entry.podId) || this.deletedIds.has(entry.podId)) continue;
      entries.push({
        ...entry,
        note: listedIds.has(entry.podId)
          ? entry.note
          : 'recorded by its run, not in the account’s last listing (created since, or gone)',
      });
      shown.add(entry.podId);
    }
    return entries.sort(comparePods);
  }

  override dispose(): void {
    this.abort.abort();
    super.dispose();
  }
}

const ROLE_ORDER: Record<PodRole, number> = {
  orphan: 0,
  stray: 1,
  unreadable: 2,
  awaiting: 3,
  kept: 4,
  running: 5,
  deleting: 6,
};

/** Those needing the user first (orphans, strays), then by run and pod. */
export function comparePods(a: PodEntry, b: PodEntry): number {
  if (a.role !== b.role) return ROLE_ORDER[a.role] - ROLE_ORDER[b.role];
  const ka = `${a.runId ?? ''}\u0000${a.podId}`;
  const kb = `${b.runId ?? ''}\u0000${b.podId}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}
