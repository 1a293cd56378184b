import * as fs from 'node:fs';
import * as path from 'node:path';
import type { RunSummary } from '../runs/runsModel';
import type { UiContext } from '../uiContext';

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
