import * as vscode from 'vscode';
import { unixS, type Clock } from '../core/clock';
import type { LazyList } from './lazyList';
import type { Log } from './log';
import { presentPod, type PodEntry } from './podsModel';
import { presentRun, type RunSummary } from './runsModel';

/** A tree row without vscode types, as the models' `present*` functions build it. */
export interface ItemView {
  id: string;
  label: string;
  description: string;
  /** Markdown. */
  tooltip: string;
  iconId: string;
  colorId: string;
  contextValue: string;
}

/**
 * A flat tree over a lazily loaded model: maps each item to a TreeItem and nothing else. The
 * first getChildren loads the model, so a view that is never shown reads nothing.
 */
export class ListTreeProvider<T> implements vscode.TreeDataProvider<T>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subscription: { dispose(): void };

  constructor(
    private readonly model: LazyList<T>,
    private readonly present: (item: T, nowUnixS: number) => ItemView,
    private readonly what: string,
    private readonly clock: Clock,
    private readonly log: Log,
  ) {
    this.subscription = model.onDidChange(() => this.changed.fire());
  }

  getTreeItem(element: T): vscode.TreeItem {
    const view = this.present(element, unixS(this.clock));
    const item = new vscode.TreeItem(view.label, vscode.TreeItemCollapsibleState.None);
    item.id = view.id;
    item.description = view.description;
    item.tooltip = new vscode.MarkdownString(view.tooltip);
    item.iconPath = new vscode.ThemeIcon(view.iconId, new vscode.ThemeColor(view.colorId));
    item.contextValue = view.contextValue;
    return item;
  }

  async getChildren(element?: T): Promise<T[]> {
    if (element !== undefined) return [];
    try {
      await this.model.ensureLoaded();
    } catch (error) {
      // The view keeps what it showed; the log says why and the refresh command tries again.
      this.log.error(
        `Could not list ${this.what}: ${errorText(error)}. Refresh the view to retry.`,
      );
    }
    return [...this.model.all];
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }
}

export function runsTreeProvider(
  model: LazyList<RunSummary>,
  clock: Clock,
  log: Log,
): ListTreeProvider<RunSummary> {
  return new ListTreeProvider(model, presentRun, 'runs', clock, log);
}

export function podsTreeProvider(
  model: LazyList<PodEntry>,
  clock: Clock,
  log: Log,
): ListTreeProvider<PodEntry> {
  return new ListTreeProvider(model, presentPod, 'pods', clock, log);
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
