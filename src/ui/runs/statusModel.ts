import { rfc3339 } from '../../core/clock';
import { type DeadlineView, type RunCluster } from '../../core/flow/records';
import { clusterPodSummary } from './clusterSummary';
import { formatDurationS } from './runsView';

/**
 * The status bar's countdown for the followed run, free of `vscode`: the text and the background
 * from the watchdog's deadline (the one the run view shows) and the pace's ETA. Computed every second from what is already known
 * (the pod record's deadline, the latest metrics), never from an API call.
 */

/** The last stretch before the deadline, shown with the error background. */
export const LAST_STRETCH_MS = 15 * 60_000;

export interface StatusInput {
  runId: string;
  /** Time left until the watchdog's deadline (create + max_hours); null for a kept pod or none yet. */
  untilDeadlineMs: number | null;
  /** That deadline as RFC 3339, for the tooltip. */
  deadline?: string | null;
  /** Time the job still needs, counted from now; null while the pace is unknown. */
  etaMs: number | null;
  /** The run's spend (so far, at the ETA, budget left), one line each. */
  spendLines?: readonly string[];
  /** The nodes of the run's cluster, when it runs on one (each node's watchdog holds the deadline). */
  nodes?: number;
}

export type StatusBackground = 'none' | 'warning' | 'error';

export interface StatusView {
  text: string;
  tooltip: string;
  background: StatusBackground;
}

/**
 * `4h 12m`; under an hour `12m 05s`, so the countdown visibly moves every second when it
 * matters; `45s`. Rounds down to the whole second, so it never shows more time than is left.
 */
export function short(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s >= 3600 || s < 60) return formatDurationS(s);
  return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
}

export function statusView(input: StatusInput): StatusView {
  const parts: string[] = [];
  const tips: string[] = [
    `Overbrainer run ${input.runId}${input.nodes === undefined ? '' : ` on a cluster of ${input.nodes} nodes`}`,
  ];
  if (input.untilDeadlineMs !== null) {
    parts.push(`${short(input.untilDeadlineMs)} left`);
    const at = input.deadline ? `, ${input.deadline}` : '';
    tips.push(`${short(input.untilDeadlineMs)} until the watchdog's deadline (max_hours${at})`);
    tips.push(
      input.nodes === undefined
        ? "At 0 the pod's watchdog deletes the pod, unless this client is still renewing its lease " +
            '(it does while the job makes progress, 15 minutes at a time).'
        : `At 0 the watchdogs of its ${input.nodes} nodes delete the whole cluster, unless this client is ` +
            'still renewing their leases (it does while the job makes progress, 15 minutes at a time).',
    );
  } else {
    parts.push('following');
  }
  if (input.etaMs !== null) {
    parts.push(`ETA ${short(input.etaMs)}`);
    tips.push(`the job needs about ${short(input.etaMs)} more at its current pace`);
  }
  let background: StatusBackground = 'none';
  if (input.untilDeadlineMs !== null) {
    if (input.untilDeadlineMs <= LAST_STRETCH_MS) {
      background = 'error';
      tips.push('less than 15 minutes before the deadline');
    } else if (input.etaMs !== null && input.etaMs > input.untilDeadlineMs) {
      background = 'warning';
      tips.push(
        'the job would end after the deadline: it is cut short there unless this client keeps following it',
      );
    }
  }
  tips.push(...(input.spendLines ?? []));
  tips.push('Click to show the run.');
  return { text: `$(watch) ${parts.join(' · ')}`, tooltip: tips.join('\n'), background };
}

/**
 * The ETA from now: the pace counts from its latest metric, which arrived `sinceMetricMs` ago.
 */
export function etaFromNow(paceEtaMs: number | null, sinceMetricMs: number): number | null {
  if (paceEtaMs === null) return null;
  return Math.max(0, paceEtaMs - Math.max(0, sinceMetricMs));
}

/**
 * The view for a followed run whose pod record is `pod` at `nowMs`: the countdown runs to the
 * watchdog's deadline itself, whole seconds, as the run view counts it.
 */
export function statusForPod(
  runId: string,
  pod: DeadlineView | null,
  nowMs: number,
  etaMs: number | null,
  spendLines: readonly string[] = [],
  nodes?: number,
): StatusView {
  const untilDeadlineMs =
    pod === null || pod.keep || pod.deadlineUnixS === null
      ? null
      : Math.max(0, pod.deadlineUnixS - Math.floor(nowMs / 1000)) * 1000;
  return statusView({
    runId,
    untilDeadlineMs,
    deadline: pod?.deadline ?? null,
    etaMs,
    spendLines,
    ...(nodes === undefined ? {} : { nodes }),
  });
}

/** What the status bar reads of a run's records: its pod.json, else its run.json's cluster. */
export interface DeadlineRecords {
  loadPod(runId: string): DeadlineView | null;
  loadRun(runId: string): { cluster?: RunCluster | null };
}

/**
 * The deadline the followed run's countdown runs to: its pod's; a run on a cluster has no
 * pod.json, and its countdown runs to the earliest deadline of its nodes (each node's watchdog
 * deletes the whole cluster there) until the cluster is deleted. `nodes` is the cluster's size,
 * absent for a pod. Null (no countdown) while neither is known yet.
 */
export function followedDeadline(
  records: DeadlineRecords,
  runId: string,
): { deadline: DeadlineView | null; nodes?: number } {
  const pod = records.loadPod(runId);
  if (pod !== null) return { deadline: pod };
  const cluster = records.loadRun(runId).cluster ?? null;
  if (cluster === null) return { deadline: null };
  const nodes = cluster.nodes.length;
  if (cluster.deletedAt !== null) return { deadline: null, nodes };
  const deadlineUnixS = clusterPodSummary(cluster).deadlineUnixS;
  return {
    deadline: {
      keep: false,
      deadlineUnixS,
      deadline: deadlineUnixS === null ? null : rfc3339(deadlineUnixS * 1000),
    },
    nodes,
  };
}
