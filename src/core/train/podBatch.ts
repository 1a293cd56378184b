/**
 * The pod side's batcher of a followed run's metrics stream. Every write that reaches the client
 * wakes it, and at a few lines a second its CPU is mostly the cost of a wake-up (the socket read,
 * the SSH packet's decryption, the event loop's turn), not of the lines: issue 39 counted about
 * 300 wake-ups a minute for 117 ms of the main thread at 10 lines/s. A tail polling every 0.2 s
 * sends 2 lines a write at that rate; a line that waited up to 0.2 s could carry the next one too.
 *
 * So the batcher holds what its GNU tail (woken by inotify, so it knows when each line came)
 * hands it and writes it out once the oldest byte held is {@link POD_BATCH_MS} old, or at once
 * when 64 KiB are held (a replay). A line waits at most that long on the pod, as with the tail's
 * poll, and at 10 lines/s a write carries about 3 lines instead of 2. It runs the tail itself:
 * when it is stopped (SIGTERM, the watcher's kill) it stops the tail, writes what it held and
 * exits, so nothing outlives it and no line read is dropped; when its tail ends it writes what it
 * held and exits with 3 if the tail failed. A closed channel ends both (exit 4).
 */
import { shQuote } from './job';

/** A line waits at most this long on the pod before it is sent (ms). */
export const POD_BATCH_MS = 200;

/** Held bytes that are sent at once, however young. */
const BATCH_MAX_BYTES = 65_536;

/** Python 3 (any), standard library only: argv = the wait in seconds, then the tail's argv. */
const BATCH_PY = [
  'import os, select, signal, subprocess, sys, time',
  'wait_s = float(sys.argv[1])',
  'tail = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE)',
  'signal.signal(signal.SIGTERM, lambda *_: tail.kill())',
  'signal.signal(signal.SIGHUP, lambda *_: tail.kill())',
  'src = tail.stdout.fileno()',
  'held, size, oldest = [], 0, None',
  'def flush():',
  '    global held, size, oldest',
  "    data = b''.join(held)",
  '    held, size, oldest = [], 0, None',
  '    try:',
  '        while data:',
  '            data = data[os.write(1, data):]',
  '    except OSError:',
  '        tail.kill()',
  '        os._exit(4)',
  'while True:',
  '    left = None if oldest is None else max(0.0, oldest + wait_s - time.monotonic())',
  '    if select.select([src], [], [], left)[0]:',
  '        data = os.read(src, 65536)',
  '        if not data:',
  '            break',
  '        if oldest is None:',
  '            oldest = time.monotonic()',
  '        held.append(data)',
  '        size += len(data)',
  `        if size < ${BATCH_MAX_BYTES}:`,
  '            continue',
  '    flush()',
  'flush()',
  'code = tail.wait()',
  // Killed by the handlers above (a negative code): stopped, not failed.
  'sys.exit(3 if code > 0 else 0)',
].join('\n');

/** True (exit 0) where the batcher can run: a python3 with the modules it uses. */
export const BATCH_PROBE_SH =
  "command -v python3 >/dev/null 2>&1 && python3 -c 'import select, subprocess' >/dev/null 2>&1";

/**
 * The shell words that run `tailCommand` (words the shell splits, e.g. `tail -c +1 $opts -F f`)
 * under the batcher: its output on stdout in batches.
 */
export function batchCommand(tailCommand: string, waitMs = POD_BATCH_MS): string {
  if (!(waitMs >= 0 && waitMs <= 10_000)) throw new RangeError(`bad batch wait ${waitMs}`);
  return `python3 -c ${shQuote(BATCH_PY)} ${waitMs / 1000} ${tailCommand}`;
}
