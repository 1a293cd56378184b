/**
 * One process at a time per run: two VS Code windows, or a window and the
 * CLI, must never follow, cancel or delete the same run's pod at once.
 *
 * The lock is a file created with O_EXCL in the run directory (`.lock`),
 * holding the holder's pid, host name, owner label and a random token; the
 * holder refreshes its mtime (the heartbeat) through the Clock. A lock is
 * stale when its pid is dead on this host, or its heartbeat is older than
 * `staleMs` (a holder on another machine, a frozen process, a recycled pid).
 * A stale lock is taken over under a second O_EXCL file (`.lock.takeover`)
 * after checking it is still the same stale lock, so two processes never both
 * remove it and both believe they hold the run.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { rfc3339, type Clock } from '../clock';
import type { Disposable } from '../disposable';
import { ioError } from './runsError';

export const LOCK_FILE = '.lock';
export const TAKEOVER_FILE = '.lock.takeover';

export interface LockTiming {
  /** How often the holder refreshes the lock's mtime. */
  heartbeatMs: number;
  /** A lock whose mtime is older than this is stale, whoever holds it. */
  staleMs: number;
}

export const DEFAULT_LOCK_TIMING: Readonly<LockTiming> = Object.freeze({
  heartbeatMs: 30_000,
  staleMs: 120_000,
});

/** Who holds a run's lock, as its file says. */
export interface LockHolder {
  pid: number | null;
  hostname: string | null;
  owner: string | null;
  acquiredAt: string | null;
  heartbeatAgeMs: number;
  /** Why the lock no longer counts, or null when its holder is live. */
  stale: 'dead_pid' | 'old_heartbeat' | 'unreadable' | null;
}

interface LockContent {
  pid: number;
  hostname: string;
  owner: string;
  token: string;
  acquired_at: string;
}

function readLock(file: string): { content: LockContent | null; stat: fs.Stats } | null {
  let stat: fs.Stats;
  let text: string;
  try {
    stat = fs.statSync(file);
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  try {
    const parsed = JSON.parse(text) as Partial<LockContent>;
    if (
      typeof parsed.pid === 'number' &&
      typeof parsed.hostname === 'string' &&
      typeof parsed.token === 'string'
    ) {
      return {
        content: {
          pid: parsed.pid,
          hostname: parsed.hostname,
          owner: typeof parsed.owner === 'string' ? parsed.owner : '',
          token: parsed.token,
          acquired_at: typeof parsed.acquired_at === 'string' ? parsed.acquired_at : '',
        },
        stat,
      };
    }
  } catch {
    // Being written right now, or damaged: judged by its age below.
  }
  return { content: null, stat };
}

/** Whether process `pid` of this machine exists (a lock's holder, a port's reserver). */
export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, owned by another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function judge(
  read: { content: LockContent | null; stat: fs.Stats },
  clock: Clock,
  timing: LockTiming,
): LockHolder {
  const heartbeatAgeMs = Math.max(0, clock.nowMs() - read.stat.mtimeMs);
  const old = heartbeatAgeMs > timing.staleMs;
  const content = read.content;
  let stale: LockHolder['stale'] = null;
  if (content === null) stale = old ? 'unreadable' : null;
  else if (content.hostname === os.hostname() && !pidAlive(content.pid)) stale = 'dead_pid';
  else if (old) stale = 'old_heartbeat';
  return {
    pid: content?.pid ?? null,
    hostname: content?.hostname ?? null,
    owner: content?.owner ?? null,
    acquiredAt: content?.acquired_at ?? null,
    heartbeatAgeMs,
    stale,
  };
}

/** The identity of a lock file: a new lock is a new file with a new token. */
function identity(read: { content: LockContent | null; stat: fs.Stats }): string {
  return `${read.stat.ino}:${read.content?.token ?? `mtime ${read.stat.mtimeMs}`}`;
}

/** Who holds the lock at `file`, or null when nobody does. */
export function inspectLock(file: string, clock: Clock, timing: LockTiming): LockHolder | null {
  const read = readLock(file);
  return read ? judge(read, clock, timing) : null;
}

/** A held run lock. Dispose it to release the run; it is released only if still ours. */
export class RunLock implements Disposable {
  private disposed = false;
  private lost = false;
  private readonly stop = new AbortController();

  constructor(
    readonly runId: string,
    readonly owner: string,
    readonly file: string,
    private readonly token: string,
    private readonly clock: Clock,
    heartbeatMs: number,
  ) {
    void this.beat(heartbeatMs);
  }

  private async beat(heartbeatMs: number): Promise<void> {
    try {
      while (!this.disposed) {
        await this.clock.sleep(heartbeatMs, this.stop.signal);
        if (this.disposed) return;
        if (!this.touch()) {
          // Taken over after a stall longer than the stale limit: someone else has the run now.
          this.lost = true;
          return;
        }
      }
    } catch {
      // Aborted by dispose.
    }
  }

  private touch(): boolean {
    if (readLock(this.file)?.content?.token !== this.token) return false;
    const nowS = this.clock.nowMs() / 1000;
    try {
      fs.utimesSync(this.file, nowS, nowS);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Whether this process still holds the run: not released, and the file is
   * still ours. Check it before an irreversible step (deleting a pod).
   */
  isHeld(): boolean {
    if (this.disposed || this.lost) return false;
    return readLock(this.file)?.content?.token === this.token;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.stop.abort();
    if (readLock(this.file)?.content?.token === this.token) {
      try {
        fs.unlinkSync(this.file);
      } catch {
        // Already gone; the next taker finds no lock.
      }
    }
  }
}

/**
 * Takes the lock at `file` for `owner`, or returns null when a live process
 * holds it. A stale lock is taken over. Throws a `RunsError` `io` when the
 * directory cannot be written.
 */
export function acquireLock(
  file: string,
  runId: string,
  owner: string,
  clock: Clock,
  timing: LockTiming,
): RunLock | null {
  for (let round = 0; round < 3; round++) {
    const token = randomBytes(16).toString('hex');
    const content: LockContent = {
      pid: process.pid,
      hostname: os.hostname(),
      owner,
      token,
      acquired_at: rfc3339(clock.nowMs()),
    };
    let fd: number;
    try {
      fd = fs.openSync(file, 'wx', 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw ioError(file, error, 'create');
      const read = readLock(file);
      if (read === null) continue; // released meanwhile: try again
      if (judge(read, clock, timing).stale === null) return null;
      if (!takeOver(file, identity(read), clock, timing)) return null;
      continue;
    }
    try {
      try {
        fs.writeFileSync(fd, `${JSON.stringify(content)}\n`);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      const nowS = clock.nowMs() / 1000;
      fs.utimesSync(file, nowS, nowS);
    } catch (error) {
      // A half-written lock would block the run until it went stale: remove it.
      try {
        fs.unlinkSync(file);
      } catch {
        // Nothing left to remove.
      }
      throw ioError(file, error, 'write');
    }
    return new RunLock(runId, owner, file, token, clock, timing.heartbeatMs);
  }
  return null;
}

/**
 * Removes the stale lock `staleIdentity` at `file`, under the takeover file so
 * only one process does it; false when another process is taking over, or the
 * lock changed since it was judged stale.
 */
function takeOver(file: string, staleIdentity: string, clock: Clock, timing: LockTiming): boolean {
  const takeover = path.join(path.dirname(file), TAKEOVER_FILE);
  let fd: number | null = null;
  for (let round = 0; round < 2 && fd === null; round++) {
    try {
      fd = fs.openSync(takeover, 'wx', 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return false;
      // A takeover file outlives its process only after a crash in these few lines.
      try {
        const age = clock.nowMs() - fs.statSync(takeover).mtimeMs;
        if (age <= timing.staleMs) return false;
        fs.unlinkSync(takeover);
      } catch {
        return false;
      }
    }
  }
  if (fd === null) return false;
  fs.closeSync(fd);
  const nowS = clock.nowMs() / 1000;
  try {
    fs.utimesSync(takeover, nowS, nowS);
    const again = readLock(file);
    if (again === null) return true;
    if (identity(again) !== staleIdentity) return false;
    fs.unlinkSync(file);
    return true;
  } catch {
    return false;
  } finally {
    try {
      fs.unlinkSync(takeover);
    } catch {
      // Removed by a process that judged it stale; nothing to undo.
    }
  }
}
