/**
 * What `pod ls` says of a member pod of an Instant Cluster: the run its marker names decides, as
 * for a pod (./podList.ts), but by the run's recorded cluster: a member of another cluster of the
 * run (an unclear create's, or one recorded deleted) is a stray, which `pod rm RUN_ID` deletes.
 */
import { isValidRunId } from '../runs/ids';
import type { RunRecord } from '../runs/runRecord';
import {
  NO_MARKER_NOTE,
  notInRunsNote,
  type PodRowKind,
  STRAY_NOTE,
  UNREADABLE_NOTE,
} from './podList';

/** The kind and note of a member of cluster `clusterId` carrying the marker `runId`. */
export function memberClass(
  runId: string | null,
  clusterId: string,
  runs: ReadonlyMap<string, RunRecord>,
  unreadable: ReadonlySet<string>,
): { kind: PodRowKind; note: string } {
  if (runId === null || !isValidRunId(runId)) return { kind: 'no_marker', note: NO_MARKER_NOTE };
  const run = runs.get(runId);
  if (!run) {
    if (unreadable.has(runId)) return { kind: 'unreadable', note: UNREADABLE_NOTE };
    return { kind: 'not_in_runs', note: notInRunsNote(runId) };
  }
  const recorded = run.cluster ?? null;
  if (recorded === null || recorded.id !== clusterId || recorded.deletedAt !== null) {
    return { kind: 'stray', note: STRAY_NOTE };
  }
  if (run.state === 'preparing' || run.state === 'running') {
    return { kind: 'in_progress', note: `run ${run.state}` };
  }
  return { kind: 'ended', note: `run ${run.state}, cluster not deleted` };
}
