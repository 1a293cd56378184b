/**
 * "Show Logs" on a run: which logs a run has in its directory, and their redacted text. The job's
 * log is `runs/<id>/job.log` (on this machine once retrieved, or for a local target); the pod's is
 * the capture in `runs/<id>/.pod/pod.log` (JSON lines `{ts, source, line}`), which grows while
 * the pod lives. Both are shown as read-only documents (scheme `overbrainer-log`) that follow
 * their file; every line passes the redactor again before it is shown.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { LineRedactor } from '../../core/redact';
import { POD_LOG_FILE, JOB_LOG } from '../../core/flow/records';
import type { RunSummary } from './runsModel';
import type { UiContext } from '../uiContext';

export const RUN_LOG_SCHEME = 'overbrainer-log';

export type RunLogKind = 'job' | 'pod';

export interface RunLogSource {
  kind: RunLogKind;
  /** The file the log is read from. */
  file: string;
  label: string;
  description: string;
}

/** The file of log `kind` in run directory `runDir`. */
export function runLogFile(runDir: string, kind: RunLogKind): string {
  return path.join(runDir, kind === 'job' ? JOB_LOG : POD_LOG_FILE);
}

/** The logs run directory `runDir` holds, the job's first. */
export function runLogSources(runDir: string): RunLogSource[] {
  const sources: RunLogSource[] = [];
  const job = runLogFile(runDir, 'job');
  if (fs.existsSync(job))
    sources.push({ kind: 'job', file: job, label: 'Job log', description: JOB_LOG });
  const pod = runLogFile(runDir, 'pod');
  if (fs.existsSync(pod))
    sources.push({
      kind: 'pod',
      file: pod,
      label: 'Pod log',
      description: `${POD_LOG_FILE} (boot, sshd, watchdog; follows while the pod lives)`,
    });
  return sources;
}

/**
 * The text of log `kind` of `runDir`, each line redacted (`redact` hides known secrets; private
 * key blocks are hidden across lines). Pod log lines read `ts source: line`; an unreadable line
 * of the capture is skipped. An absent file reads as empty.
 */
export function runLogText(
  runDir: string,
  kind: RunLogKind,
  redact: (text: string) => string,
): string {
  let raw: string;
  try {
    raw = fs.readFileSync(runLogFile(runDir, kind), 'utf8');
  } catch {
    return '';
  }
  const redactor = new LineRedactor(redact);
  const lines = raw.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const shown =
    kind === 'job'
      ? lines
      : lines.flatMap((l) => {
          try {
            const row = JSON.parse(l) as { ts?: unknown; source?: unknown; line?: unknown };
            return typeof row.line === 'string'
              ? [`${String(row.ts ?? '')} ${String(row.source ?? '')}: ${row.line}`]
              : [];
          } catch {
            return [];
          }
        });
  return shown.map((l) => redactor.redact(l)).join('\n') + (shown.length > 0 ? '\n' : '');
}

/** The document path of log `kind` of `run` (the query carries the run directory). */
export function runLogPath(run: Pick<RunSummary, 'id'>, kind: RunLogKind): string {
  return `/${run.id}/${kind === 'job' ? 'job' : 'pod'}.log`;
}

/**
 * Show Logs: the run's logs (the run from a tree item, else a QuickPick of the runs with a log and
 * the extension's own output), a QuickPick
 * of its logs when it has several, each opened as a read-only document that follows its file.
 * A run with no log yet says when it will have one and offers the extension's output.
 */
export async function showLogs(ctx: UiContext, arg: unknown): Promise<void> {
  const run = await pickLogRun(ctx, arg);
  if (!run) return;
  const sources = runLogSources(run.dir);
  if (sources.length === 0) {
    const choice = await ctx.window.showInformationMessage(
      `Overbrainer: run ${run.id} has no log yet. Its pod's log is kept from the moment its pod is created (${path.join('runs', run.id, POD_LOG_FILE)}); its job's log comes back with the results (${path.join('runs', run.id, JOB_LOG)}).`,
      'Show Output',
    );
    if (choice === 'Show Output') ctx.log.show();
    return;
  }
  let chosen: RunLogSource[] = sources;
  if (sources.length > 1) {
    const pick = await ctx.window.showQuickPick(
      [
        ...sources.map((s) => ({ label: s.label, description: s.description, sources: [s] })),
        { label: 'Both', description: 'side by side', sources },
      ],
      { placeHolder: `Log of run ${run.id} to show` },
    );
    if (!pick) return;
    chosen = pick.sources;
  }
  for (const [i, source] of chosen.entries()) {
    await ctx.window.showTextDocument(ctx.host.logUri(run.dir, runLogPath(run, source.kind)), {
      preview: false,
      preserveFocus: i > 0,
    });
  }
}

/**
 * The run of a tree item, else a QuickPick of the runs with a log, the output channel first; with
 * no run log at all, the output channel at once (nothing to choose).
 */
async function pickLogRun(ctx: UiContext, arg: unknown): Promise<RunSummary | undefined> {
  if (typeof arg === 'object' && arg !== null) return ctx.pickRun(arg, () => true, 'show');
  await ctx.runs.ensureLoaded().catch(() => undefined);
  const runs = ctx.runs.all.filter((r) => runLogSources(r.dir).length > 0);
  if (runs.length === 0) {
    ctx.log.show();
    return undefined;
  }
  const pick = await ctx.window.showQuickPick(
    [
      { label: 'Overbrainer output', description: "this extension's log", run: undefined },
      ...runs.map((run) => ({
        label: run.id,
        description: [run.state, run.target, run.pod?.state].filter(Boolean).join(' · '),
        run,
      })),
    ],
    { placeHolder: 'Logs to show: a run, or the extension output' },
  );
  if (pick && pick.run === undefined) ctx.log.show();
  return pick?.run;
}
