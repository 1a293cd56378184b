import {
  AWAITING_ICON,
  escapeMarkdown,
  formatDurationS,
  formatUsd,
  type ItemView,
  KEPT_ICON,
  type RowIcon,
} from '../runs/runsView';
import {
  isPodsMessage,
  type AccountListing,
  type PodEntry,
  type PodRole,
  type PodsItem,
  type PodsMessage,
} from './podsModel';

/**
 * How the Pods view shows its model, free of `vscode`: each pod's row (its role's icon, what it
 * costs and how long it has left, why a stray or an orphan may bill), the message rows, and the
 * view's line saying when the account was listed.
 */

/** A pod's row (`contextValue` `pod.<role>`). */
export type PodItemView = ItemView;

const ROLE: Record<PodRole, RowIcon> = {
  running: { iconId: 'vm-running', colorId: 'charts.blue', label: 'in use' },
  kept: KEPT_ICON,
  awaiting: AWAITING_ICON,
  deleting: { iconId: 'trash', colorId: 'descriptionForeground', label: 'deleting' },
  stray: { iconId: 'warning', colorId: 'list.warningForeground', label: 'stray' },
  orphan: { iconId: 'question', colorId: 'list.errorForeground', label: 'orphan' },
  unreadable: { iconId: 'error', colorId: 'list.errorForeground', label: 'run record unreadable' },
};

const ROLE_EXPLAINED: Partial<Record<PodRole, string>> = {
  stray: 'A pod with this run’s marker that the run did not delete. It may be billing: remove it.',
  orphan:
    'Nothing deletes this pod on its own (its run ended, is not in this workspace, or it has no run marker). It may be billing: remove it.',
  unreadable: 'Its run directory is here, but its run.json cannot be read: repair it first.',
};

export function presentPod(pod: PodEntry, nowUnixS: number): PodItemView {
  const role = ROLE[pod.role];
  const parts = [role.label];
  if (pod.runId !== null) parts.push(pod.runId);
  if (pod.status !== undefined && pod.status !== null) parts.push(pod.status);
  if (pod.gpuType !== null) parts.push(pod.gpuType);
  if (pod.costPerHourUsd !== null) parts.push(`${formatUsd(pod.costPerHourUsd)}/h`);
  if (pod.deadlineUnixS !== null) {
    const leftS = pod.deadlineUnixS - nowUnixS;
    parts.push(leftS > 0 ? `${formatDurationS(leftS)} left` : 'deadline passed');
  }
  const explained = ROLE_EXPLAINED[pod.role];
  const tooltip = [
    `**${escapeMarkdown(pod.podId)}** — ${escapeMarkdown(role.label)}`,
    ...(pod.runId === null ? [] : [`Run: ${escapeMarkdown(pod.runId)}`]),
    ...(pod.note ? [`Note: ${escapeMarkdown(pod.note)}`] : []),
    ...(explained === undefined ? [] : [explained]),
    ...(pod.source === 'records'
      ? ['From the local run records (the account’s list does not show it).']
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
    command: null,
  };
}

const MESSAGE_ICON: Record<PodsMessage['severity'], { iconId: string; colorId: string }> = {
  info: { iconId: 'info', colorId: 'foreground' },
  warning: { iconId: 'key', colorId: 'list.warningForeground' },
  error: { iconId: 'cloud-offline', colorId: 'list.errorForeground' },
};

/** A pod row, or a message row whose click runs its next action. */
export function presentPodsItem(item: PodsItem, nowUnixS: number): PodItemView {
  if (!isPodsMessage(item)) return presentPod(item, nowUnixS);
  const icon = MESSAGE_ICON[item.severity];
  return {
    id: `message:${item.text}`,
    label: item.text,
    description: item.command === null ? '' : item.command.title,
    tooltip: [
      escapeMarkdown(item.detail),
      ...(item.command ? [`Click: ${item.command.title}`] : []),
    ].join('  \n'),
    iconId: icon.iconId,
    colorId: icon.colorId,
    contextValue: 'pods.message',
    command: item.command,
  };
}

/**
 * The view's message line: when the account was listed (a refresh inside the minute reuses that
 * listing), or that the pods shown come from the local records only.
 */
export function podsViewMessage(
  listing: AccountListing,
  nowMs: number,
  formatTime: (ms: number) => string = (ms) => new Date(ms).toLocaleTimeString(),
): string {
  if (listing.fetchedAtMs === null)
    return 'From the local run records (the account is not listed).';
  if (!listing.fromAccount) {
    return `From the local run records: the account could not be listed at ${formatTime(listing.fetchedAtMs)}.`;
  }
  const agoS = Math.max(0, Math.floor((nowMs - listing.fetchedAtMs) / 1000));
  const next = listing.nextFetchAtMs;
  const again =
    next !== null && next > nowMs
      ? `; listed again on a refresh after ${formatTime(next)}`
      : '; a refresh lists it again';
  return `Runpod account listed at ${formatTime(listing.fetchedAtMs)} (${agoS}s ago)${again}.`;
}
