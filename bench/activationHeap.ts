/**
 * The heap the Runs view's list holds, in a fresh process (so nothing of a previous measurement
 * is in it): heapUsed after a full GC with the list loaded and held, less heapUsed after a full
 * GC before it. `ours` = the RunsModel loaded through readRuns (what the view keeps); `baseline`
 * = each run.json parsed by JSON.parse, held the same way.
 *
 *   node --expose-gc --import tsx bench/activationHeap.ts RUNS_DIR ours|baseline  → bytes
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RunsModel } from '../src/ui/runs/runsModel';
import { readRuns } from '../src/ui/runs/runsSource';

async function main(runsDir: string, side: string): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run with --expose-gc');
  gc();
  const before = process.memoryUsage().heapUsed;
  let held: unknown;
  if (side === 'ours') {
    const model = new RunsModel(() => readRuns([{ dir: runsDir, workspaceName: 'bench' }]));
    await model.ensureLoaded();
    held = model;
  } else {
    held = readdirSync(runsDir).map(
      (name) => JSON.parse(readFileSync(join(runsDir, name, 'run.json'), 'utf8')) as unknown,
    );
  }
  gc();
  const bytes = process.memoryUsage().heapUsed - before;
  if (held === undefined) throw new Error('nothing loaded');
  process.stdout.write(String(bytes));
}

const [runsDir, side] = process.argv.slice(2);
main(runsDir!, side!).catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
