import * as vscode from 'vscode';
import { unixS, type Clock } from '../core/clock';
import type { Log } from './log';
import { presentRun, type RunsModel, type RunSummary } from './runsModel';
import { presentPod, type PodEntry, type PodsModel } from './podsModel';

/**
 * The Runs view: maps the model's runs to TreeItems and nothing else. The first getChildren
 * loads the model (lazily: a hidden view reads nothing at activation).
 */
export class RunsTreeProvider implements vscode.TreeDataProvider<RunSummary>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subscription: { dispose(): void };

  constructor(
    private readonly model: RunsModel,
    private readonly clock: Clock,
    private readonly log: Log,
  ) {
    this.subscription = model.onDidChange(() => this.changed.fire());
  }

  getTreeItem(run: RunSummary): vscode.TreeItem {
    const view = presentRun(run, unixS(this.clock));
    const item = new vscode.TreeItem(view.label, vscode.TreeItemCollapsibleState.None);
    item.id = view.id;
    item.description = view.description;
    item.tooltip = new vscode.MarkdownString(view.tooltip);
    item.iconPath = new vscode.ThemeIcon(view.iconId, new vscode.ThemeColor(view.colorId));
    item.contextValue = view.contextValue;
    return item;
  }

  async getChildren(element?: RunSummary): Promise<RunSummary[]> {
    if (element !== undefined) return [];
    try {
      await this.model.ensureLoaded();
    } catch (error) {
      // The view stays as it was; the log says why and Refresh Runs tries again.
      this.log.error(`Could not list runs: ${errorText(error)}. Run "Overbrainer: Refresh Runs".`);
    }
    return [...this.model.all];
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }
}

/** The Pods view: same rules as the Runs view. */
export class PodsTreeProvider implements vscode.TreeDataProvider<PodEntry>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subscription: { dispose(): void };

  constructor(
    private readonly model: PodsModel,
    private readonly clock: Clock,
    private readonly log: Log,
  ) {
    this.subscription = model.onDidChange(() => this.changed.fire());
  }

  getTreeItem(pod: PodEntry): vscode.TreeItem {
    const view = presentPod(pod, unixS(this.clock));
    const item = new vscode.TreeItem(view.label, vscode.TreeItemCollapsibleState.None);
    item.id = view.id;
    item.description = view.description;
    item.tooltip = new vscode.MarkdownString(view.tooltip);
    item.iconPath = new vscode.ThemeIcon(view.iconId, new vscode.ThemeColor(view.colorId));
    item.contextValue = view.contextValue;
    return item;
  }

  async getChildren(element?: PodEntry): Promise<PodEntry[]> {
    if (element !== undefined) return [];
    try {
      await this.model.ensureLoaded();
    } catch (error) {
      this.log.error(`Could not list pods: ${errorText(error)}. Run "Overbrainer: Refresh Pods".`);
    }
    return [...this.model.all];
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
