/**
 * Loopback ports for listeners started a little later (a pod's sshd, a test's sshd), reserved
 * machine-wide: the test tiers run many processes at once (six integration files, two e2e
 * windows, each with emulators of its own), and a port that is merely free when picked can be
 * picked again by another process before either listener binds it. The sshd that loses exits in
 * the background, its pod never answers SSH, and its client polls until its run times out (seen
 * in CI: a pod's watchdog gave its verdict, the client never reached the pod). So a pick is
 * also a reservation: a file per port under {@link PORTS_DIR}, created exclusively, holding the
 * reserving process's pid; a file whose process is gone is taken over.
 */
import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer as createTcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pidAlive } from '../../src/core/runs/lock';

/** Where the reservations live (one file per port, its content the owner's pid). */
export const PORTS_DIR = join(tmpdir(), 'overbrainer-test-ports');

/** Where {@link freePort} picks from: below the kernel's ephemeral range, above 20000. */
const LISTEN_PORT_LOW = 20_000;

/** The ports this process holds a reservation for. */
const held = new Set<number>();
let exitHookSet = false;

/** The first port of the kernel's ephemeral range (32768 when it cannot be read). */
function ephemeralLow(): number {
  try {
    const low = Number(
      readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0],
    );
    return Number.isInteger(low) && low > 0 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

/** Whether a loopback listener can take `port` now (it is released at once). */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createTcpServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Takes `port`'s reservation for this process; false when a live process (this one included) holds it. */
export function reservePort(port: number): boolean {
  if (held.has(port)) return false;
  mkdirSync(PORTS_DIR, { recursive: true, mode: 0o1777 });
  const file = join(PORTS_DIR, String(port));
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      held.add(port);
      if (!exitHookSet) {
        exitHookSet = true;
        process.once('exit', () => {
          for (const p of held) releasePort(p);
        });
      }
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    let owner: number;
    try {
      owner = Number(readFileSync(file, 'utf8'));
    } catch {
      continue; // released meanwhile: try again
    }
    if (pidAlive(owner)) return false;
    try {
      unlinkSync(file); // its process is gone: the reservation is stale
    } catch {
      // another process took it over first; the exclusive create decides
    }
  }
  return false;
}

/** Gives back a reservation {@link freePort} made (a no-op for a port this process does not hold). */
export function releasePort(port: number): void {
  if (!held.delete(port)) return;
  try {
    unlinkSync(join(PORTS_DIR, String(port)));
  } catch {
    // already gone
  }
}

/**
 * A loopback port free now, not in `exclude`, and reserved for this process until
 * {@link releasePort} (or its exit). Picked below the kernel's ephemeral range: a port from that
 * range (what listen(0) gives) can become the local port of any outgoing connection before the
 * listener binds it, and the listener then fails (a pod's sshd did, and its client saw
 * ECONNREFUSED for two minutes). Below the range only another listener can take it, and every
 * test process picks through these reservations. Where the range starts too low to leave room,
 * the kernel's pick (listen(0)) is taken.
 */
export async function freePort(exclude: ReadonlySet<number> = new Set()): Promise<number> {
  const high = Math.min(ephemeralLow(), 65_536);
  for (let tries = 0; high - LISTEN_PORT_LOW > 1_000 && tries < 200; tries++) {
    const port = LISTEN_PORT_LOW + Math.floor(Math.random() * (high - LISTEN_PORT_LOW));
    if (exclude.has(port) || !reservePort(port)) continue;
    if (await canListen(port)) return port;
    releasePort(port);
  }
  return new Promise((resolve, reject) => {
    const server = createTcpServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (!address || typeof address === 'string') reject(new Error('no port'));
        else if (exclude.has(address.port)) freePort(exclude).then(resolve, reject);
        else resolve(address.port);
      });
    });
  });
}

/** The ports an emulator holds for its pods: forgetting one gives its reservation back. */
export class ReservedPorts extends Set<number> {
  override delete(port: number): boolean {
    releasePort(port);
    return super.delete(port);
  }
}
