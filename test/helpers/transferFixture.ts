/**
 * A transfer in progress, as the figures' and the status bar's tests read it: an upload a third
 * done (1 GiB, 3 of 12 files), 48.2 MiB/s, 14.2 s left after 6.5 s; each test sets what it reads.
 */
import type { TransferProgress } from '../../src/core/events';

export const MIB = 1024 * 1024;

export function transferProgress(over: Partial<TransferProgress> = {}): TransferProgress {
  return {
    direction: 'upload',
    phase: 'progress',
    bytesDone: 317 * MIB,
    bytesTotal: 1024 * MIB,
    filesDone: 3,
    filesTotal: 12,
    rateBytesPerS: 48.2 * MIB,
    etaMs: 14_200,
    elapsedMs: 6_500,
    ...over,
  };
}
