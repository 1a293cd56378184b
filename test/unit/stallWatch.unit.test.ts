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

/** A child that watches, says "ready", then after `afterMs` prints what it saw and ends. */
function child(script: string): ReturnType<typeof spawn> {
  return spawn(process.execPath, ['--import', 'tsx', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
    // A child left stopped or waiting would keep mocha alive: it is killed by then whatever else.
    timeout: 20_000,
    killSignal: 'SIGKILL',
  });
}

async function lines(
  proc: ReturnType<typeof spawn>,
  onLine: (line: string) => void,
): Promise<void> {
  let buffer = '';
  proc.stdout?.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    let at: number;
    while ((at = buffer.indexOf('\n')) >= 0) {
      onLine(buffer.slice(0, at));
      buffer = buffer.slice(at + 1);
    }
  });
  const [code] = (await once(proc, 'exit')) as [number | null];
  assert.equal(code, 0, 'the child ended well');
}

describe('stallWatch: pauses of the machine seen from a test process', function () {
  this.timeout(30_000);

  it('sees a pause of the whole process (SIGSTOP) with no CPU of its own, and counts it', async function () {
    const proc = child(`
      const w = require(${JSON.stringify(MODULE)});
      const since = Date.now();
      w.watchStalls();
      console.log('ready');
      // Once continued (the test's SIGCONT after its SIGSTOP), a tick of the watch sees the pause.
      const poll = setInterval(() => {
        if (w.stallsSince(since).length === 0) return;
        clearInterval(poll);
        console.log(JSON.stringify({ stalls: w.stallsSince(since), ms: w.stalledMsSince(since), text: w.describeStalls(since) }));
      }, 100);
    `);
    let seen:
      { stalls: { durationMs: number; ownCpuMs: number }[]; ms: number; text: string } | undefined;
    await lines(proc, (line) => {
      if (line === 'ready') {
        proc.kill('SIGSTOP');
        setTimeout(() => proc.kill('SIGCONT'), 3_000);
      } else seen = JSON.parse(line) as typeof seen;
    });
    assert.ok(seen, 'the child said what it saw');
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
    const proc = child(`
      const w = require(${JSON.stringify(MODULE)});
      const since = Date.now();
      w.watchStalls();
      setTimeout(() => {
        console.log(JSON.stringify({ ms: w.stalledMsSince(since), text: w.describeStalls(since) }));
        process.exit(0);
      }, 1_500);
    `);
    let seen: { ms: number; text: string } | undefined;
    await lines(proc, (line) => {
      seen = JSON.parse(line) as typeof seen;
    });
    assert.equal(seen?.ms, 0);
    assert.match(seen?.text ?? '', /none over 2 s/);
  });

  it('tells a busy event loop of its own apart: the pause is counted with its CPU', async function () {
    const proc = child(`
      const w = require(${JSON.stringify(MODULE)});
      const since = Date.now();
      w.watchStalls();
      setTimeout(() => {
        const end = Date.now() + 2_600;
        while (Date.now() < end) {}
        setTimeout(() => {
          console.log(JSON.stringify({ stalls: w.stallsSince(since) }));
          process.exit(0);
        }, 600);
      }, 300);
    `);
    let seen: { stalls: { durationMs: number; ownCpuMs: number }[] } | undefined;
    await lines(proc, (line) => {
      seen = JSON.parse(line) as typeof seen;
    });
    assert.equal(seen?.stalls.length, 1, JSON.stringify(seen));
    assert.ok((seen?.stalls[0]?.ownCpuMs ?? 0) > 300, JSON.stringify(seen));
  });
});
