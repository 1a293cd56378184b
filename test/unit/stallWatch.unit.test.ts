import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { once } from 'node:events';

/**
 * The e2e windows' watch for pauses of the machine (test/e2e/stallWatch.ts): a process stopped by
 * SIGSTOP stands still as every process of a frozen VM does; once continued, its watch has seen
 * the pause and that it used no CPU of its own meanwhile, and a busy loop is told apart.
 */
const MODULE = path.join(__dirname, '..', 'e2e', 'stallWatch.ts');

interface Seen {
  stalls: { durationMs: number; ownCpuMs: number }[];
  ms: number;
  text: string;
}

/** What the child's watch saw, printed as one JSON line. */
const REPORT =
  'console.log(JSON.stringify({ stalls: w.stallsSince(since), ms: w.stalledMsSince(since), text: w.describeStalls(since) }))';

/**
 * Runs `body` in a child process whose watch runs from its start; resolves with what it printed
 * last. `onReady` is called when the child prints `ready`.
 */
async function watchIn(
  body: string,
  onReady?: (proc: ReturnType<typeof spawn>) => void,
): Promise<Seen> {
  const script = `const w = require(${JSON.stringify(MODULE)}); const since = Date.now(); w.watchStalls(); ${body}`;
  const proc = spawn(process.execPath, ['--import', 'tsx', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
    // A child left stopped or waiting would keep mocha alive: it is killed by then whatever else.
    timeout: 20_000,
    killSignal: 'SIGKILL',
  });
  let buffer = '';
  let seen: Seen | undefined;
  proc.stdout.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    let at: number;
    while ((at = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, at);
      buffer = buffer.slice(at + 1);
      if (line === 'ready') onReady?.(proc);
      else seen = JSON.parse(line) as Seen;
    }
  });
  const [code] = (await once(proc, 'exit')) as [number | null];
  assert.equal(code, 0, 'the child ended well');
  assert.ok(seen, 'the child said what it saw');
  return seen;
}

describe('stallWatch: pauses of the machine seen from a test process', function () {
  this.timeout(30_000);
  // The three children run side by side (each mostly waits).
  let stopped: Promise<Seen>;
  let waiting: Promise<Seen>;
  let busy: Promise<Seen>;
  before(function () {
    // Once continued (the test's SIGCONT 3 s after its SIGSTOP), a tick of its watch sees it.
    stopped = watchIn(
      `console.log('ready'); const poll = setInterval(() => { if (w.stallsSince(since).length === 0) return; clearInterval(poll); ${REPORT}; }, 100);`,
      (proc) => {
        proc.kill('SIGSTOP');
        setTimeout(() => proc.kill('SIGCONT'), 3_000);
      },
    );
    waiting = watchIn(`setTimeout(() => { ${REPORT}; }, 1_500);`);
    busy = watchIn(
      // Busy for 2.6 s of wall and at least 0.5 s of its own CPU (on a loaded machine a busy loop
      // gets a fraction of a core: its wall alone says little about its CPU).
      `setTimeout(() => { const end = Date.now() + 2_600; const cpu = process.cpuUsage(); const used = () => { const u = process.cpuUsage(cpu); return (u.user + u.system) / 1000; }; while (Date.now() < end || used() < 500) {} setTimeout(() => { ${REPORT}; }, 600); }, 300);`,
    );
    // Each case awaits its own; none is left unhandled should another case fail first.
    for (const p of [stopped, waiting, busy]) p.catch(() => undefined);
  });

  it('sees a pause of the whole process (SIGSTOP) with no CPU of its own, and counts it', async function () {
    const seen = await stopped;
    assert.equal(seen.stalls.length, 1, JSON.stringify(seen));
    const [stall] = seen.stalls;
    assert.ok(
      stall && stall.durationMs >= 2_500 && stall.durationMs < 10_000,
      JSON.stringify(seen),
    );
    assert.ok(stall.ownCpuMs < 200, `its own CPU while stopped: ${stall.ownCpuMs} ms`);
    assert.ok(seen.ms >= 2_500, JSON.stringify(seen));
    assert.match(seen.text, /machine pauses while it ran: \d+\.\d s at/);
  });

  it('sees no pause in a process that only waits, and says so', async function () {
    const seen = await waiting;
    assert.equal(seen.ms, 0, JSON.stringify(seen));
    assert.match(seen.text, /none over 2 s/);
  });

  it('tells a busy event loop of its own apart: the pause is counted with its CPU', async function () {
    const seen = await busy;
    assert.equal(seen.stalls.length, 1, JSON.stringify(seen));
    assert.ok((seen.stalls[0]?.ownCpuMs ?? 0) >= 450, JSON.stringify(seen));
  });
});
