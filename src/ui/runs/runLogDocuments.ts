import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { RUN_LOG_SCHEME, runLogText, type RunLogKind } from './runLogs';

/**
 * The read-only documents of Show Logs (scheme `overbrainer-log`, path `/<runId>/<job|pod>.log`,
 * the run directory as query). An open document follows its file: a change of the file (the pod
 * log grows while the pod lives; the job log arrives with the results) refreshes it.
 */
export class RunLogDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  /** One watcher per open document, on its run's directory tree (the file may not exist yet). */
  private readonly watchers = new Map<string, fs.FSWatcher>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(private readonly redact: (text: string) => string) {
    this.subscriptions = [
      this.changed,
      vscode.workspace.registerTextDocumentContentProvider(RUN_LOG_SCHEME, this),
      vscode.workspace.onDidCloseTextDocument((doc) => {
        const key = doc.uri.toString();
        this.watchers.get(key)?.close();
        this.watchers.delete(key);
      }),
    ];
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    const kind: RunLogKind = path.posix.basename(uri.path) === 'job.log' ? 'job' : 'pod';
    this.follow(uri, kind);
    return runLogText(uri.query, kind, this.redact);
  }

  private follow(uri: vscode.Uri, kind: RunLogKind): void {
    const key = uri.toString();
    if (this.watchers.has(key)) return;
    const wanted = kind === 'job' ? 'job.log' : 'pod.log';
    try {
      const watcher = fs.watch(uri.query, { recursive: true }, (_event, name) => {
        if (name === null || path.basename(String(name)) === wanted) this.changed.fire(uri);
      });
      watcher.on('error', () => undefined);
      this.watchers.set(key, watcher);
    } catch {
      // The run's directory is gone: the document shows what was read, and does not follow.
    }
  }

  dispose(): void {
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
    for (const s of this.subscriptions) s.dispose();
  }
}
