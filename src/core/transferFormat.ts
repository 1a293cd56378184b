/**
 * Transfer figures as people read them (IEC units, as `rsync -h` and `docker pull` print them):
 * the CLI's live and final lines and the VS Code status bar both speak through these.
 */
import type { TransferProgress } from './events';

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'] as const;

/** `512 B`, `1.50 KiB`, `312.4 MiB`, `1.00 GiB`: two decimals under 10, one from there. */
export function formatBytes(bytes: number): string {
  let value = Math.max(0, bytes);
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) return `${Math.round(value)} B`;
  // 1023.96 KiB rounds to 1024.0: said as the next unit instead.
  if (value >= 1023.95 && unit < UNITS.length - 1) return `1.00 ${UNITS[unit + 1]}`;
  return `${value.toFixed(value < 10 ? 2 : 1)} ${UNITS[unit]}`;
}

/** `48.2 MiB/s`. */
export function formatRate(bytesPerS: number): string {
  return `${formatBytes(bytesPerS)}/s`;
}

/** `15 s`, `2 min 05 s`, `1 h 12 min`: whole seconds, rounded up (time left is never undersold). */
export function formatTransferTime(ms: number): string {
  const s = Math.max(0, Math.ceil(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min`;
}

/** How long a transfer took: `0.4 s` under 10 s (a short one is not said to take a second), then as above. */
export function formatElapsed(ms: number): string {
  return ms < 9_950 ? `${(Math.max(0, ms) / 1000).toFixed(1)} s` : formatTransferTime(ms);
}

/** Whole percent done, never 100 before the end; null while the total is unknown. */
export function percentDone(
  t: Pick<TransferProgress, 'bytesDone' | 'bytesTotal' | 'phase'>,
): number | null {
  if (t.bytesTotal === null) return null;
  if (t.phase === 'done' || t.bytesTotal === 0) return 100;
  return Math.min(99, Math.floor((t.bytesDone / t.bytesTotal) * 100));
}

/** What a transfer waits for once every byte went: the other side's hashes. */
export function checkingWords(t: Pick<TransferProgress, 'direction' | 'bytesDone'>): string {
  return t.direction === 'upload'
    ? `${formatBytes(t.bytesDone)} sent, the pod checks it`
    : `${formatBytes(t.bytesDone)} received, checking it against the pod's hashes`;
}

/**
 * `upload: 312.4 MiB of 1.00 GiB, 48.2 MiB/s, 15 s left` (what is not known yet left out);
 * `upload: 1.00 GiB sent, the pod checks it` once every byte went.
 */
export function transferLiveLine(t: TransferProgress): string {
  if (t.phase === 'checking') return `${t.direction}: ${checkingWords(t)}`;
  const parts = [
    t.bytesTotal === null
      ? formatBytes(t.bytesDone)
      : `${formatBytes(t.bytesDone)} of ${formatBytes(t.bytesTotal)}`,
  ];
  if (t.rateBytesPerS !== null) parts.push(formatRate(t.rateBytesPerS));
  if (t.etaMs !== null) parts.push(`${formatTransferTime(t.etaMs)} left`);
  return `${t.direction}: ${parts.join(', ')}`;
}

/** `upload: 1.00 GiB (12 files) in 21 s, 48.7 MiB/s`: the total, the time and the average rate. */
export function transferDoneLine(t: TransferProgress): string {
  const files = t.filesDone === 1 ? '1 file' : `${t.filesDone} files`;
  const rate = t.rateBytesPerS === null ? '' : `, ${formatRate(t.rateBytesPerS)}`;
  return `${t.direction}: ${formatBytes(t.bytesDone)} (${files}) in ${formatElapsed(t.elapsedMs)}${rate}`;
}
