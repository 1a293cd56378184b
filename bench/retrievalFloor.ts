/**
 * The floor under the retrieval's peak-RSS rows (bench/retrieval.bench.ts): plain ssh2, no code
 * of ours, streams the same bytes from the same sshd (`cat` of the big file, `tar -cf -` of the
 * small files' tree) into a consumer that drops them, in a child process of its own bundled as
 * the product's is. Its peak RSS is what any retrieval that moves its bytes through ssh2 in a
 * Node process pays before writing, hashing or checking anything; its steps (a bare Node, ssh2
 * loaded, connected) say where that memory is.
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { forkBundled, fromParent, toParent, type Message } from './child';

export interface FloorParams {
  host: string;
  port: number;
  keyPath: string;
  hostPublicKey: string;
  /** The command whose stdout is streamed (and dropped). */
  command: string;
}

export interface FloorResult {
  /** Peak RSS, KiB: when the parameters came (a bare Node), after `require('ssh2')`, connected, at the end. */
  idleKiB: number;
  loadedKiB: number;
  connectedKiB: number;
  peakKiB: number;
  /** Bytes streamed. */
  bytes: number;
  /** The most seen at once (MiB), sampled every 20 ms: memory outside the V8 heap, Buffers among it. */
  external: number;
  arrayBuffers: number;
}

/** The measured side: a bare Node, then ssh2, then the stream into nothing. */
async function child(): Promise<void> {
  const params = await fromParent<Message & FloorParams>('params');
  const maxRss = (): number => process.resourceUsage().maxRSS;
  const idleKiB = maxRss();
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { Client } = require('ssh2') as typeof import('ssh2');
  const loadedKiB = maxRss();
  const pinned = Buffer.from(params.hostPublicKey.split(' ')[1] ?? '', 'base64');
  const client = new Client();
  await new Promise<void>((resolve, reject) => {
    client.on('ready', resolve).on('error', reject);
    client.connect({
      host: params.host,
      port: params.port,
      username: 'root',
      privateKey: readFileSync(params.keyPath),
      algorithms: { serverHostKey: ['ssh-ed25519'] },
      hostVerifier: (key: Buffer) => key.equals(pinned),
    });
  });
  const connectedKiB = maxRss();
  const peak = { external: 0, arrayBuffers: 0 };
  const sampler = setInterval(() => {
    const usage = process.memoryUsage();
    peak.external = Math.max(peak.external, usage.external / 1024 / 1024);
    peak.arrayBuffers = Math.max(peak.arrayBuffers, usage.arrayBuffers / 1024 / 1024);
  }, 20);
  let bytes = 0;
  await new Promise<void>((resolve, reject) => {
    client.exec(params.command, (error, channel) => {
      if (error) return reject(error);
      channel.on('data', (chunk: Buffer) => (bytes += chunk.length));
      channel.stderr.resume();
      channel.on('close', () => resolve());
    });
  });
  clearInterval(sampler);
  client.end();
  const out: FloorResult = {
    idleKiB,
    loadedKiB,
    connectedKiB,
    peakKiB: maxRss(),
    bytes,
    ...peak,
  };
  toParent({ type: 'result', ...out });
  process.disconnect();
}

/** One floor measurement in a child process of its own. */
export async function measureFloor(params: FloorParams): Promise<FloorResult> {
  const proc = forkBundled(__filename);
  proc.send({ type: 'params', ...params });
  const result = await proc.next<Message & FloorResult>('result', 1_800_000);
  await proc.done();
  return result;
}

// Only in its own bundle (retrieval.bench.ts's bundle holds this module too, and its child also
// gets `--child`).
if (
  process.argv.includes('--child') &&
  basename(process.argv[1] ?? '').startsWith('retrievalFloor-')
) {
  child().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
