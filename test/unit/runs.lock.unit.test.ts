import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { LOCK_FILE, RunStore } from '../../src/core/runs';
import { FakeClock } from '../helpers/fakeClock';

const REPO = path.resolve(__dirname, '../..');
const TIMING = { heartbeatMs: 30_000, staleMs: 120_000 };

/** Writes a lock file as another holder would, with its heartbeat `ageMs` old on `clock`. */
function plantLock(
  runDir: string,
  clockMs: number,
  holder: { pid: number; hostname: string; owner?: string },
  ageMs: number,
): void {
  const file = path.join(runDir, LOCK_FILE);
  fs.writeFileSync(
    file,
    JSON.stringify({
      ...holder,
      owner: holder.owner ?? 'planted',
      token: 'planted-token',
      acquired_at: 'x',
    }),
  );
  const s = (clockMs - ageMs) / 1000;
  fs.utimesSync(file, s, s);
}

/** A pid that is certainly dead: a process that already exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(child.stdout.toString());
}

describe('runs: per-run lock', () => {
  let dir: string;
  let clock: FakeClock;
  let store: RunStore;
  let runDir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-lock-'));
    clock = new FakeClock();
    store = new RunStore(path.join(dir, 'runs'), clock, { lock: TIMING });
    runDir = store.runDir('r1');
    fs.mkdirSync(runDir, { recursive: true });
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('one holder at a time; released on dispose', () => {
    const lock = store.lock('r1', 'window A');
    assert.ok(lock);
    assert.equal(lock.isHeld(), true);
    assert.equal(store.lock('r1', 'window B'), null);
    const holder = store.lockHolder('r1');
    assert.deepEqual(
      { pid: holder?.pid, hostname: holder?.hostname, owner: holder?.owner, stale: holder?.stale },
      { pid: process.pid, hostname: os.hostname(), owner: 'window A', stale: null },
    );
    assert.equal(holder?.acquiredAt, '2026-09-29T12:00:00Z');
    assert.equal(fs.statSync(path.join(runDir, LOCK_FILE)).mode & 0o777, 0o600);
    lock.dispose();
    assert.equal(lock.isHeld(), false);
    assert.equal(fs.existsSync(path.join(runDir, LOCK_FILE)), false);
    assert.equal(store.lockHolder('r1'), null);
    lock.dispose(); // twice is harmless
    const again = store.lock('r1', 'window B');
    assert.ok(again);
    again.dispose();
    assert.equal(clock.pending, 0);
  });

  it('the heartbeat keeps a held lock fresh through the clock', async () => {
    const lock = store.lock('r1', 'window A');
    assert.ok(lock);
    await clock.advanceMs(10 * 60_000);
    const holder = store.lockHolder('r1');
    assert.ok(
      holder && holder.heartbeatAgeMs <= TIMING.heartbeatMs,
      `heartbeat ${holder?.heartbeatAgeMs}`,
    );
    assert.equal(holder.stale, null);
    assert.equal(store.lock('r1', 'window B'), null);
    lock.dispose();
    assert.equal(clock.pending, 0);
  });

  it('a holder on another host counts until its heartbeat is older than the limit', () => {
    plantLock(runDir, clock.nowMs(), { pid: 1, hostname: 'elsewhere' }, TIMING.staleMs - 1000);
    assert.equal(store.lock('r1', 'me'), null);
    assert.equal(store.lockHolder('r1')?.stale, null);
    plantLock(runDir, clock.nowMs(), { pid: 1, hostname: 'elsewhere' }, TIMING.staleMs + 1000);
    assert.equal(store.lockHolder('r1')?.stale, 'old_heartbeat');
    const lock = store.lock('r1', 'me');
    assert.ok(lock);
    assert.equal(store.lockHolder('r1')?.owner, 'me');
    assert.equal(fs.existsSync(path.join(runDir, '.lock.takeover')), false);
    lock.dispose();
  });

  it('a dead pid on this host frees the run at once', () => {
    plantLock(runDir, clock.nowMs(), { pid: deadPid(), hostname: os.hostname() }, 0);
    assert.equal(store.lockHolder('r1')?.stale, 'dead_pid');
    const lock = store.lock('r1', 'me');
    assert.ok(lock);
    lock.dispose();
  });

  it('a live pid with an old heartbeat is stale too (a frozen holder or a recycled pid)', () => {
    plantLock(
      runDir,
      clock.nowMs(),
      { pid: process.ppid, hostname: os.hostname() },
      TIMING.staleMs + 1,
    );
    assert.equal(store.lockHolder('r1')?.stale, 'old_heartbeat');
    const lock = store.lock('r1', 'me');
    assert.ok(lock);
    lock.dispose();
  });

  it('an unreadable lock counts while fresh (being written) and is taken over once old', () => {
    const file = path.join(runDir, LOCK_FILE);
    fs.writeFileSync(file, '');
    const s = clock.nowMs() / 1000;
    fs.utimesSync(file, s, s);
    assert.equal(store.lock('r1', 'me'), null);
    const old = (clock.nowMs() - TIMING.staleMs - 1) / 1000;
    fs.utimesSync(file, old, old);
    assert.equal(store.lockHolder('r1')?.stale, 'unreadable');
    const lock = store.lock('r1', 'me');
    assert.ok(lock);
    lock.dispose();
  });

  it('backs off while another process is taking over, unless that takeover is abandoned', () => {
    plantLock(runDir, clock.nowMs(), { pid: 1, hostname: 'elsewhere' }, TIMING.staleMs + 1000);
    const takeover = path.join(runDir, '.lock.takeover');
    fs.writeFileSync(takeover, '');
    const s = clock.nowMs() / 1000;
    fs.utimesSync(takeover, s, s);
    assert.equal(store.lock('r1', 'me'), null);
    const old = (clock.nowMs() - TIMING.staleMs - 1) / 1000;
    fs.utimesSync(takeover, old, old);
    const lock = store.lock('r1', 'me');
    assert.ok(lock);
    assert.equal(fs.existsSync(takeover), false);
    lock.dispose();
  });

  it('a holder that stalled past the limit and was taken over knows it, and never removes the new lock', async () => {
    const lock = store.lock('r1', 'frozen');
    assert.ok(lock);
    // Another process took the run over (its own token) while this one stalled.
    plantLock(runDir, clock.nowMs(), { pid: 1, hostname: 'elsewhere', owner: 'new holder' }, 0);
    assert.equal(lock.isHeld(), false);
    await clock.advanceMs(TIMING.heartbeatMs);
    assert.equal(clock.pending, 0); // the heartbeat stopped
    lock.dispose();
    assert.equal(store.lockHolder('r1')?.owner, 'new holder');
  });
});

/** A child process running the store against `runsDir` with the real clock. */
function startChild(
  dir: string,
  args: string[],
): { child: ChildProcessWithoutNullStreams; line: () => Promise<string> } {
  const script = path.join(dir, 'locker.ts');
  if (!fs.existsSync(script)) {
    fs.writeFileSync(
      script,
      `import { RunStore } from ${JSON.stringify(path.join(REPO, 'src/core/runs/index.ts'))};
import { systemClock } from ${JSON.stringify(path.join(REPO, 'src/core/clock.ts'))};
const [runsDir, runId, owner, goAt] = process.argv.slice(2) as [string, string, string, string];
const store = new RunStore(runsDir, systemClock, { lock: { heartbeatMs: 100, staleMs: 5_000 } });
process.stdout.write('started\\n');
while (Date.now() < Number(goAt)) { /* start together */ }
const lock = store.lock(runId, owner);
process.stdout.write(lock ? 'locked\\n' : 'busy\\n');
process.stdin.on('data', () => undefined);
process.stdin.on('end', () => { lock?.dispose(); process.exit(0); });
`,
    );
  }
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
    cwd: REPO,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  createInterface({ input: child.stdout }).on('line', (line) => {
    const next = waiting.shift();
    if (next) next(line);
    else lines.push(line);
  });
  const line = (): Promise<string> => {
    const ready = lines.shift();
    if (ready !== undefined) return Promise.resolve(ready);
    return new Promise((resolve, reject) => {
      waiting.push(resolve);
      child.once('exit', (code) => reject(new Error(`child exited ${code}: ${stderr}`)));
    });
  };
  return { child, line };
}

async function exited(child: ChildProcessWithoutNullStreams): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise((resolve) => child.once('exit', resolve));
}

describe('runs: lock contention across real processes', function () {
  this.timeout(30_000);
  let dir: string;
  let store: RunStore;
  const children: ChildProcessWithoutNullStreams[] = [];
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-lockp-'));
    store = new RunStore(path.join(dir, 'runs'), {
      nowMs: () => Date.now(),
      sleep: () => new Promise(() => undefined),
    });
    fs.mkdirSync(store.runDir('r1'), { recursive: true });
  });
  afterEach(async () => {
    for (const child of children.splice(0)) {
      child.kill('SIGKILL');
      await exited(child);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a run held by another process is refused; freed when that process dies or releases it', async () => {
    const holder = startChild(dir, [store.runsDir, 'r1', 'other window', '0']);
    children.push(holder.child);
    assert.equal(await holder.line(), 'started');
    assert.equal(await holder.line(), 'locked');
    assert.equal(store.lock('r1', 'this window'), null);
    assert.equal(store.lockHolder('r1')?.owner, 'other window');
    assert.equal(store.lockHolder('r1')?.pid, holder.child.pid);

    holder.child.kill('SIGKILL');
    await exited(holder.child);
    assert.equal(store.lockHolder('r1')?.stale, 'dead_pid');
    const mine = store.lock('r1', 'this window');
    assert.ok(mine);
    mine.dispose();

    const polite = startChild(dir, [store.runsDir, 'r1', 'cli', '0']);
    children.push(polite.child);
    await polite.line();
    assert.equal(await polite.line(), 'locked');
    polite.child.stdin.end();
    await exited(polite.child);
    assert.equal(store.lockHolder('r1'), null);
  });

  it('processes racing for a stale lock: exactly one wins', async () => {
    fs.writeFileSync(
      path.join(store.runDir('r1'), LOCK_FILE),
      JSON.stringify({
        pid: 1,
        hostname: 'elsewhere',
        owner: 'gone',
        token: 't',
        acquired_at: 'x',
      }),
    );
    const old = (Date.now() - 60_000) / 1000;
    fs.utimesSync(path.join(store.runDir('r1'), LOCK_FILE), old, old);
    const goAt = Date.now() + 3000;
    const racers = [0, 1, 2].map((n) =>
      startChild(dir, [store.runsDir, 'r1', `racer ${n}`, String(goAt)]),
    );
    children.push(...racers.map((r) => r.child));
    for (const racer of racers) assert.equal(await racer.line(), 'started');
    const results = await Promise.all(racers.map((racer) => racer.line()));
    assert.deepEqual(results.filter((r) => r === 'locked').length, 1, results.join(','));
    const winner = racers[results.indexOf('locked')];
    assert.equal(store.lockHolder('r1')?.pid, winner?.child.pid);
    assert.equal(fs.existsSync(path.join(store.runDir('r1'), '.lock.takeover')), false);
  });
});
