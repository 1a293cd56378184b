import * as path from 'node:path';
import type * as vscode from 'vscode';

type Listener<T> = (value: T) => void;

/** An event of the fake: `fire` calls every listener subscribed and not disposed. */
class FakeEvent<T> {
  private readonly listeners = new Set<Listener<T>>();
  readonly on = (listener: Listener<T>): vscode.Disposable => {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) } as vscode.Disposable;
  };
  fire(value: T): void {
    for (const listener of [...this.listeners]) listener(value);
  }
  get count(): number {
    return this.listeners.size;
  }
}

/**
 * A webview panel as the run panels see it: it records what the host posts, lets a test send
 * the page's messages, and shows or hides and closes like VS Code's.
 */
export class FakeWebviewPanel {
  readonly posted: unknown[] = [];
  visible = true;
  iconPath: unknown;
  revealed = 0;
  private readonly received = new FakeEvent<unknown>();
  private readonly viewState = new FakeEvent<void>();
  private readonly disposed = new FakeEvent<void>();

  readonly webview = {
    html: '',
    options: {},
    cspSource: 'fake-csp',
    asWebviewUri: (uri: vscode.Uri) => ({ ...uri, toString: () => `webview:${uri.fsPath}` }),
    postMessage: (message: unknown): Promise<boolean> => {
      this.posted.push(message);
      return Promise.resolve(true);
    },
    onDidReceiveMessage: this.received.on,
  };
  readonly onDidChangeViewState = this.viewState.on;
  readonly onDidDispose = this.disposed.on;

  constructor(
    readonly viewType: string,
    readonly title: string,
    readonly column: unknown,
  ) {}

  /** The page sends `message` to its host. */
  fromPage(message: unknown): void {
    this.received.fire(message);
  }

  /** The messages of `type` the host posted. */
  postedOf(type: string): { type: string }[] {
    return this.posted.filter(
      (m): m is { type: string } => (m as { type?: unknown }).type === type,
    );
  }

  reveal(): void {
    this.revealed++;
  }

  dispose(): void {
    this.disposed.fire();
  }

  /** Listeners still subscribed to the page's messages (none once the host let go of it). */
  get listening(): number {
    return this.received.count;
  }
}

/** `vscode.Uri.joinPath` on the fake's plain file URIs. */
export function joinUri(base: vscode.Uri, ...segments: string[]): vscode.Uri {
  return { fsPath: path.join(base.fsPath, ...segments), scheme: 'file' } as vscode.Uri;
}
