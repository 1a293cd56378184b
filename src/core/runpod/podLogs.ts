/**
 * A pod's log stream (Runpod API v2 `GET /pods/{id}/logs`, Server-Sent Events): each event an
 * `id:` (a cursor built from the event's time) and a JSON `data:` line `{ts, source, line}`.
 * The stream is followed across drops: it reconnects with `Last-Event-ID` (so no line comes twice
 * and none is lost), waiting 0.5 s doubled up to 15 s between tries (reset once a line arrives), a
 * longer `Retry-After` honoured up to a minute; a cursor the API refuses (400) falls back to its
 * time (`since`), and lines seen already are skipped. A 404 means the pod is gone: the stream ends.
 */
import { HintedError } from '../errors';
import { abortError, isAbortError, type Clock } from '../clock';
import type { Timing } from '../timing';
import type { RunpodClient } from './client';
import { ApiError } from './apiErrors';

export type PodLogSource = 'container' | 'system';

export interface PodLogLine {
  /** The event's cursor (`Last-Event-ID`). */
  id: string;
  /** RFC3339, as the API sent it. */
  ts: string;
  source: PodLogSource;
  line: string;
}

export interface PodLogStreamOptions {
  /**
   * With `limits` (a read-only command's client, `RunpodClient.withLimits`), a 429 is waited out
   * within them, as the client's own calls are, and fails once they are spent.
   */
  client: Pick<RunpodClient, 'openPodLogs'> & { readonly limits?: RunpodClient['limits'] };
  podId: string;
  clock: Clock;
  timing: Timing;
  signal: AbortSignal;
  /** Only this source (both when omitted). */
  source?: PodLogSource | undefined;
  /** Historical lines to replay on the first connection (0..5000; the API's default 100). */
  tail?: number | undefined;
  /** Resume from this time (RFC3339) on the first connection. */
  since?: string | undefined;
  /** Resume after this cursor on the first connection (takes precedence over `since`). */
  lastEventId?: string | undefined;
  onLine(line: PodLogLine): void;
  /** Told each reconnect: why and how long it waits. */
  onRetry?(reason: string, waitMs: number): void;
  /** Told each time the stream is open (a 200): the API answers. */
  onOpen?(): void;
}

export type PodLogEnd = 'gone' | 'unsupported' | 'aborted';

/** Thrown when the API refuses the stream for good (401, 403, or an answer that is not SSE). */
export class PodLogsError extends HintedError<'refused'> {
  declare readonly hint: string;

  constructor(message: string, hint: string) {
    super('refused', message, hint);
    this.name = 'PodLogsError';
  }
}

/** How many seen cursors are remembered to skip repeats after a `since` fallback. */
const SEEN_IDS = 10_000;

/**
 * Follows the pod's log until the pod is gone (404, or the stream ends and the pod answers 404)
 * or `signal` aborts. Returns why it ended and the last cursor (for a later resumption).
 */
export async function streamPodLogs(
  options: PodLogStreamOptions,
): Promise<{ end: PodLogEnd; lastEventId: string | undefined }> {
  const { client, podId, clock, timing, signal } = options;
  let lastEventId = options.lastEventId;
  let since = options.since;
  let first = true;
  let delayMs = timing.podLogRetryBaseMs;
  const seen = new Set<string>();
  const remember = (id: string): void => {
    seen.add(id);
    if (seen.size > SEEN_IDS) {
      const oldest = seen.values().next().value;
      if (oldest !== undefined) seen.delete(oldest);
    }
  };
  const wait = async (reason: string, retryAfterMs?: number): Promise<void> => {
    let ms = delayMs;
    if (retryAfterMs !== undefined && retryAfterMs > ms)
      ms = Math.min(retryAfterMs, timing.podLogRetryAfterCapMs);
    options.onRetry?.(reason, ms);
    await clock.sleep(ms, signal);
    delayMs = Math.min(delayMs * 2, timing.podLogRetryMaxMs);
  };

  try {
    for (;;) {
      if (signal.aborted) throw abortError(signal);
      const query: Record<string, string> = {};
      if (options.source) query.source = options.source;
      if (lastEventId === undefined) {
        if (since !== undefined) query.since = since;
        else if (!first) query.tail = '0';
        else if (options.tail !== undefined) query.tail = String(options.tail);
      }
      let opened;
      try {
        opened = await client.openPodLogs(podId, query, lastEventId, signal);
      } catch (error) {
        if (signal.aborted) throw abortError(signal);
        // A read-only command's limits said so (nothing answers there, the rate limit is spent).
        if (error instanceof ApiError) throw error;
        await wait(`could not reach the log stream: ${String((error as Error)?.message ?? error)}`);
        continue;
      }
      if (opened.status === 404) return { end: 'gone', lastEventId };
      // An API (or a proxy) that does not serve pod logs: nothing to follow.
      if (opened.status === 405 || opened.status === 501)
        return { end: 'unsupported', lastEventId };
      if (opened.status === 400 && lastEventId !== undefined) {
        // A refused cursor: resume from its time; the lines of that time seen already are skipped.
        since = cursorTime(lastEventId);
        lastEventId = undefined;
        continue;
      }
      if (opened.status === 401 || opened.status === 403) {
        throw new PodLogsError(
          `the Runpod API refused the log stream of pod ${podId} (${opened.status}): ${opened.text}`,
          'check the Runpod API key (overbrainer config, or "Set Runpod API Key")',
        );
      }
      const limits = client.limits ?? null;
      if (opened.status === 429 && limits !== null) {
        // A read-only command's rate-limit patience: the wait asked for, or none at all.
        const waitMs = opened.retryAfterMs ?? delayMs;
        const what = `GET /pods/${podId}/logs`;
        if (!limits.takeWait(what, 'answered 429', waitMs, clock.nowMs())) {
          throw new ApiError('rate_limited', `Runpod answered 429 to ${what}`, {
            status: 429,
            retryAfterMs: opened.retryAfterMs,
          });
        }
        await clock.sleep(waitMs, signal);
        continue;
      }
      if (opened.status !== 200 || opened.body === null) {
        await wait(`the log stream answered ${opened.status}`, opened.retryAfterMs);
        continue;
      }
      options.onOpen?.();
      const reason = await readEvents(opened.body, (event) => {
        if (event.id !== undefined) {
          lastEventId = event.id;
          since = undefined;
          if (seen.has(event.id)) return;
          remember(event.id);
        }
        const parsed = parseData(event.data, event.id);
        if (!parsed) return;
        // Until a line arrives, a reconnect replays the same backlog.
        first = false;
        delayMs = timing.podLogRetryBaseMs;
        options.onLine(parsed);
      });
      if (signal.aborted) throw abortError(signal);
      // A dropped stream, or one the API ended (the pod may be gone: the next open says 404).
      await wait(reason);
    }
  } catch (error) {
    if (isAbortError(error) || signal.aborted) return { end: 'aborted', lastEventId };
    throw error;
  }
}

/** The time part of a cursor (`<RFC3339>/<seq>`), or the cursor itself when it is a time. */
function cursorTime(id: string): string | undefined {
  const time = id.split('/')[0] ?? '';
  return Number.isFinite(Date.parse(time)) ? time : undefined;
}

function parseData(data: string, id: string | undefined): PodLogLine | null {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  if (typeof v.line !== 'string') return null;
  const ts = typeof v.ts === 'string' ? v.ts : '';
  const source: PodLogSource = v.source === 'system' ? 'system' : 'container';
  return { id: id ?? ts, ts, source, line: v.line };
}

/** Reads SSE events until the body ends or breaks; says which. */
async function readEvents(
  body: AsyncIterable<Buffer>,
  onEvent: (event: { id: string | undefined; data: string }) => void,
): Promise<string> {
  let buffer = '';
  let id: string | undefined;
  let data: string[] = [];
  const line = (text: string): void => {
    if (text === '') {
      if (data.length > 0) onEvent({ id, data: data.join('\n') });
      id = undefined;
      data = [];
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') id = value;
    else if (field === 'data') data.push(value);
  };
  try {
    for await (const chunk of body) {
      buffer += chunk.toString('utf8');
      let at: number;
      while ((at = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const text = buffer.slice(0, at);
        buffer = buffer.slice(at + (buffer.startsWith('\r\n', at) ? 2 : 1));
        line(text);
      }
    }
    return 'the log stream ended';
  } catch (error) {
    return `the log stream broke: ${String((error as Error)?.message ?? error)}`;
  }
}
