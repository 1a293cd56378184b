import { LazyList } from './lazyList';
import { escapeMarkdown, formatDurationS, formatUsd, type RunSummary } from './runsModel';

/**
 * The Pods view's model, free of the `vscode` module. Today it lists the pods this workspace's
 * run records say may still exist (pod.json not `deleted`, plus each run's recorded strays) —
 * read from disk, no API call. The account-wide listing (`pod ls`: orphans without a local
 * record) replaces the loader once the core provides it; the view does not change.
 */

export type PodRole = 'running' | 'kept' | 'awaiting' | 'deleting' | 'stray' | 'orphan';

export interface PodEntry {
  podId: string;
  role: PodRole;
  /** The run the pod belongs to, when known. */
  runId: string | null;
  runDir: string | null;
  gpuType: string | null;
  costPerHourUsd: number | null;
  deadlineUnixS: number | null;
}

/** The pods the run records say may still exist and bill. */
export function podsFromRuns(runs: readonly RunSummary[]): PodEntry[] {
  const pods: PodEntry[] = [];
  for (const run of runs) {
    const pod = run.pod;
    if (pod === null) continue;
    if (pod.podId !== null && pod.state !== 'deleted') {
      pods.push({
        podId: pod.podId,
        role:
          pod.state === 'kept'
            ? 'kept'
            : pod.state === 'awaiting_retrieval'
              ? 'awaiting'
              : pod.state === 'deleting'
                ? 'deleting'
                : 'running',
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

export interface PodItemView {
  id: string;
  label: string;
  description: string;
  tooltip: string;
  iconId: string;
  colorId: string;
  /** `pod.<role>`: package.json menus key on it. */
  contextValue: string;
}

const ROLE: Record<PodRole, { iconId: string; colorId: string; label: string }> = {
  running: { iconId: 'vm-running', colorId: 'charts.blue', label: 'in use' },
  kept: { iconId: 'pinned', colorId: 'charts.purple', label: 'kept' },
  awaiting: {
    iconId: 'cloud-download',
    colorId: 'list.warningForeground',
    label: 'awaiting retrieval',
  },
  deleting: { iconId: 'trash', colorId: 'descriptionForeground', label: 'deleting' },
  stray: { iconId: 'warning', colorId: 'list.warningForeground', label: 'stray' },
  orphan: { iconId: 'question', colorId: 'list.errorForeground', label: 'orphan (no local run)' },
};

export function presentPod(pod: PodEntry, nowUnixS: number): PodItemView {
  const role = ROLE[pod.role];
  const parts = [role.label];
  if (pod.runId !== null) parts.push(pod.runId);
  if (pod.gpuType !== null) parts.push(pod.gpuType);
  if (pod.costPerHourUsd !== null) parts.push(`${formatUsd(pod.costPerHourUsd)}/h`);
  if (pod.deadlineUnixS !== null) {
    const leftS = pod.deadlineUnixS - nowUnixS;
    parts.push(leftS > 0 ? `${formatDurationS(leftS)} left` : 'deadline passed');
  }
  const tooltip = [
    `**${escapeMarkdown(pod.podId)}** — ${escapeMarkdown(role.label)}`,
    ...(pod.runId === null ? [] : [`Run: ${escapeMarkdown(pod.runId)}`]),
    ...(pod.role === 'stray'
      ? ['A pod with this run’s marker that the run did not delete. It may be billing.']
      : []),
  ].join('  \n');
  return {
    id: `${pod.role}:${pod.runDir ?? ''}:${pod.podId}`,
    label: pod.podId,
    description: parts.join(' · '),
    tooltip,
    iconId: role.iconId,
    colorId: role.colorId,
    contextValue: `pod.${pod.role}`,
  };
}

/** The pods, loaded lazily (from the run records today, from `pod ls` later). */
export class PodsModel extends LazyList<PodEntry> {}
