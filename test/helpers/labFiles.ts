/**
 * Reading what a lab left on disk: JSON files, the files under a directory, and the processes
 * whose mounts show they belonged to a pod (re-exported by ./lifecycle.ts).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

export function readJson(file: string): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
}

/**
 * This process's mount namespace, and whether its own mount table mentions `marker`. A process in
 * the same namespace has the same table (a chroot only shows less of it), so when ours does not
 * mention the marker, only the processes of other namespaces need their table read: the scan
 * reads a link per process instead of a table (on a loaded CI machine, hundreds of processes in
 * the host's namespace: 57 ms of CPU a scan with 179 processes, once per lab).
 */
function ownMounts(marker: string): { ns: string | null; mentions: boolean } {
  try {
    return {
      ns: fs.readlinkSync('/proc/self/ns/mnt'),
      mentions: fs.readFileSync('/proc/self/mountinfo', 'utf8').includes(marker),
    };
  } catch {
    return { ns: null, mentions: true };
  }
}

/** Whether process `entry` is in mount namespace `ns` (false when that cannot be read). */
function inNamespace(entry: string, ns: string | null): boolean {
  try {
    return fs.readlinkSync(`/proc/${entry}/ns/mnt`) === ns;
  } catch {
    return false;
  }
}

/**
 * Processes (pid and name) whose mount table mentions `marker` (the emulator's state directory):
 * a pod's processes see its directories bind-mounted from there, so any survivor shows up,
 * whatever it is called (sshd, the watchdog, the job).
 */
export async function processesMounting(marker: string): Promise<string[]> {
  // Read one process at a time with the event loop free between them: a loaded machine has
  // hundreds of processes with long mount tables (every pod's), and the labs sharing this
  // process (their emulators answer pods from it) must not stall meanwhile.
  const own = ownMounts(marker);
  const found: string[] = [];
  for (const entry of await fs.promises.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    // A link read at once (a few microseconds; a promise each cost more than the read).
    if (!own.mentions && inNamespace(entry, own.ns)) continue;
    try {
      const mounts = await fs.promises.readFile(`/proc/${entry}/mountinfo`, 'utf8');
      if (!mounts.includes(marker)) continue;
      const name = (await fs.promises.readFile(`/proc/${entry}/comm`, 'utf8')).trim();
      found.push(`${entry} (${name})`);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}

/**
 * {@link processesMounting} at once, blocking the event loop: what a live pod runs at the moment
 * of an event, before this process (its client, its emulator) can end the pod. On a loaded
 * machine the scan that yields between processes reached a tiny run's sshd only after its pod was
 * deleted.
 */
export function processesMountingNow(marker: string): string[] {
  const own = ownMounts(marker);
  const found: string[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    if (!own.mentions && inNamespace(entry, own.ns)) continue;
    try {
      if (!fs.readFileSync(`/proc/${entry}/mountinfo`, 'utf8').includes(marker)) continue;
      found.push(`${entry} (${fs.readFileSync(`/proc/${entry}/comm`, 'utf8').trim()})`);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}

/** Files under `dir` (relative paths, sorted), listed without blocking the event loop. */
export async function filePathsUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    for (const entry of await fs.promises.readdir(path.join(dir, rel), { withFileTypes: true })) {
      const child = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) await walk(child);
      else if (entry.isFile()) out.push(child);
    }
  };
  if (fs.existsSync(dir)) await walk('');
  return out.sort();
}

/**
 * Which of `needles` (latin1 strings) occur in `file`, read 1 MiB at a time (a pod's results can
 * be hundreds of MiB: read whole, synchronously, they stalled every lab of the process).
 */
export async function needlesIn(file: string, needles: readonly string[]): Promise<Set<string>> {
  const found = new Set<string>();
  const raw = needles.map((n) => Buffer.from(n, 'latin1'));
  const overlap = Math.max(0, ...raw.map((n) => n.length)) - 1;
  let tail = Buffer.alloc(0);
  for await (const chunk of fs.createReadStream(file, { highWaterMark: 1024 * 1024 })) {
    const data = tail.length > 0 ? Buffer.concat([tail, chunk as Buffer]) : (chunk as Buffer);
    raw.forEach((needle, i) => {
      if (data.includes(needle)) found.add(needles[i]!);
    });
    tail = overlap > 0 ? Buffer.from(data.subarray(Math.max(0, data.length - overlap))) : tail;
  }
  return found;
}

/** Files under `dir` (relative paths, sorted), with their contents. */
export function filesUnder(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const walk = (rel: string): void => {
    for (const entry of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const child = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) walk(child);
      else if (entry.isFile()) out.set(child, fs.readFileSync(path.join(dir, child)));
    }
  };
  if (fs.existsSync(dir)) walk('');
  return new Map([...out.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
}
