import * as vscode from 'vscode';

/**
 * A view's data provider registered by the thin first bundle at activation, standing for the
 * real one the core builds: its first getChildren loads the core (VS Code shows the view's
 * progress bar meanwhile, never "There is no data provider registered"), then every call and
 * change event goes to the real provider. Elements only ever come from the real provider, so
 * getTreeItem is never asked before it is there.
 */
export class DeferredTree<T> implements vscode.TreeDataProvider<T>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<T | T[] | undefined | null | void>();
  readonly onDidChangeTreeData = this.changed.event;
  private target: vscode.TreeDataProvider<T> | null = null;
  private subscription: vscode.Disposable | null = null;

  constructor(private readonly load: () => Promise<vscode.TreeDataProvider<T>>) {}

  /** The real provider, once the core has built it. */
  attach(target: vscode.TreeDataProvider<T>): void {
    this.target = target;
    this.subscription = target.onDidChangeTreeData?.((event) => this.changed.fire(event)) ?? null;
  }

  async getChildren(element?: T): Promise<T[]> {
    const target = this.target ?? (await this.load());
    return (await target.getChildren(element)) ?? [];
  }

  getTreeItem(element: T): vscode.TreeItem | Thenable<vscode.TreeItem> {
    if (this.target === null) throw new Error('a tree element before its provider was loaded');
    return this.target.getTreeItem(element);
  }

  resolveTreeItem(
    item: vscode.TreeItem,
    element: T,
    token: vscode.CancellationToken,
  ): vscode.ProviderResult<vscode.TreeItem> {
    return this.target?.resolveTreeItem?.(item, element, token) ?? item;
  }

  dispose(): void {
    this.subscription?.dispose();
    this.changed.dispose();
  }
}
