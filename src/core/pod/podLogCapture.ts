/**
 * The pod log kept with the run: from the moment the run's pod exists, its log stream (./podLogs.ts)
 * is followed into `runs/<id>/.pod/pod.log` as JSON lines `{ts, source, line}` (0600), the
 * stream's cursor in `.pod/pod.log.cursor` beside it. The first connection replays up to 5,000
 * lines, which covers the boot. The file is capped at 20 MiB (`timing.podLogCapBytes`), with one line saying so. Every line
 * is redacted before it is written or shown: the API key (and any Runpod-shaped key), bearer
 * headers, and private key blocks (every line of one). Before a pod is deleted the stream is
 * drained for at most `timing.podLogDrainMs`, so a pod deleted before its job started still
 * leaves its log behind.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { PodCtx } from './context';
import { log } from './context';
import { streamPodLogs, type PodLogLine } from '../runpod/podLogs';
import { LineRedactor } from '../redact';
import { describeError } from '../errors';

export const POD_LOG_FILE = path.join('.pod', 'pod.log');
export const POD_LOG_CURSOR_FILE = path.join('.pod', 'pod.log.cursor');
/** The most lines the API replays (its `tail` maximum). */
export const POD_LOG_REPLAY = 5000;
/** How many of the last lines a capture keeps in memory (for failure messages). */
const RECENT_LINES = 40;

/** Redacts one pod log line at a time (a private key block is hidden across lines). */
export { LineRedactor as PodLogRedactor };

export interface PodLogCapture {
  readonly runId: string;
  readonly podId: string;
  /** The last lines captured (redacted), oldest first. */
  recent(): PodLogLine[];
  /** Keeps following for at most `timing.podLogDrainMs`, then stops; resolves once stopped. */
  drain(): Promise<void>;
  stop(): Promise<void>;
}

/** The captures running, by pod ID (one per pod). */
const captures = new Map<string, PodLogCapture>();
/** The last lines of each pod captured in this process (kept after its capture stops). */
const recentByPod = new Map<string, PodLogLine[]>();

/** The capture of pod `podId`, if one runs. */
export function podLogCapture(podId: string): PodLogCapture | undefined {
  return captures.get(podId);
}

/**
 * Starts capturing pod `podId`'s log into run `runId`'s directory (a second call for the same pod
 * returns the running capture). Resumes from the cursor a former capture left. Each line is
 * published on the bus (`podLog`) once redacted. Never throws: a capture is evidence, not a step.
 */
export function startPodLogCapture(ctx: PodCtx, runId: string, podId: string): PodLogCapture {
  const running = captures.get(podId);
  if (running) return running;
  const runDir = ctx.store.runDir(runId);
  const file = path.join(runDir, POD_LOG_FILE);
  const cursorFile = path.join(runDir, POD_LOG_CURSOR_FILE);
  const redactor = new LineRedactor((text) => ctx.client.redact(text));
  const abort = new AbortController();
  const recent: PodLogLine[] = recentByPod.get(podId) ?? [];
  recentByPod.set(podId, recent);
  let size = 0;
  let capped = false;
  const capBytes = ctx.timing.podLogCapBytes;
  let cursor: string | undefined;
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    size = fs.existsSync(file) ? fs.statSync(file).size : 0;
    capped = size >= capBytes;
    const saved = fs.readFileSync(cursorFile, 'utf8').trim();
    if (saved !== '') cursor = saved;
  } catch {
    // no cursor yet: the first connection replays the backlog
  }
  const append = (text: string): void => {
    fs.appendFileSync(file, text, { mode: 0o600 });
    size += Buffer.byteLength(text);
  };
  const onLine = (raw: PodLogLine): void => {
    const line: PodLogLine = { ...raw, line: redactor.redact(raw.line) };
    recent.push(line);
    if (recent.length > RECENT_LINES) recent.shift();
    ctx.bus.publish({
      type: 'podLog',
      runId,
      podId,
      source: line.source,
      line: line.line,
    });
    try {
      if (!capped) {
        const json = `${JSON.stringify({ ts: line.ts, source: line.source, line: line.line })}\n`;
        if (size + Buffer.byteLength(json) > capBytes - 400) {
          capped = true;
          append(
            `${JSON.stringify({ ts: line.ts, source: 'system', line: `overbrainer: pod log capped at ${(capBytes / 1024 / 1024).toFixed(capBytes % 1048576 === 0 ? 0 : 2)} MiB; later lines are not kept (overbrainer runs logs ${runId} --pod shows them while the pod exists)` })}\n`,
          );
        } else append(json);
      }
      fs.writeFileSync(cursorFile, `${line.id}\n`, { mode: 0o600 });
    } catch (error) {
      log(ctx, 'debug', `cannot write the pod log of run ${runId}: ${describeError(error)}`);
    }
  };
  const done = streamPodLogs({
    client: ctx.client,
    podId,
    clock: ctx.clock,
    timing: ctx.timing,
    // Ends with the client too: a capture never outlives the API client it streams through.
    signal: AbortSignal.any([abort.signal, ctx.client.closing]),
    tail: POD_LOG_REPLAY,
    lastEventId: cursor,
    onLine,
  }).then(
    () => undefined,
    (error: unknown) =>
      log(ctx, 'debug', `the pod log stream of pod ${podId} ended: ${describeError(error)}`),
  );
  const finished = done.finally(() => {
    if (captures.get(podId) === capture) captures.delete(podId);
  });
  const stop = async (): Promise<void> => {
    abort.abort();
    await finished;
  };
  const capture: PodLogCapture = {
    runId,
    podId,
    recent: () => [...recent],
    drain: async () => {
      const timer = new AbortController();
      await Promise.race([
        finished,
        ctx.clock.sleep(ctx.timing.podLogDrainMs, timer.signal).catch(() => undefined),
      ]);
      timer.abort();
      await stop();
    },
    stop,
  };
  captures.set(podId, capture);
  return capture;
}

/**
 * Before pod `podId` of run `runId` is deleted: drains its log into the run directory (starting a
 * capture when none runs, e.g. for a pod this client did not create). Never throws.
 */
export async function drainPodLog(ctx: PodCtx, runId: string, podId: string): Promise<void> {
  try {
    await startPodLogCapture(ctx, runId, podId).drain();
  } catch (error) {
    log(ctx, 'debug', `cannot drain the pod log of pod ${podId}: ${describeError(error)}`);
  }
}

/** The last `count` lines of the capture of pod `podId` (redacted), or none. */
export function lastPodLogLines(podId: string, count: number): string[] {
  return (recentByPod.get(podId) ?? []).slice(-count).map((l) => `${l.source}: ${l.line}`);
}

/**
 * Stops every capture of this process (the CLI before it closes its API client, whose close
 * waits for open streams). The cursors stay: a later capture resumes where these stopped.
 */
export async function stopPodLogCaptures(): Promise<void> {
  await Promise.all([...captures.values()].map((c) => c.stop()));
}
