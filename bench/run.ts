/**
 * Runs the benchmarks of issue 8, each figure against its baseline measured in
 * the same run, prints one table, and (full mode) writes docs/BENCHMARKS.md.
 *
 *   npm run bench                 every benchmark, medians of --runs repetitions (default 3)
 *   npm run bench:quick           CI: tiny sizes, one repetition, checks they run; writes nothing
 *   npx tsx bench/run.ts [--quick] [--runs N] [--only latency,retrieval,…] [--no-write]
 *                        [--json FILE] [--retrieval-big-mib N] [--retrieval-small N]
 *   npx tsx bench/run.ts --render a.json,b.json   docs/BENCHMARKS.md from --json dumps
 *
 * The benchmarks: latency (1), retrieval (2), activation (3: bundle, runs tree, activation),
 * chart (4), cost (5: requests per hour of following), scale (6: 20 followed runs),
 * startup (7: from Train to the first metric, against the sequential start), sweep (8: issue 38's
 * three figures, bench/sweepFigures.ts; skipped by --quick), clusterDeaths (9: issue 37's
 * member deaths at random moments, bench/clusterDeaths.bench.ts; skipped by --quick),
 * clusterStart (10: issue 37's Train → first step on 2 nodes against 1, bytes over the user's
 * link for 3 nodes against 1).
 * A benchmark that throws is reported as failed and the runner exits 1 (after the others ran).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { activationBench } from './activation.bench';
import { chartBench } from './chart.bench';
import { clusterDeathsBench } from './clusterDeaths.bench';
import { clusterStartBench } from './clusterStart.bench';
import { costBench } from './cost.bench';
import { latencyBench } from './latency.bench';
import {
  describeMachine,
  machine,
  ms,
  table,
  type BenchOptions,
  type BenchReport,
  type Machine,
} from './lib';
import { retrievalBench } from './retrievalRunner';
import { scaleBench } from './scale.bench';
import { startupBench } from './startup.bench';
import { sweepBench } from './sweepFigures';

const ROOT = join(__dirname, '..');

const BENCHES: Record<string, (options: BenchOptions) => Promise<BenchReport>> = {
  latency: latencyBench,
  retrieval: retrievalBench,
  activation: activationBench,
  chart: chartBench,
  cost: costBench,
  scale: scaleBench,
  startup: startupBench,
  sweep: sweepBench,
  clusterDeaths: clusterDeathsBench,
  clusterStart: clusterStartBench,
};

function arg(name: string): string | undefined {
  const index = process.argv.indexOf(name);
  return index >= 0 ? process.argv[index + 1] : undefined;
}

interface Outcome {
  name: string;
  report: BenchReport | null;
  error: string | null;
  wallMs: number;
}

function render(
  outcomes: Outcome[],
  before: Machine,
  after: Machine,
  options: BenchOptions,
  extra: string[] = [],
): string {
  const out: string[] = [];
  out.push('# Benchmarks');
  out.push('');
  out.push(
    'Written by `npm run bench` (bench/run.ts); do not edit by hand. Each figure is measured ' +
      'against its baseline in the same run on the same machine. **ratio = baseline ÷ ours** for ' +
      'costs (time, requests, bytes, memory): above 1 means ours is better. Machines here are ' +
      'shared and noisy, so the ratios say more than the absolute times.',
  );
  out.push('');
  out.push(`- Machine at the start: ${describeMachine(before)}`);
  out.push(`- Machine at the end: load average ${after.loadAverage.join(' / ')}, ${after.date}`);
  out.push(...extra);
  out.push(
    `- Repetitions: ${options.runs} per figure (medians)${options.runs < 3 ? ' — reduced because the shared machine was loaded' : ''}.`,
  );
  if (options.retrievalBigMiB !== undefined || options.retrievalSmallFiles !== undefined) {
    out.push(
      `- Retrieval sizes reduced for this run (the machine was too loaded to move the issue's sizes in time): ${options.retrievalSmallFiles ?? 10_000} small files, a ${options.retrievalBigMiB ?? 1024} MiB file, instead of 10,000 × 4 KiB and 1 GiB.`,
    );
  }
  out.push('');
  const verdicts: string[] = [];
  for (const outcome of outcomes) {
    const title = outcome.report?.title ?? outcome.name;
    out.push(`## ${title}`);
    out.push('');
    if (outcome.report === null) {
      out.push(`**Failed**: ${outcome.error ?? 'unknown error'}`);
      out.push('');
      verdicts.push(`- ${title}: the benchmark failed (${outcome.error ?? ''})`);
      continue;
    }
    const report = outcome.report;
    out.push(`Baseline: ${report.baseline}. (${ms(outcome.wallMs)} to run.)`);
    out.push('');
    out.push(
      table(
        ['measure', 'baseline', 'ours', 'ratio', 'target', 'verdict'],
        report.rows.map((r) => [r.measure, r.baseline, r.ours, r.ratio, r.target, r.verdict]),
      ),
    );
    out.push('');
    for (const note of report.notes) out.push(`- ${note}`);
    out.push('');
    if (report.bounds) {
      out.push(`What bounds it: ${report.bounds}`);
      out.push('');
    }
    for (const row of report.rows) {
      if (row.target !== '')
        verdicts.push(
          `- ${title} — ${row.measure}: ${row.verdict || 'n/a'} (target ${row.target})`,
        );
    }
  }
  out.push('## Targets at a glance');
  out.push('');
  out.push(...verdicts);
  out.push('');
  return out.join('\n');
}

/** Formats the written report as `npm run lint` (prettier --check .) expects it. */
function prettier(file: string): void {
  execFileSync(join(ROOT, 'node_modules', '.bin', 'prettier'), ['--write', file], {
    stdio: 'ignore',
  });
}

/**
 * `--render a.json,b.json`: writes docs/BENCHMARKS.md from the --json dumps of runs that each
 * ran some of the benchmarks (the first dump's machine and options head the file).
 */
function renderSaved(files: string[]): void {
  const dumps = files.map(
    (file) =>
      JSON.parse(readFileSync(file, 'utf8')) as {
        before: Machine;
        after: Machine;
        options: BenchOptions;
        outcomes: Outcome[];
      },
  );
  const outcomes: Outcome[] = [];
  for (const name of Object.keys(BENCHES)) {
    const found = dumps.flatMap((d) => d.outcomes).filter((o) => o.name === name);
    const best = found.find((o) => o.report !== null) ?? found[0];
    if (best) outcomes.push(best);
  }
  const file = join(ROOT, 'docs', 'BENCHMARKS.md');
  mkdirSync(join(ROOT, 'docs'), { recursive: true });
  writeFileSync(
    file,
    render(
      outcomes,
      dumps[0]!.before,
      dumps[dumps.length - 1]!.after,
      dumps[0]!.options,
      dumps.map(
        (d) =>
          `- Part run (${d.outcomes.map((o) => o.name).join(', ')}), side by side with the others: started with ${describeMachine(d.before)}`,
      ),
    ),
  );
  prettier(file);
  console.log(`wrote ${file} from ${files.join(', ')}`);
}

async function main(): Promise<void> {
  const saved = arg('--render');
  if (saved) {
    renderSaved(saved.split(','));
    return;
  }
  const quick = process.argv.includes('--quick');
  const runs = quick ? 1 : Number(arg('--runs') ?? 3);
  const only = arg('--only')?.split(',');
  const write = !quick && !process.argv.includes('--no-write');
  const big = arg('--retrieval-big-mib');
  const small = arg('--retrieval-small');
  const options: BenchOptions = {
    quick,
    runs,
    ...(big ? { retrievalBigMiB: Number(big) } : {}),
    ...(small ? { retrievalSmallFiles: Number(small) } : {}),
  };
  for (const name of only ?? []) {
    if (!(name in BENCHES))
      throw new Error(`no benchmark "${name}" (${Object.keys(BENCHES).join(', ')})`);
  }
  const before = machine();
  console.log(`bench: ${quick ? 'quick' : `${runs} runs`}; ${describeMachine(before)}`);
  const outcomes: Outcome[] = [];
  for (const [name, bench] of Object.entries(BENCHES)) {
    if (only && !only.includes(name)) continue;
    console.log(`\n== ${name}`);
    const started = performance.now();
    try {
      const report = await bench(options);
      const wallMs = performance.now() - started;
      outcomes.push({ name, report, error: null, wallMs });
      console.log(
        table(
          ['measure', 'baseline', 'ours', 'ratio', 'target', 'verdict'],
          report.rows.map((r) => [r.measure, r.baseline, r.ours, r.ratio, r.target, r.verdict]),
        ),
      );
      for (const note of report.notes) console.log(`- ${note}`);
      console.log(`(${name}: ${ms(wallMs)})`);
    } catch (error) {
      const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
      console.error(`bench ${name} FAILED: ${text}`);
      outcomes.push({
        name,
        report: null,
        error: error instanceof Error ? error.message : String(error),
        wallMs: performance.now() - started,
      });
    }
  }
  const after = machine();
  const jsonFile = arg('--json');
  if (jsonFile) {
    writeFileSync(jsonFile, JSON.stringify({ before, after, options, outcomes }, null, 2));
  }
  if (write) {
    mkdirSync(join(ROOT, 'docs'), { recursive: true });
    const file = join(ROOT, 'docs', 'BENCHMARKS.md');
    writeFileSync(file, render(outcomes, before, after, options));
    prettier(file);
    console.log(`\nwrote ${file}`);
  }
  if (outcomes.some((o) => o.report === null)) process.exitCode = 1;
}

main()
  .catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(() => {
    // Handles a benchmark left open (a stray socket) must not keep CI waiting.
    setTimeout(() => process.exit(), 1_000).unref();
  });
