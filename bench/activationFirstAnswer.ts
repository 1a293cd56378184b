/**
 * The Runs view's first answer as the extension host makes it on the click, in a fresh process
 * (cold: nothing read, parsed or compiled before, as in a new window): readNewestRuns, then
 * every top-level row presented (what getChildren and getTreeItem do). CPU ms of the process
 * (user + system), against the least work that finds the same newest runs: readdirSync, the
 * names sorted, the newest TOP_LEVEL_RUNS run.json files read and parsed by JSON.parse.
 *
 *   node --import tsx bench/activationFirstAnswer.ts RUNS_DIR ours|baseline  → JSON
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunSummary } from '../src/ui/runs/runsModel';

interface FirstAnswer {
  cpuMs: number;
  rows: number;
}

function cpuMs(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
}

async function measure(runsDir: string, side: string): Promise<FirstAnswer> {
  // Loaded before the clock starts: the modules' own load is the core's (measured apart).
  const { readNewestRuns } = await import('../src/ui/runs/runsSource');
  const model = await import('../src/ui/runs/runsModel');
  const view = await import('../src/ui/runs/runsView');
  const start = process.cpuUsage();
  if (side === 'baseline') {
    const names = readdirSync(runsDir).sort().reverse().slice(0, model.TOP_LEVEL_RUNS);
    const parsed = names.map(
      (name) => JSON.parse(readFileSync(join(runsDir, name, 'run.json'), 'utf8')) as unknown,
    );
    return { cpuMs: cpuMs(start), rows: parsed.length };
  }
  const newest = await readNewestRuns(
    [{ dir: runsDir, workspaceName: 'bench' }],
    model.TOP_LEVEL_RUNS,
  );
  const nowS = Date.now() / 1000;
  // The top level holds runs and the older-runs row only (no run's children).
  const rows = model
    .topLevelNodes(newest.runs, newest.total)
    .map((node) =>
      model.isOlderRuns(node)
        ? view.presentOlderRuns(node)
        : view.presentRun(node as RunSummary, nowS),
    );
  return { cpuMs: cpuMs(start), rows: rows.length };
}

/** `samples` fresh processes per side, alternating; CPU ms of each. */
export function firstAnswerCpuMs(
  runsDir: string,
  samples: number,
): { ours: number[]; baseline: number[]; rows: number } {
  const run = (side: string): FirstAnswer =>
    JSON.parse(
      execFileSync(process.execPath, ['--import', 'tsx', __filename, runsDir, side], {
        cwd: join(__dirname, '..'),
        encoding: 'utf8',
      }),
    ) as FirstAnswer;
  const ours: number[] = [];
  const baseline: number[] = [];
  let rows = 0;
  for (let i = 0; i < samples; i++) {
    baseline.push(run('baseline').cpuMs);
    const answer = run('ours');
    ours.push(answer.cpuMs);
    rows = answer.rows;
  }
  return { ours, baseline, rows };
}

if (require.main === module) {
  const [runsDir, side] = process.argv.slice(2);
  measure(runsDir!, side!)
    .then((answer) => process.stdout.write(JSON.stringify(answer)))
    .catch((error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    });
}
