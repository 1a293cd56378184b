/** The rows under a run in the Runs tree (its pod, metrics, attempts, files, problems) as views. */
import * as path from 'node:path';
import { attemptLine } from './runAttempts';
import { type RunChild } from './runsModel';
import {
  escapeMarkdown,
  formatLoss,
  formatUsd,
  podStateLabel,
  spendSoFarUsd,
  type RunItemView,
} from './runsView';

export interface ChildItemView extends RunItemView {
  /** Whether it expands (a directory of the run's outputs). */
  expandable: boolean;
  /** The file a click opens (with `vscode.open`); null when a click does nothing. */
  openPath: string | null;
}

/** The row of a run's child. */
export function presentRunChild(child: RunChild, nowUnixS: number): ChildItemView {
  const base = { expandable: false, openPath: null as string | null };
  switch (child.kind) {
    case 'pod': {
      const pod = child.run.pod;
      const parts: string[] = [];
      let tooltip = '';
      if (pod !== null) {
        parts.push(podStateLabel(pod.state));
        if (pod.gpuType !== null) parts.push(pod.gpuType);
        if (pod.state !== 'deleted' && pod.costPerHourUsd !== null) {
          parts.push(`${formatUsd(pod.costPerHourUsd)}/h`);
        }
        const spent = spendSoFarUsd(pod, nowUnixS);
        if (spent !== null) parts.push(`about ${formatUsd(spent)} so far`);
        if (pod.state === 'deleted' && pod.estimatedSpendUsd !== null) {
          parts.push(`about ${formatUsd(pod.estimatedSpendUsd)}`);
        }
        if (pod.strayPodIds.length > 0) parts.push(`${pod.strayPodIds.length} stray`);
        tooltip = [
          `**Pod ${escapeMarkdown(pod.podId ?? '(none yet)')}** — ${escapeMarkdown(podStateLabel(pod.state))}`,
          ...(pod.keep ? ['Kept: only Remove Pod deletes it.'] : []),
          ...(pod.strayPodIds.length > 0
            ? [
                `Stray pods (may be billing): ${escapeMarkdown(pod.strayPodIds.join(', '))}`,
                'Remove them with Remove Pod.',
              ]
            : []),
        ].join('  \n');
      }
      return {
        ...base,
        id: `${child.runDir}#pod`,
        label: pod?.podId === null || pod === null ? 'Pod (none yet)' : `Pod ${pod.podId}`,
        description: parts.join(' · '),
        tooltip,
        iconId: pod?.state === 'deleted' ? 'vm-outline' : 'vm-running',
        colorId:
          pod?.state === 'deleted'
            ? 'descriptionForeground'
            : pod?.state === 'kept'
              ? 'charts.purple'
              : 'charts.blue',
        contextValue: 'runChild.pod',
        openPath: null,
      };
    }
    case 'metrics': {
      const m = child.metrics;
      const parts: string[] = [];
      if (m.step !== null) {
        parts.push(m.maxSteps === null ? `step ${m.step}` : `step ${m.step}/${m.maxSteps}`);
      }
      if (m.loss !== null) parts.push(`loss ${formatLoss(m.loss)}`);
      if (m.evalLoss !== null) parts.push(`eval ${formatLoss(m.evalLoss)}`);
      if (m.ended) parts.push('ended');
      if (parts.length === 0) parts.push('no training log yet');
      const tips = [`**Metrics** — ${escapeMarkdown(parts.join(' · '))}`];
      if (m.epoch !== null) tips.push(`Epoch: ${escapeMarkdown(String(m.epoch))}`);
      if (m.learningRate !== null)
        tips.push(`Learning rate: ${escapeMarkdown(String(m.learningRate))}`);
      if (m.skippedLines > 0) tips.push(`${m.skippedLines} malformed line(s) skipped`);
      if (m.partial) tips.push('Read from the end of a large metrics.jsonl.');
      tips.push('Click to open metrics.jsonl.');
      return {
        ...base,
        id: `${child.runDir}#metrics`,
        label: 'Metrics',
        description: parts.join(' · '),
        tooltip: tips.join('  \n'),
        iconId: 'graph-line',
        colorId: 'charts.green',
        contextValue: 'runChild.metrics',
        openPath: path.join(child.runDir, 'metrics.jsonl'),
      };
    }
    case 'file':
      return {
        ...base,
        id: `${child.runDir}#file:${child.path}`,
        label: child.name,
        description: '',
        tooltip: escapeMarkdown(child.path),
        iconId: child.isDir ? 'folder' : 'file',
        colorId: 'foreground',
        contextValue: child.isDir ? 'runChild.folder' : 'runChild.file',
        expandable: child.isDir,
        openPath: child.isDir ? null : child.path,
      };
    case 'more':
      return {
        ...base,
        id: `${child.runDir}#more:${child.parent}`,
        label: `${child.count} more…`,
        description: 'open the folder to see them all',
        tooltip: escapeMarkdown(child.parent),
        iconId: 'ellipsis',
        colorId: 'descriptionForeground',
        contextValue: 'runChild.more',
      };
    case 'attempt': {
      const line = attemptLine(child.attempt, child.index);
      return {
        ...base,
        id: `${child.runDir}#attempt:${child.index}`,
        label: line.label,
        description: line.description,
        tooltip: escapeMarkdown(`${line.label} — ${line.description}`),
        iconId: child.attempt.reason === null ? 'debug-restart' : 'debug-disconnect',
        colorId: child.attempt.reason === null ? 'charts.blue' : 'charts.orange',
        contextValue: 'runChild.attempt',
      };
    }
    case 'node': {
      const { node } = child;
      const failed = node.state === 'failed';
      return {
        ...base,
        id: `${child.runDir}#node:${node.rank}`,
        label: `node ${node.rank}${node.rank === 0 ? ' (primary)' : ''}`,
        description: `${node.state} · pod ${node.podId}${node.ip === null ? '' : ` · ${node.ip}`}`,
        tooltip: escapeMarkdown(
          `node ${node.rank} of cluster ${child.clusterId}: pod ${node.podId}, ${node.state}${node.message === null ? '' : `: ${node.message}`}`,
        ),
        iconId: failed ? 'error' : 'server',
        colorId: failed
          ? 'list.errorForeground'
          : node.state === 'running'
            ? 'charts.blue'
            : 'foreground',
        contextValue: 'runChild.node',
      };
    }
    case 'problem':
      return {
        ...base,
        id: `${child.runDir}#problem:${child.path ?? ''}`,
        label: child.text,
        description: child.hint ?? '',
        tooltip: [
          escapeMarkdown(child.text),
          ...(child.hint ? [escapeMarkdown(child.hint)] : []),
        ].join('  \n'),
        iconId: 'error',
        colorId: 'list.errorForeground',
        contextValue: 'runChild.problem',
        openPath: child.path,
      };
  }
}
