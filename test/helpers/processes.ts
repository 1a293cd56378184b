/**
 * The machine's processes from /proc, for tests that act on the processes they started (the
 * emulator's pods are processes of the test that runs it): find one, pause it, read its argv.
 */
import * as fs from 'node:fs';

export interface Proc {
  pid: number;
  ppid: number;
  /** The state letter of /proc/<pid>/stat (`Z`: a zombie, `T`: stopped). */
  state: string;
  /** argv joined by spaces. */
  cmdline: string;
}

/** Every process of the machine now (those that end while read are skipped). */
export function processes(): Proc[] {
  const list: Proc[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const cmdline = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ');
      list.push({ pid: Number(name), ppid: Number(rest[1]), state: rest[0] ?? '?', cmdline });
    } catch {
      // Ended meanwhile.
    }
  }
  return list;
}

/** The live (not zombie) descendants of `root` (default: this process), without it. */
export function descendantsOf(root: number = process.pid): Proc[] {
  const all = processes();
  const mine = new Set([root]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const p of all) {
      if (!mine.has(p.pid) && mine.has(p.ppid)) {
        mine.add(p.pid);
        grew = true;
      }
    }
  }
  return all.filter((p) => p.pid !== root && mine.has(p.pid) && p.state !== 'Z');
}

/**
 * Watches this process's descendants until one matches `matches`, stops it (SIGSTOP) for
 * `holdMs`, then lets it go on (SIGCONT): a step that would end too fast on a quick machine
 * lasts at least that long, whatever the machine. Resolves with the pid held, or null when
 * `signal` aborted first; polls every 10 ms.
 */
export async function holdFirst(
  matches: (p: Proc) => boolean,
  holdMs: number,
  signal: AbortSignal,
): Promise<number | null> {
  while (!signal.aborted) {
    const found = descendantsOf().find(matches);
    if (found) {
      try {
        process.kill(found.pid, 'SIGSTOP');
      } catch {
        continue; // ended between the look and the signal: look again
      }
      await new Promise((resolve) => setTimeout(resolve, holdMs));
      try {
        process.kill(found.pid, 'SIGCONT');
      } catch {
        // Killed meanwhile (the test ended it).
      }
      return found.pid;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return null;
}
