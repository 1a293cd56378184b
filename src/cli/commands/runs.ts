/**
 * `runs …`: this project's runs from their records in runs/ (ls, logs); `runs show` is in
 * ./runsShow.ts.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type RunpodClient } from '../../core/flow';
import { streamPodLogs } from '../../core/flow/pods';
import { POD_LOG_FILE, PodLogRedactor, JOB_LOG } from '../../core/flow/records';
import { NODES_DIR } from '../../core/flow/trainCluster';
import type { Command } from '../args';
import { runsTable, type RunLine } from '../format';
import { runsJson } from '../listings';
import { EXIT_FAILED, EXIT_OK, Interrupts, printJson, type Session } from '../session';
import { describeError } from '../../core/errors';

/** `runs ls`: this project's runs from their records (no API call). */
export function runsLs(s: Session, json: boolean): number {
  const { runs, warnings } = s.store.list();
  for (const warning of warnings) s.io.stderr(`warning: ${warning.message}`);
  if (runs.length === 0 && !json) {
    s.io.stdout(`runs: no run in ${s.store.runsDir}`);
    return EXIT_OK;
  }
  const lines: RunLine[] = runs.map((run) => {
    try {
      return { run, pod: s.store.loadPod(run.id), podProblem: null };
    } catch (error) {
      return { run, pod: null, podProblem: `pod record unreadable (${describeError(error)})` };
    }
  });
  if (json) return printJson(s, runsJson(lines));
  for (const line of runsTable(lines)) s.io.stdout(line);
  return EXIT_OK;
}

/** `runs logs`: the job's log, or the pod's (kept, or streamed from the API), redacted. */
export async function runsLogs(
  s: Session,
  command: Extract<Command, { kind: 'runs_logs' }>,
): Promise<number> {
  const { runId } = command;
  const runDir = s.store.runDir(runId);
  if (!fs.existsSync(runDir)) {
    s.io.stderr(
      `runs logs: no run ${runId} in ${s.store.runsDir} (overbrainer runs ls lists them)`,
    );
    return EXIT_FAILED;
  }
  s.config(false);
  const client = s.api(false);
  const redactor = new PodLogRedactor((text) => client?.redact(text) ?? text);
  const tail = command.tail ?? 100;
  const last = <T>(items: T[]): T[] => (tail === 0 ? [] : items.slice(-tail));
  if (command.node !== undefined)
    return nodeLog(s, runId, command.node, (line) => redactor.redact(line), last);
  if (!command.pod) {
    const file = path.join(runDir, JOB_LOG);
    if (!fs.existsSync(file)) {
      s.io.stderr(
        `runs logs: run ${runId} has no job log yet (${path.join('runs', runId, JOB_LOG)}); try --pod for the pod's log`,
      );
      return EXIT_FAILED;
    }
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    for (const line of last(lines)) s.io.stdout(redactor.redact(line));
    return EXIT_OK;
  }
  const show = (l: { ts: string; source: string; line: string }): void =>
    s.io.stdout(`${l.ts} ${l.source}: ${redactor.redact(l.line)}`);
  const kept = path.join(runDir, POD_LOG_FILE);
  if (!command.follow && fs.existsSync(kept)) {
    const rows = fs
      .readFileSync(kept, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as { ts: string; source: string; line: string }];
        } catch {
          return [];
        }
      })
      .filter((r) => command.source === null || r.source === command.source);
    for (const row of last(rows)) show(row);
    return EXIT_OK;
  }
  const podId = s.store.loadPod(runId)?.podId ?? null;
  if (podId === null) {
    s.io.stderr(`runs logs: run ${runId} has no pod and no kept pod log`);
    return EXIT_FAILED;
  }
  const api = s.api(true)!;
  s.interrupts = new Interrupts(s.io, s.renderer, () => 'stopped following the pod log');
  const signal = s.interrupts.signal;
  const timing = s.timingOf();
  const stream = (
    client: RunpodClient,
    stop: AbortSignal,
    onOpen?: () => void,
  ): ReturnType<typeof streamPodLogs> =>
    streamPodLogs({
      client,
      podId,
      clock: s.clock,
      timing,
      signal: AbortSignal.any([signal, stop]),
      tail,
      source: command.source ?? undefined,
      onLine: show,
      onOpen,
    });
  // --follow: until Ctrl-C or the pod is gone, reconnecting as long as it takes.
  // Without: a read-only command (its limits: ../readOnly.ts); once the stream is open, what the
  // API replays within the drain time, then done.
  const { end } = command.follow
    ? await stream(api, new AbortController().signal)
    : await s.readOnly(api, async (limited, limit, answered) => {
        const drained = new AbortController();
        const timer = new AbortController();
        let open = false;
        try {
          return await stream(limited, AbortSignal.any([limit, drained.signal]), () => {
            if (open) return;
            open = true;
            answered();
            void s.clock.sleep(timing.podLogDrainMs, timer.signal).then(
              () => drained.abort(),
              () => undefined,
            );
          });
        } finally {
          timer.abort();
        }
      });
  if (end === 'gone')
    s.io.stderr(
      `runs logs: pod ${podId} is gone (its kept log: ${path.join('runs', runId, POD_LOG_FILE)})`,
    );
  if (end === 'unsupported') s.io.stderr('runs logs: this Runpod API does not serve pod logs');
  return EXIT_OK;
}

/** `runs logs RUN_ID --node R`: node R's job.log, kept under runs/RUN_ID/nodes/R/ at the run's end. */
function nodeLog(
  s: Session,
  runId: string,
  rank: number,
  redact: (line: string) => string,
  last: (lines: string[]) => string[],
): number {
  const cluster = s.store.loadRun(runId).cluster ?? null;
  if (cluster === null) {
    s.io.stderr(
      `runs logs: run ${runId} ran on one pod, not a cluster: drop --node (--node applies to a target with nodes = 2 or more)`,
    );
    return EXIT_FAILED;
  }
  const ranks = cluster.nodes.map((n) => n.rank);
  if (!ranks.includes(rank)) {
    s.io.stderr(
      `runs logs: run ${runId}'s cluster has no node ${rank}: its nodes are ${ranks.length === 0 ? 'not recorded yet' : ranks.join(', ')}`,
    );
    return EXIT_FAILED;
  }
  const relative = path.join('runs', runId, NODES_DIR, String(rank), JOB_LOG);
  const file = path.join(s.store.runDir(runId), NODES_DIR, String(rank), JOB_LOG);
  if (!fs.existsSync(file)) {
    s.io.stderr(
      `runs logs: node ${rank}'s job log is not kept yet (${relative}): it comes home when the run ends`,
    );
    return EXIT_FAILED;
  }
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  for (const line of last(lines)) s.io.stdout(redact(line));
  return EXIT_OK;
}
