import { presentRunChild } from './runChildView';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { RUN_FILE } from '../../core/flow/records';
import { unixS, type Clock } from '../../core/clock';
import type { Disposable } from '../../core/disposable';
import { RootFetch, type LazyList } from '../lazyList';
import type { Log } from '../log';
import { type PodsItem, type PodsModel } from '../pods/podsModel';
import { podsViewMessage, presentPodsItem } from '../pods/podsView';
import {
  isOlderRuns,
  isRunChild,
  TOP_LEVEL_RUNS,
  topLevelNodes,
  type RunChild,
  type RunsModel,
  type RunsNode,
  type RunSummary,
} from './runsModel';
import { presentOlderRuns, presentRun, type ItemView } from './runsView';
import { readDirChildren, readRunChildren } from './runChildren';
import { describeError } from '../../core/errors';

/**
 * The row without its tooltip: VS Code asks for it (resolveTreeItem) when the row is hovered, so
 * the first render of a long list does not build and send a Markdown tooltip per row.
 */
function treeItem(view: ItemView, collapsible: vscode.TreeItemCollapsibleState): vscode.TreeItem {
  const item = new vscode.TreeItem(view.label, collapsible);
  item.id = view.id;
  item.description = view.description;
  item.iconPath = new vscode.ThemeIcon(view.iconId, new vscode.ThemeColor(view.colorId));
  item.contextValue = view.contextValue;
  if (view.command) item.command = { command: view.command.id, title: view.command.title };
  return item;
}

function openCommand(file: string): vscode.Command {
  return { command: 'vscode.open', title: 'Open', arguments: [vscode.Uri.file(file)] };
}

/**
 * A flat tree over a lazily loaded model: maps each item to a TreeItem and nothing else. The
 * first getChildren loads the model, so a view that is never shown reads nothing.
 */
export class ListTreeProvider<T> implements vscode.TreeDataProvider<T>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subscription: { dispose(): void };
  private readonly rootFetch = new RootFetch();

  constructor(
    private readonly model: LazyList<T>,
    private readonly present: (item: T, nowUnixS: number) => ItemView,
    private readonly what: string,
    private readonly clock: Clock,
    private readonly log: Log,
  ) {
    this.subscription = model.onDidChange(this.rootFetch.forward(() => this.changed.fire()));
  }

  getTreeItem(element: T): vscode.TreeItem {
    return treeItem(this.present(element, unixS(this.clock)), vscode.TreeItemCollapsibleState.None);
  }

  resolveTreeItem(item: vscode.TreeItem, element: T): vscode.TreeItem {
    item.tooltip = new vscode.MarkdownString(this.present(element, unixS(this.clock)).tooltip);
    return item;
  }

  async getChildren(element?: T): Promise<T[]> {
    if (element !== undefined) return [];
    return this.rootFetch.run(async () => {
      try {
        await this.model.ensureLoaded();
      } catch (error) {
        // The view keeps what it showed; the log says why and the refresh command tries again.
        this.log.error(
          `Could not list ${this.what}: ${describeError(error)}. Refresh the view to retry.`,
        );
      }
      return [...this.model.all];
    });
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }
}

/**
 * The Runs view: one row per run (newest first), whose children — the pod, the metrics summary,
 * the run's files — are read only when it is expanded. A followed run's row is redrawn alone
 * when its ETA changes.
 */
export class RunsTreeProvider implements vscode.TreeDataProvider<RunsNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<RunsNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subs: Disposable[];
  private readonly rootFetch = new RootFetch();

  constructor(
    private readonly model: RunsModel,
    private readonly clock: Clock,
    private readonly log: Log,
  ) {
    this.subs = [
      model.onDidChange(this.rootFetch.forward(() => this.changed.fire(undefined))),
      model.onDidChangeRun((run) => this.changed.fire(run)),
    ];
  }

  getTreeItem(node: RunsNode): vscode.TreeItem {
    const now = unixS(this.clock);
    if (isOlderRuns(node)) {
      return treeItem(presentOlderRuns(node), vscode.TreeItemCollapsibleState.Collapsed);
    }
    if (isRunChild(node)) {
      const view = presentRunChild(node, now);
      const item = treeItem(
        view,
        view.expandable
          ? vscode.TreeItemCollapsibleState.Collapsed
          : vscode.TreeItemCollapsibleState.None,
      );
      if (view.openPath !== null) {
        item.command = openCommand(view.openPath);
        item.resourceUri = vscode.Uri.file(view.openPath);
      }
      return item;
    }
    const view = presentRun(node, now, this.model.live(node.id));
    const item = treeItem(view, vscode.TreeItemCollapsibleState.Collapsed);
    // A run.json that cannot be read: a click opens it, to repair it.
    if (node.state === null) item.command = openCommand(path.join(node.dir, RUN_FILE));
    return item;
  }

  resolveTreeItem(item: vscode.TreeItem, node: RunsNode): vscode.TreeItem {
    const now = unixS(this.clock);
    const view = isOlderRuns(node)
      ? presentOlderRuns(node)
      : isRunChild(node)
        ? presentRunChild(node, now)
        : presentRun(node, now, this.model.live(node.id));
    item.tooltip = new vscode.MarkdownString(view.tooltip);
    return item;
  }

  async getChildren(node?: RunsNode): Promise<RunsNode[]> {
    try {
      if (node === undefined) return await this.rootFetch.run(() => this.topLevel());
      if (isOlderRuns(node)) {
        await this.model.ensureLoaded();
        return this.model.all.slice(TOP_LEVEL_RUNS);
      }
      if (!isRunChild(node)) return await readRunChildren(node);
      if (node.kind === 'file' && node.isDir) return await readDirChildren(node.run, node.path);
      return [];
    } catch (error) {
      this.log.error(`Could not list runs: ${describeError(error)}. Refresh the view to retry.`);
      return node === undefined ? topLevelNodes(this.model.all, this.model.all.length) : [];
    }
  }

  /**
   * The newest runs, then a row for the older ones. Before the model's first load only the
   * newest records are read (the first rows wait for nothing else); the whole list is loaded
   * right after, and its change event makes VS Code ask again.
   */
  private async topLevel(): Promise<RunsNode[]> {
    const newest = await this.model.newest(TOP_LEVEL_RUNS);
    if (!this.model.isLoaded) {
      setImmediate(() => {
        this.model.ensureLoaded().catch((error: unknown) => {
          this.log.error(
            `Could not list runs: ${describeError(error)}. Refresh the view to retry.`,
          );
        });
      });
    }
    return topLevelNodes(newest.runs, newest.total);
  }

  dispose(): void {
    for (const sub of this.subs) sub.dispose();
    this.changed.dispose();
  }
}

export function runsTreeProvider(model: RunsModel, clock: Clock, log: Log): RunsTreeProvider {
  return new RunsTreeProvider(model, clock, log);
}

export function podsTreeProvider(
  model: LazyList<PodsItem>,
  clock: Clock,
  log: Log,
): ListTreeProvider<PodsItem> {
  return new ListTreeProvider(model, presentPodsItem, 'pods', clock, log);
}

/** Keeps the Pods view's message saying when the account was listed (or that it was not). */
export function bindPodsViewMessage(
  view: vscode.TreeView<PodsItem>,
  model: PodsModel,
  clock: Clock,
): vscode.Disposable {
  const update = (): void => {
    if (model.isLoaded) view.message = podsViewMessage(model.listing, clock.nowMs());
  };
  const sub = model.onDidChange(update);
  const visible = view.onDidChangeVisibility(update);
  return { dispose: () => (sub.dispose(), visible.dispose()) };
}

export type { RunChild, RunSummary };
