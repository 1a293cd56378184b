/**
 * The transfers under way, as the status bar shows them while they last (free of `vscode`):
 * `$(cloud-upload) Uploading 31 % · 48.2 MiB/s · 15 s left`, in place of the run's countdown.
 * A transfer shows once it has lasted TRANSFER_LIVE_AFTER_MS (a short one would only flicker),
 * and goes at its end.
 */
import type { CoreEvent, TransferDirection, TransferProgress } from '../../core/events';
import { TRANSFER_LIVE_AFTER_MS } from '../../core/timing';
import {
  checkingWords,
  formatBytes,
  formatElapsed,
  formatRate,
  formatTransferTime,
  percentDone,
} from '../../core/transferFormat';
import type { StatusView } from './statusModel';

const WORDS: Record<TransferDirection, { icon: string; verb: string; done: string; what: string }> =
  {
    upload: {
      icon: 'cloud-upload',
      verb: 'Uploading',
      done: 'Uploaded',
      what: 'the run directory to the pod',
    },
    retrieve: {
      icon: 'cloud-download',
      verb: 'Retrieving',
      done: 'Retrieved',
      what: 'the results from the pod',
    },
    checkpoint: {
      icon: 'cloud-download',
      verb: 'Copying checkpoint',
      done: 'Copied checkpoint',
      what: 'a checkpoint home',
    },
  };

export class TransferModel {
  /** By run, then by direction. */
  private readonly live = new Map<string, Map<TransferDirection, TransferProgress>>();

  /** Takes a core event; true when what a run shows changed. */
  onEvent(event: CoreEvent): boolean {
    if (event.type !== 'transfer') return false;
    const { runId, direction } = event;
    const ofRun = this.live.get(runId);
    if (event.phase === 'done' || event.phase === 'failed') {
      const had = ofRun?.delete(direction) ?? false;
      if (ofRun?.size === 0) this.live.delete(runId);
      return had;
    }
    if (event.elapsedMs < TRANSFER_LIVE_AFTER_MS && !ofRun?.has(direction)) return false;
    const { type: _type, runId: _runId, ...progress } = event;
    this.live.set(runId, (ofRun ?? new Map()).set(direction, progress));
    return true;
  }

  /** The transfer `runId` shows now, if any (the one that began last, should two overlap). */
  of(runId: string): TransferProgress | null {
    const ofRun = [...(this.live.get(runId)?.values() ?? [])];
    return ofRun.length === 0 ? null : ofRun[ofRun.length - 1]!;
  }
}

/**
 * The line a progress notification shows while `t` goes on (the start's and the retrieval's):
 * `Uploading 30 % · 312.4 MiB of 1.00 GiB · 48.2 MiB/s · 15 s left`; at its end the total and
 * the time (`Uploaded 1.00 GiB in 21 s`). Null for a transfer too short to show yet.
 */
export function transferMessage(t: TransferProgress): string | null {
  const words = WORDS[t.direction];
  if (t.phase === 'failed') return null;
  if (t.phase === 'done') {
    return `${words.done} ${formatBytes(t.bytesDone)} in ${formatElapsed(t.elapsedMs)}`;
  }
  if (t.elapsedMs < TRANSFER_LIVE_AFTER_MS) return null;
  if (t.phase === 'checking') return `${words.verb}: ${checkingWords(t)}`;
  const percent = percentDone(t);
  const parts = [percent === null ? words.verb : `${words.verb} ${percent} %`, amountOf(t)];
  if (t.rateBytesPerS !== null) parts.push(formatRate(t.rateBytesPerS));
  if (t.etaMs !== null) parts.push(`${formatTransferTime(t.etaMs)} left`);
  return parts.join(' · ');
}

function amountOf(t: TransferProgress): string {
  return t.bytesTotal === null
    ? formatBytes(t.bytesDone)
    : `${formatBytes(t.bytesDone)} of ${formatBytes(t.bytesTotal)}`;
}

/** The status bar item for `runId` while `t` goes on. */
export function transferStatusView(runId: string, t: TransferProgress): StatusView {
  const words = WORDS[t.direction];
  const parts = [words.verb];
  if (t.phase === 'checking') {
    parts.push(t.direction === 'upload' ? 'the pod checks it' : "checking the pod's hashes");
  } else {
    const percent = percentDone(t);
    if (percent !== null) parts[0] = `${words.verb} ${percent} %`;
    if (t.rateBytesPerS !== null) parts.push(formatRate(t.rateBytesPerS));
    if (t.etaMs !== null) parts.push(`${formatTransferTime(t.etaMs)} left`);
  }
  const amount = amountOf(t);
  const files = t.filesTotal === null ? '' : ` (${t.filesDone} of ${t.filesTotal} files)`;
  return {
    text: `$(${words.icon}) ${parts.join(' · ')}`,
    tooltip: [
      `Overbrainer run ${runId}`,
      `${words.verb} ${words.what}: ${amount}${files}, for ${formatTransferTime(t.elapsedMs)}`,
      'Click to show the run.',
    ].join('\n'),
    background: 'none',
  };
}
