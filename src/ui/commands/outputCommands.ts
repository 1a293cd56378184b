import * as fs from 'node:fs';
import * as path from 'node:path';
import type { RunSummary } from '../runs/runsModel';
import type { UiContext } from '../uiContext';

/** The run's retrieved output in the Explorer, else its run.json (the current run by default). */
export async function showRun(ctx: UiContext, arg: unknown): Promise<void> {
  const run =
    arg === undefined && ctx.current !== null
      ? ctx.runs.all.find((r) => r.id === ctx.current)
      : await ctx.pickRun(arg, () => true, 'show');
  if (!run) return;
  const output = path.join(run.dir, 'output');
  const target = fs.existsSync(output) ? output : path.join(run.dir, 'run.json');
  if (fs.statSync(target).isDirectory()) {
    await ctx.host.commands.executeCommand('revealInExplorer', ctx.host.fileUri(target));
  } else {
    await ctx.window.showTextDocument(ctx.host.fileUri(target));
  }
}

/** Reveals the run's retrieved output in the Explorer (its run.json when it has none). */
export async function openOutput(ctx: UiContext, run: RunSummary | undefined): Promise<void> {
  if (!run) return;
  const output = path.join(run.dir, 'output');
  if (fs.existsSync(output)) {
    await ctx.host.commands.executeCommand('revealInExplorer', ctx.host.fileUri(output));
    await ctx.host.commands.executeCommand('workbench.view.explorer');
  } else {
    await ctx.window.showTextDocument(ctx.host.fileUri(path.join(run.dir, 'run.json')));
  }
}
