/**
 * The emulator's pod logs: each pod's log file as `GET /v2/pods/{id}/logs` serves it (events with
 * ids, and the follow stream).
 */
import { readFileSync } from 'node:fs';
import { type ServerResponse } from 'node:http';
import { rfc3339 } from '../../src/core/clock';
import { type PodLogEvent, type PodState, problem, type Reply } from './state';
import { EmulatorBase } from './base';

export abstract class PodLogs extends EmulatorBase {
  /**
   * The pod's log as Runpod's log stream serves it: every complete line of the pod's real output
   * (the emulator's own `runpod-emulator:` lines are the `system` source; bootstrap, sshd and
   * watchdog output the `container` source), stamped with the clock when first read, numbered.
   */
  protected syncPodLog(pod: PodState): PodLogEvent[] {
    let book = this.logBooks.get(pod.id);
    if (!book) {
      book = { offset: 0, partial: '', events: [] };
      this.logBooks.set(pod.id, book);
    }
    let chunk: Buffer;
    try {
      const all = readFileSync(pod.dirs.log);
      chunk = all.subarray(book.offset);
      book.offset = all.length;
    } catch {
      return book.events;
    }
    const text = book.partial + chunk.toString('utf8');
    const lines = text.split('\n');
    book.partial = lines.pop() ?? '';
    const ts = rfc3339(this.clock.nowMs());
    for (const raw of lines) {
      const system = raw.startsWith('runpod-emulator: ');
      const line = system ? raw.slice('runpod-emulator: '.length) : raw;
      const seq = book.events.length + 1;
      book.events.push({
        id: `${ts}/${String(seq).padStart(12, '0')}`,
        ts,
        source: system ? 'system' : 'container',
        line,
      });
    }
    return book.events;
  }

  /**
   * `GET /v2/pods/{id}/logs`: Server-Sent Events, each an `id:` (`<ts>/<seq>`) and a JSON `data:`
   * line ({ts, source, line}). The backfill is `Last-Event-ID` (the events after it; an id this
   * pod never sent is refused with a 400), else `since` (the events at or after it), else the
   * last `tail` (default 100, at most 5000); then live lines until the pod is deleted. Returns
   * an answer for an error, undefined once the stream is served.
   */
  protected streamPodLogs(
    podId: string,
    query: Record<string, unknown>,
    lastEventId: string | undefined,
    res: ServerResponse,
    dropAfter: number | undefined,
  ): Reply | undefined {
    const pod = this.podsById.get(podId);
    if (!pod || pod.deleted) return problem(404, `pod ${podId} not found`);
    const source = typeof query.source === 'string' ? query.source : undefined;
    const wanted = (e: PodLogEvent): boolean => source === undefined || e.source === source;
    const events = this.syncPodLog(pod);
    let next: number;
    if (lastEventId !== undefined) {
      const m = /^(.+)\/(\d{12})$/.exec(lastEventId);
      const seq = m ? Number(m[2]) : NaN;
      const known = events[seq - 1];
      if (!m || !known || known.id !== lastEventId)
        return problem(
          400,
          `Last-Event-ID '${lastEventId.slice(0, 80)}' is not a cursor of this stream`,
        );
      next = seq;
    } else if (typeof query.since === 'string') {
      const sinceMs = Date.parse(query.since);
      if (!Number.isFinite(sinceMs)) return problem(400, 'since is not an RFC3339 time');
      next = events.findIndex((e) => Date.parse(e.ts) >= sinceMs);
      if (next < 0) next = events.length;
    } else {
      const tail = typeof query.tail === 'number' ? query.tail : 100;
      const matching = events.map((e, i) => [e, i] as const).filter(([e]) => wanted(e));
      next =
        tail === 0
          ? events.length
          : (matching[Math.max(0, matching.length - tail)]?.[1] ?? events.length);
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    let sent = 0;
    let done = false;
    const pump = (): void => {
      if (done) return;
      const all = this.syncPodLog(pod);
      for (; next < all.length; next++) {
        const e = all[next]!;
        if (!wanted(e)) continue;
        const event = `id: ${e.id}\ndata: ${JSON.stringify({ ts: e.ts, source: e.source, line: e.line })}\n\n`;
        sent++;
        if (dropAfter !== undefined && sent >= dropAfter) {
          // The events so far reach the client; then the connection breaks.
          next++;
          stop();
          res.write(event, () => res.socket?.destroy());
          return;
        }
        res.write(event);
      }
      if (pod.deleted || this.closed) {
        stop();
        res.end();
      }
    };
    const timer = setInterval(pump, 50);
    const stop = (): void => {
      done = true;
      clearInterval(timer);
      this.hanging.delete(res);
    };
    this.hanging.add(res);
    res.once('close', stop);
    pump();
    return undefined;
  }
}
