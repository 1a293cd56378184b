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

/** A process's pid, parent and state from /proc/<pid>/stat; undefined once it ended. */
function statOf(name: string): Omit<Proc, 'cmdline'> | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { pid: Number(name), ppid: Number(rest[1]), state: rest[0] ?? '?' };
  } catch {
    return undefined; // Ended meanwhile.
  }
}

/** `p` with its argv, or undefined once it ended. */
function withCmdline(p: Omit<Proc, 'cmdline'>): Proc | undefined {
  try {
    const cmdline = fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').split('\0').join(' ');
    return { ...p, cmdline };
  } catch {
    return undefined; // Ended meanwhile.
  }
}

/** Every process of the machine now (those that end while read are skipped). */
export function processes(): Proc[] {
  const list: Proc[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = statOf(name);
    const proc = stat && withCmdline(stat);
    if (proc) list.push(proc);
  }
  return list;
}

/** The children of every thread of process `pid` (none once it ended). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  let tasks: string[];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out; // Ended meanwhile.
  }
  for (const tid of tasks) {
    try {
      const list = fs.readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (list !== '') out.push(...list.split(' ').map(Number));
    } catch {
      // That thread ended meanwhile.
    }
  }
  return out;
}

/**
 * The live (not zombie) descendants of `root` (default: this process), without it: walked down
 * from `root` by the kernel's lists of each thread's children, so that only the tree is read,
 * not the machine's hundreds of other processes (holdFirst looks every 10 ms).
 */
export function descendantsOf(root: number = process.pid): Proc[] {
  const seen = new Set([root]);
  const queue = [root];
  const out: Proc[] = [];
  for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
    for (const child of childrenOf(pid)) {
      if (seen.has(child)) continue;
      seen.add(child);
      queue.push(child);
      const stat = statOf(String(child));
      const proc = stat && stat.state !== 'Z' ? withCmdline(stat) : undefined;
      if (proc) out.push(proc);
    }
  }
  return out;
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
