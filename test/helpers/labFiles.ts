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
 * Processes (pid and name) whose mount table mentions `marker` (the emulator's state directory):
 * a pod's processes see its directories bind-mounted from there, so any survivor shows up,
 * whatever it is called (sshd, the watchdog, the job).
 */
export function processesMounting(marker: string): string[] {
  const found: string[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const mounts = fs.readFileSync(`/proc/${entry}/mountinfo`, 'utf8');
      if (!mounts.includes(marker)) continue;
      const name = fs.readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      found.push(`${entry} (${name})`);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
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
