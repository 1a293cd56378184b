/**
 * A retrieval published as a transfer (`transfer` events on the core bus): its download phase
 * reports the bytes and files done of those the pod listed, then its wait for the pod's hashes
 * (`checking`), its end the files it verified.
 */
import type { Clock } from '../clock';
import type { EventBus, TransferDirection } from '../events';
import { TransferReporter } from '../transferProgress';
import { retrieve, type RetrieveOptions, type RetrieveResult } from './retrieval';

/** {@link retrieve}, its progress published for `runId` as a `direction` transfer. */
export function retrieveReported(
  deps: { bus: EventBus; clock: Clock },
  runId: string,
  direction: TransferDirection,
  options: Omit<RetrieveOptions, 'onProgress'>,
): Promise<RetrieveResult> {
  const reporter = new TransferReporter(deps.bus, deps.clock, runId, direction);
  return reporter.around(
    (report) =>
      retrieve({
        ...options,
        onProgress: (p) => {
          if (p.phase !== 'downloading' && p.phase !== 'verifying') return;
          const { bytesDone, filesDone, filesTotal } = p;
          const checking = p.phase === 'verifying';
          report({ bytesDone, bytesTotal: p.bytesTotal ?? null, filesDone, filesTotal, checking });
        },
      }),
    (result) => ({
      bytesDone: result.bytes,
      bytesTotal: result.bytes,
      filesDone: result.files,
      filesTotal: result.files,
    }),
  );
}
