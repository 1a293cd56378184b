/**
 * The pod side's batcher of the metrics stream (src/core/train/podBatch.ts), run for real under
 * python3 with a real GNU tail: what it hands on is the file's bytes, whole and in order; lines
 * that come within its wait leave in one write; held lines are written when it is stopped, and
 * its tail goes with it; a failed tail is its exit 3; and the watcher runs it where python3 does.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { batchCommand, POD_BATCH_MS } from '../../src/core/train/podBatch';
import { streamCommand } from '../../src/core/train/podWatcher';
import { realPython } from '../helpers/jobShells';

/** A PATH where `python3` is the real interpreter (a pyenv shim would cost a second per start). */
function pythonPath(): string {
  const python = realPython();
  assert.ok(python !== null, 'python3 runs');
  return `${path.dirname(python)}:${process.env.PATH ?? ''}`;
}

interface Run {
  proc: ChildProcess;
  /** The stdout chunks as they came (one per write on the other side, or fewer). */
  writes: Buffer[];
  text(): string;
  /** Waits until `ok()` holds, re-checked at each chunk, at most `limitMs`. */
  until(what: string, ok: () => boolean, limitMs?: number): Promise<void>;
  exited: Promise<number | null>;
  /** Resolves once every holder of its stderr closed it (the tail included). */
  stderrClosed: Promise<void>;
}

function run(script: string, env: NodeJS.ProcessEnv): Run {
  const proc = spawn('sh', ['-c', script], { stdio: ['ignore', 'pipe', 'pipe'], env });
  const writes: Buffer[] = [];
  const changed: (() => void)[] = [];
  proc.stdout!.on('data', (chunk: Buffer) => {
    writes.push(chunk);
    for (const wake of changed.splice(0)) wake();
  });
  let stderr = '';
  proc.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const stderrClosed = new Promise<void>((resolve) => proc.stderr!.on('close', resolve));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve));
  const text = (): string => Buffer.concat(writes).toString('utf8');
  return {
    proc,
    writes,
    text,
    exited,
    stderrClosed,
    async until(what, ok, limitMs = 20_000) {
      const deadline = Date.now() + limitMs;
      while (!ok()) {
        const left = deadline - Date.now();
        assert.ok(left > 0, `${what}; got ${JSON.stringify(text())}; stderr ${stderr}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          changed.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
  };
}

describe('the pod-side batcher of the metrics stream', function () {
  this.timeout(60_000);
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });
  let dir = '';
  let env: NodeJS.ProcessEnv = {};
  beforeEach(() => {
    dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ob-batch-')));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    env = { ...process.env, PATH: pythonPath() };
  });
  const start = (file: string, waitMs: number, from = 1): Run => {
    const r = run(`exec ${batchCommand(`tail -c +${from} -s 0.2 -F ${file}`, waitMs)}`, env);
    cleanups.push(() => r.proc.kill('SIGKILL'));
    return r;
  };

  it('hands on the bytes from the offset, whole and in order; lines within its wait in one write', async () => {
    const file = path.join(dir, 'metrics.jsonl');
    writeFileSync(file, 'skipped\n');
    const r = start(file, POD_BATCH_MS, 9);
    const lines = Array.from({ length: 10 }, (_, i) => `{"step": ${i}}\n`);
    // 10 lines 20 ms apart: 180 ms from the first to the last, within one wait of 200 ms.
    for (const line of lines) {
      appendFileSync(file, line);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await r.until('every line', () => r.text() === lines.join(''));
    assert.ok(
      r.writes.length < lines.length / 2,
      `10 lines within 180 ms came in ${r.writes.length} writes (without the batcher: 10)`,
    );
    const more = '{"step": 10}\n'.repeat(5_000); // 65 KB at once: sent without the wait
    appendFileSync(file, more);
    await r.until('the burst', () => r.text().length === lines.join('').length + more.length);
    r.proc.kill('SIGTERM');
    assert.equal(await r.exited, 0, 'stopped, not failed');
  });

  it('writes what it holds when stopped, and its tail goes with it', async () => {
    const file = path.join(dir, 'metrics.jsonl');
    writeFileSync(file, '');
    const r = start(file, 10_000); // held 10 s unless stopped
    // The tail is reading once an earlier line came through (a 64-KiB burst, sent at once).
    const burst = 'x'.repeat(65_535) + '\n';
    appendFileSync(file, burst);
    await r.until('the burst', () => r.text() === burst);
    appendFileSync(file, 'held\n');
    // Held: nothing more comes within twice the default wait.
    await new Promise((resolve) => setTimeout(resolve, 2 * POD_BATCH_MS));
    assert.equal(r.text(), burst);
    r.proc.kill('SIGTERM');
    await r.until('the held line', () => r.text() === `${burst}held\n`);
    assert.equal(await r.exited, 0);
    await r.stderrClosed; // the tail (which shares its stderr) is gone too
  });

  it('exits 3 when its tail fails', async () => {
    const r = run(`exec ${batchCommand(`tail -c +1 ${path.join(dir, 'absent')}`)}`, env);
    cleanups.push(() => r.proc.kill('SIGKILL'));
    assert.equal(await r.exited, 3);
  });

  it('the watcher sends a trainer’s lines through it where python3 runs', async () => {
    const job = spawn('sleep', ['120'], { detached: true, stdio: 'ignore' });
    cleanups.push(() => job.kill('SIGKILL'));
    writeFileSync(path.join(dir, 'job.pid'), `${job.pid}\n`);
    const file = path.join(dir, 'metrics.jsonl');
    writeFileSync(file, '');
    const r = run(streamCommand(dir, 0, 1), env);
    cleanups.push(() => r.proc.kill('SIGKILL'));
    const lines = Array.from({ length: 10 }, (_, i) => `{"step": ${i}}\n`);
    for (const line of lines) {
      appendFileSync(file, line);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await r.until('every line', () => r.text() === lines.join(''));
    // The tail runs under the batcher, a child of the watcher's shell.
    const children = spawnSync('ps', ['--ppid', String(r.proc.pid), '-o', 'args='], {
      encoding: 'utf8',
    }).stdout;
    assert.match(children, /^python3 -c .*wait_s/m, `the watcher's children: ${children}`);
    assert.ok(r.writes.length < lines.length / 2, `${r.writes.length} writes for 10 lines`);
    appendFileSync(file, 'last\n');
    writeFileSync(path.join(dir, 'exit_code'), '0\n');
    // The job's end: the watcher stops the batcher, which writes what it held first.
    await r.until('the last line', () => r.text().endsWith('last\n'));
    assert.equal(await r.exited, 0);
  });
});
