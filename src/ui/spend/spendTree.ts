/**
 * The Spend view under the Overbrainer container: today's and this month's spend against
 * `[budget]`, each run's estimate beside Runpod's bill (over 1 % apart flagged), and one
 * reminder per kept pod older than `kept_pod_reminder_hours`, with Release and Remove.
 */
import * as vscode from 'vscode';
import type { Clock } from '../../core/clock';
import { DEFAULT_KEPT_POD_REMINDER_HOURS, loadConfig } from '../../core/flow/config';
import { projectSpend } from '../../core/flow/spend';
import { firstFolderStore } from '../runs/runsFolders';
import { keptPodReminders, spendRows, type SpendRowView } from './spendModel';

export class SpendTreeProvider implements vscode.TreeDataProvider<SpendRowView>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly reminded = new Set<string>();

  /**
   * `before` is awaited before the records are read: the Runs view's first listing, which shares
   * the container with this view and must not wait behind this one-pass read of every record.
   */
  constructor(
    private readonly clock: Clock,
    private readonly before: () => Promise<void> = async () => {},
  ) {}

  refresh(): void {
    this.changed.fire();
  }

  getTreeItem(row: SpendRowView): vscode.TreeItem {
    const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.None);
    item.id = row.id;
    item.description = row.description;
    item.tooltip = row.tooltip;
    item.contextValue = row.id.startsWith('run-') ? 'spendRun' : 'spendBudget';
    item.iconPath = new vscode.ThemeIcon(
      row.flagged ? 'warning' : row.id.startsWith('run-') ? 'credit-card' : 'graph',
    );
    return item;
  }

  async getChildren(parent?: SpendRowView): Promise<SpendRowView[]> {
    if (parent !== undefined) return [];
    await this.before();
    const first = firstFolderStore(this.clock);
    if (first === null) return [];
    const { folder, store } = first;
    const loaded = loadConfig(folder.uri.fsPath, process.env);
    const budget = loaded.ok ? (loaded.config.budget ?? null) : null;
    const spend = projectSpend(store, budget, this.clock.nowMs());
    const hours = budget?.keptPodReminderHours ?? DEFAULT_KEPT_POD_REMINDER_HOURS;
    for (const reminder of keptPodReminders(spend, hours, this.reminded)) {
      this.reminded.add(reminder.podId);
      const run = { dir: store.runDir(reminder.runId) };
      void vscode.window
        .showWarningMessage(reminder.message, 'Release', 'Remove')
        .then((choice) => {
          if (choice === 'Release')
            void vscode.commands.executeCommand('overbrainer.releasePod', run);
          if (choice === 'Remove')
            void vscode.commands.executeCommand('overbrainer.removePod', run);
        });
    }
    return spendRows(spend);
  }

  dispose(): void {
    this.changed.dispose();
  }
}
