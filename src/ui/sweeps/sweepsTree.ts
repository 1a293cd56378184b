/**
 * The Sweeps view under the Overbrainer container: each sweep of the first folder's runs/sweeps/
 * (state, trials, best value, spend against its budget) and its trials (state, value, spend),
 * read from the records (sweep.json) each time it refreshes.
 */
import * as vscode from 'vscode';
import type { Clock } from '../../core/clock';
import { sweepList } from '../../core/flow';
import type { Log } from '../log';
import { firstFolderStore } from '../runs/runsFolders';
import { sweepRow, type SweepsNode } from './sweepsModel';

/** A trial's icon by its state; a trial still running (or not started) spins. */
const TRIAL_ICONS: Readonly<Record<string, string>> = {
  complete: 'pass',
  pruned: 'debug-step-over',
  fail: 'error',
};

export class SweepsTreeProvider implements vscode.TreeDataProvider<SweepsNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;

  constructor(
    private readonly clock: Clock,
    private readonly log: Log,
  ) {}

  refresh(): void {
    this.changed.fire();
  }

  getTreeItem(node: SweepsNode): vscode.TreeItem {
    const item = new vscode.TreeItem(
      node.label,
      node.kind === 'sweep'
        ? vscode.TreeItemCollapsibleState.Expanded
        : vscode.TreeItemCollapsibleState.None,
    );
    item.id = node.id;
    item.description = node.description;
    item.tooltip = node.tooltip;
    if (node.kind === 'sweep') {
      item.contextValue = node.contextValue;
      item.iconPath = new vscode.ThemeIcon(node.state === 'running' ? 'sync' : 'beaker');
      // A click opens the sweep's page (its charts and budget).
      item.command = { command: 'overbrainer.openSweep', title: 'Open Sweep', arguments: [node] };
    } else {
      item.contextValue = 'sweepTrial';
      item.iconPath = new vscode.ThemeIcon(TRIAL_ICONS[node.state] ?? 'loading~spin');
    }
    return item;
  }

  getChildren(parent?: SweepsNode): SweepsNode[] {
    if (parent !== undefined) return parent.kind === 'sweep' ? parent.trials : [];
    const first = firstFolderStore(this.clock);
    if (first === null) return [];
    const { sweeps, warnings } = sweepList(first);
    for (const warning of warnings) this.log.warn(warning);
    return sweeps.map(sweepRow);
  }

  dispose(): void {
    this.changed.dispose();
  }
}
