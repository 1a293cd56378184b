/**
 * The pod-side watcher's pushes under every installed shell (sh, dash, bash --posix, busybox sh),
 * run for real on a run directory here: a checkpoint look as soon as a checkpoint is saved (and
 * its repeat once settled, so the client sees it finished), a disk sample, the job's end.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { finishedCheckpoint, parseLook } from '../../src/core/pod/checkpointStream';
import { parseSample } from '../../src/core/train/disk';
import {
  PUSH_DISK,
  PUSH_LOOK,
  PUSH_LOOKED,
  PushReader,
  streamCommand,
  type PodPushSink,
} from '../../src/core/train/podWatcher';
import { busybox, busyboxBin } from '../helpers/jobShells';

/** The shells; `applets`: with a PATH of busybox applets only, as on a minimal image. */
const ALL_SHELLS: { name: string; argv: string[]; applets?: boolean }[] = [
  { name: 'sh', argv: ['sh'] },
  { name: 'dash', argv: ['dash'] },
  { name: 'bash --posix', argv: ['bash', '--posix'] },
  { name: 'busybox sh (busybox applets only)', argv: [busybox, 'sh'], applets: true },
];
const SHELLS = ALL_SHELLS.filter(
  ({ argv }) => spawnSync(argv[0] as string, [...argv.slice(1), '-c', 'true']).status === 0,
);

/** Saves a checkpoint the way examples/tiny/train.py does: written aside, renamed into place. */
function saveCheckpoint(runDir: string, step: number): void {
  const temp = path.join(runDir, 'output', `.tmp-${step}`);
  mkdirSync(temp, { recursive: true });
  writeFileSync(path.join(temp, 'model.json'), JSON.stringify({ step, w: [1, 2, 3] }));
  renameSync(temp, path.join(runDir, 'output', `checkpoint-${step}`));
}

describe('the pod-side watcher pushes checkpoints and disk samples (every shell)', function () {
  this.timeout(60_000);
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });

  it('at least sh and one more shell are installed', () => {
    assert.ok(SHELLS.length >= 2, SHELLS.map((s) => s.name).join(', '));
  });

  for (const shell of SHELLS) {
    it(`${shell.name}: a saved checkpoint is pushed at once and seen finished; disk samples; the end`, async () => {
      const runDir = realpathSync(mkdtempSync(path.join(tmpdir(), 'ob-watcher-')));
      cleanups.push(() => rmSync(runDir, { recursive: true, force: true }));
      // The job: a live process group of its own.
      const job = spawn('sleep', ['120'], { detached: true, stdio: 'ignore' });
      cleanups.push(() => job.kill('SIGKILL'));
      writeFileSync(path.join(runDir, 'job.pid'), `${job.pid}\n`);
      writeFileSync(path.join(runDir, 'metrics.jsonl'), '');
      saveCheckpoint(runDir, 5);

      const looks: { text: string; atMs: number }[] = [];
      const disks: string[] = [];
      const sink: PodPushSink = {
        lookMs: 100,
        diskMs: 1_000,
        volumeDir: null,
        look: (text) => looks.push({ text, atMs: Date.now() }),
        disk: (line) => disks.push(line),
        live: () => {},
      };
      const reader = new PushReader(sink);
      const other: string[] = [];
      let env = process.env;
      if (shell.applets === true) {
        const bin = mkdtempSync(path.join(tmpdir(), 'ob-applets-'));
        cleanups.push(() => rmSync(bin, { recursive: true, force: true }));
        env = { ...process.env, PATH: busyboxBin(bin) };
      }
      const watcher: ChildProcess = spawn(
        shell.argv[0] as string,
        [...shell.argv.slice(1), '-c', streamCommand(runDir, 0, 1, sink)],
        { stdio: ['ignore', 'ignore', 'pipe'], env },
      );
      cleanups.push(() => watcher.kill('SIGKILL'));
      let partial = '';
      const changed: (() => void)[] = [];
      watcher.stderr!.on('data', (chunk: Buffer) => {
        const lines = (partial + chunk.toString('utf8')).split('\n');
        partial = lines.pop()!;
        for (const line of lines) if (!reader.line(line)) other.push(line);
        for (const wake of changed.splice(0)) wake();
      });
      const exited = new Promise<number | null>((resolve) => watcher.on('exit', resolve));
      /** Waits until `ok()` holds, re-checked at each push. */
      const until = async (what: string, ok: () => boolean, limitMs = 20_000): Promise<void> => {
        const deadline = Date.now() + limitMs;
        while (!ok()) {
          const left = deadline - Date.now();
          assert.ok(
            left > 0,
            `${shell.name}: ${what}; looks ${JSON.stringify(looks)}; other ${other.join('|')}`,
          );
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, left);
            changed.push(() => {
              clearTimeout(timer);
              resolve();
            });
          });
        }
      };
      /** Whether some look, with the one before it, shows `checkpoint` finished. */
      const finished = (checkpoint: string): boolean =>
        looks.some(
          (look, i) =>
            finishedCheckpoint(
              parseLook(look.text),
              i === 0 ? null : parseLook(looks[i - 1]!.text),
            ) === checkpoint,
        );

      await until('checkpoint-5 seen finished', () => finished('output/checkpoint-5'));
      await until('a disk sample', () => disks.length > 0);
      const sample = parseSample(disks[0]!);
      assert.ok(sample !== null && sample.usedBytes > 0, `a disk sample: ${disks[0]}`);
      assert.ok(sample.checkpointBytes > 0, 'the newest checkpoint’s size is in the sample');

      // Settled: no look pushed while nothing changes.
      const settled = looks.length;
      await until('another disk sample', () => disks.length >= 2, 5_000);
      assert.equal(looks.length, settled, 'nothing pushed while the checkpoints stay the same');

      const savedMs = Date.now();
      saveCheckpoint(runDir, 10);
      await until('checkpoint-10 seen finished', () => finished('output/checkpoint-10'));
      const firstSeen = looks.find((l) =>
        parseLook(l.text).checkpoints.has('output/checkpoint-10'),
      )!;
      // A tick is 0.1 s (1 s under a shell without fractional sleep), the look every tick.
      assert.ok(
        firstSeen.atMs - savedMs < 3_000,
        `pushed ${firstSeen.atMs - savedMs} ms after the save`,
      );

      writeFileSync(path.join(runDir, 'exit_code'), '0\n');
      assert.equal(await exited, 0);
      assert.deepEqual(reader.ended, { kind: 'exited', code: 0 });
      assert.deepEqual(other, [], 'nothing on stderr but pushes');
      assert.ok(PUSH_LOOK.endsWith(' ') && PUSH_DISK.endsWith(' ') && PUSH_LOOKED.length > 0);
    });
  }
});
