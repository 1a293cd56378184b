import { promises as fs } from 'node:fs';
import type { TrainMetric } from '../events';
import { LineFramer, parseFramedLine, READ_LIMIT_BYTES } from './metrics';

/**
 * Reads a run's local `metrics.jsonl` (it comes back with the results) for a run this window
 * does not follow. The file is untrusted: bounded reads through the core's framer and parser,
 * skipped lines dropped, and at most `maxBytes` read (a runaway trainer's file is cut, not
 * loaded whole).
 */

/** Reads at most this much of one file (a 600k-step run logs about 150 MB at 250 bytes a line). */
export const MAX_METRICS_FILE_BYTES = 256 * 1024 * 1024;

export interface MetricsFileRead {
  metrics: TrainMetric[];
  /** Lines that were not metrics (begin/end/stage lines are not counted). */
  skipped: number;
  /** The file was longer than the bound: only its head was read. */
  truncated: boolean;
}

/** The file's metrics in order; null when there is no file. */
export async function readMetricsFile(
  file: string,
  maxBytes = MAX_METRICS_FILE_BYTES,
): Promise<MetricsFileRead | null> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, 'r');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw error;
  }
  const result: MetricsFileRead = { metrics: [], skipped: 0, truncated: false };
  const framer = new LineFramer();
  const take = (lines: ReturnType<LineFramer['push']>): void => {
    for (const line of lines) {
      const parsed = parseFramedLine(line);
      if (parsed.kind === 'metric') result.metrics.push(parsed.metric);
      else if (parsed.kind === 'skip' && parsed.reason !== 'blank') result.skipped++;
    }
  };
  try {
    const buffer = Buffer.alloc(READ_LIMIT_BYTES);
    let position = 0;
    for (;;) {
      const want = Math.min(buffer.length, maxBytes - position);
      if (want <= 0) {
        result.truncated = (await handle.stat()).size > position;
        break;
      }
      const { bytesRead } = await handle.read(buffer, 0, want, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      take(framer.push(buffer.subarray(0, bytesRead)));
    }
    // A truncated read's tail is a partial line: only a complete file's last line counts.
    if (!result.truncated) take(framer.finish());
  } finally {
    await handle.close();
  }
  return result;
}
