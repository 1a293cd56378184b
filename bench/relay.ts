import { spawn } from 'node:child_process';
import { join } from 'node:path';

/** Half the round trip of the benchmarks' distant link (a pod across the internet). */
export const DISTANT_ONE_WAY_MS = 25;

/** A relay in front of a port, adding a delay each way (a pod across the internet). */
export interface Relay {
  port: number;
  stop(): void;
}

/**
 * bench/delayRelay.ts in its own process (a benchmark's baseline runs synchronously, which
 * would stop a relay living in the benchmark's process): a relay to `targetPort` adding
 * `oneWayMs` each way. Kept apart from that program: importing it would start a relay.
 */
export async function startRelay(targetPort: number, oneWayMs: number): Promise<Relay> {
  const relay = spawn(
    process.execPath,
    ['--import', 'tsx', join(__dirname, 'delayRelay.ts'), String(targetPort), String(oneWayMs)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    relay.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /^(\d+)\n/.exec(out);
      if (match) resolve(Number(match[1]));
    });
    relay.on('exit', (code) =>
      reject(new Error(`the relay exited (${code}) before saying its port`)),
    );
  });
  return { port, stop: () => relay.kill() };
}
