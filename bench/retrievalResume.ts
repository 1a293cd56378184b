/**
 * The retrieval bench's resume figure (bench/retrieval.bench.ts): a retrieval of the big file
 * whose every SSH session is dropped halfway, the bytes on the wire counted by a proxy.
 */
import { join } from 'node:path';
import { systemClock } from '../src/core/clock';
import { SshExecutor } from '../src/core/exec/ssh';
import { scaleTiming } from '../src/core/timing';
import { retrieve } from '../src/core/train/retrieval';
import { startTcpProxy, type startSshd } from '../test/helpers/sshd';

/** Resume: every session dropped halfway through the big file; the bytes on the wire counted. */
export async function measureResume(
  sshd: Awaited<ReturnType<typeof startSshd>>,
  remote: string,
  work: string,
  bigMiB: number,
  rows: string[][],
  json: Record<string, unknown>,
): Promise<void> {
  // Resume: drop every session halfway through the big file; count the bytes on the wire.
  const proxy = await startTcpProxy(sshd.port);
  try {
    const executor = await SshExecutor.connect({
      host: sshd.host,
      port: proxy.port,
      username: 'root',
      privateKey: sshd.clientPrivateKey,
      hostPublicKey: sshd.hostPublicKey,
      clock: systemClock,
      timing: scaleTiming(1),
    });
    const size = bigMiB * 1024 * 1024;
    let dropped = false;
    const before = proxy.bytesDown();
    const result = await retrieve({
      executor,
      remoteRunDir: remote,
      localRunDir: join(work, 'resume'),
      entries: ['big'],
      retryDelayMs: 100,
      progressIntervalMs: 0,
      onProgress: (p) => {
        if (!dropped && p.phase === 'downloading' && p.bytesDone > size / 2) {
          dropped = true;
          void sshd.dropSessions();
        }
      },
    });
    executor.dispose();
    const wire = proxy.bytesDown() - before;
    rows.push([
      `resume after a drop at 50 % (${bigMiB} MiB)`,
      'starts over',
      `${(wire / size).toFixed(3)} × file size on the wire`,
      '',
      '',
      result.verified && dropped ? 'verified' : 'NOT verified',
    ]);
    json.resume = { wireBytes: wire, size, verified: result.verified, dropped };
  } finally {
    await proxy.close();
  }
}
