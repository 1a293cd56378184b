/**
 * Open Sweep: a sweep's page in an editor tab (./sweepPageHtml.ts draws ./sweepPageModel.ts),
 * read from its records (sweep.json, its trials' metrics.jsonl) when it opens and again on the
 * sweep's events (a trial's run changing state, the sweep's own lines), at most once a second.
 */
import * as path from 'node:path';
import type * as vscode from 'vscode';
import type { Clock } from '../../core/clock';
import type { CoreEvent } from '../../core/events';
import { sweepList, sweepShow } from '../../core/flow';
import { METRICS_FILE, readMetricsFile, type RunStore } from '../../core/flow/records';
import { describeError } from '../../core/errors';
import type { LogPort, UiHost } from '../host';
import { firstFolderStore } from '../runs/runsFolders';
import { renderSweepPage, escapeHtml } from './sweepPageHtml';
import { sweepPageModel } from './sweepPageModel';
import { refreshesSweeps } from './sweepsModel';

/** Redraws asked within this delay are one. */
const REDRAW_MS = 1_000;

export class SweepPages {
  private readonly panels = new Map<string, vscode.WebviewPanel>();
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly host: UiHost,
    private readonly clock: Clock,
    private readonly log: LogPort,
  ) {}

  /** Redraws the open pages when `event` may change them. */
  onEvent(event: CoreEvent): void {
    if (!refreshesSweeps(event) || this.panels.size === 0 || this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      for (const [name, panel] of this.panels) void this.draw(name, panel);
    }, REDRAW_MS);
  }

  /** Opens (or shows) the page of the sweep `arg` names (a Sweeps view row), else one picked. */
  async show(arg: unknown): Promise<void> {
    const first = firstFolderStore(this.clock);
    if (first === null) {
      void this.host.window.showErrorMessage('Overbrainer: open a folder with its runs first.');
      return;
    }
    const name = await this.nameOf(first.store, arg);
    if (name === null) return;
    const open = this.panels.get(name);
    if (open !== undefined) {
      open.reveal();
      return void (await this.draw(name, open));
    }
    const panel = this.host.window.createWebviewPanel(
      'overbrainer.sweep',
      `Sweep ${name}`,
      this.host.viewColumn.active,
      { enableScripts: false },
    );
    this.panels.set(name, panel);
    panel.onDidDispose(() => this.panels.delete(name));
    await this.draw(name, panel);
  }

  private async nameOf(store: RunStore, arg: unknown): Promise<string | null> {
    const row = arg as { kind?: unknown; name?: unknown; sweep?: unknown } | undefined;
    if (row?.kind === 'sweep' && typeof row.name === 'string') return row.name;
    if (row?.kind === 'trial' && typeof row.sweep === 'string') return row.sweep;
    const names = sweepList({ store }).sweeps.map((r) => r.name);
    if (names.length === 0) {
      void this.host.window.showInformationMessage('Overbrainer: no sweep in this folder yet.');
      return null;
    }
    if (names.length === 1) return names[0]!;
    return (await this.host.window.showQuickPick(names, { placeHolder: 'Sweep' })) ?? null;
  }

  private async draw(name: string, panel: vscode.WebviewPanel): Promise<void> {
    const first = firstFolderStore(this.clock);
    try {
      if (first === null) throw new Error('no workspace folder is open');
      const record = sweepShow(first, name);
      const metrics = new Map<string, Awaited<ReturnType<typeof readMetricsFile>>>();
      for (const t of record.trials) {
        if (t.run_id === null) continue;
        const file = path.join(first.store.runDir(t.run_id), METRICS_FILE);
        metrics.set(t.run_id, await readMetricsFile(file).catch(() => null));
      }
      const model = sweepPageModel(record, (runId) => metrics.get(runId)?.metrics ?? []);
      panel.webview.html = renderSweepPage(model);
    } catch (error) {
      this.log.warn(`Sweep ${name}'s page: ${describeError(error)}`);
      panel.webview.html = `<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src 'none';"></head><body><p>${escapeHtml(`Sweep ${name} cannot be shown: ${describeError(error)}`)}</p></body></html>`;
    }
  }

  dispose(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    for (const panel of this.panels.values()) panel.dispose();
    this.panels.clear();
  }
}
