/**
 * `overbrainer train` as a terminal user sees it: the built CLI (dist/cli.js) under a real
 * pseudo-terminal (`script` from util-linux) against the Runpod emulator, whose pods run the real
 * bootstrap and sshd. On a terminal the boot log's last lines are redrawn in place while the pod
 * provisions, dimmed unless NO_COLOR is set; without a terminal (or with TERM=dumb) they are plain
 * lines. A long upload shows one progress line redrawn in place, then its final line.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startEmulator, type Emulator } from '../emulator/emulator';
import { cliArgv, runCliProcess } from '../helpers/cli';
import { tempTinyWorkspace } from '../helpers/tinyWorkspace';
import { holdFirst } from '../helpers/processes';
import { hasEscapes, screenOf } from '../helpers/terminalScreen';

const TOML = `[project]
name = "tiny"

[training]
target = "pod"
trainer = "command"
command = "python3 train.py --steps 5 --step-seconds 0.05"
upload = ["train.py", "data"]

[targets.pod]
kind = "runpod"
gpu_types = ["NVIDIA GeForce RTX 4090"]
max_hours = 1
boot_grace_minutes = 5
retrieve_grace_minutes = 10
`;
const HEADER = /pod \S+ is booting; the last lines of its log:/;
const DIM = '\u001b[2m';
/** The dataset of the transfer tests (its upload is held on the pod to last long enough). */
const BIG_MIB = 160;
/** The dataset the upload tests add: big enough for a channel of its own (sshUpload.ts). */
const DATASET = 'data/big.bin';
/** The upload's live line: the bytes of the whole, the rate, and (once a rate is known) the time left. */
const LIVE_UPLOAD =
  /upload: [\d.]+ (B|KiB|MiB) of 160\.\d MiB(, [\d.]+ (B|KiB|MiB|GiB)\/s(, [\dhmins ]+ left)?)?/;
/** The upload's final line: the total, the time and the average rate. */
const FINAL_UPLOAD = /^upload: 160\.\d MiB \(\d+ files\) in [\d.hmins ]+, [\d.]+ (KiB|MiB|GiB)\/s$/;
/** Cursor up to the start of a line: the block being redrawn. */
// eslint-disable-next-line no-control-regex
const REDRAW = /\u001b\[\d+F\u001b\[J/;

describe('overbrainer train on a terminal (a pseudo-terminal) against the Runpod emulator', function () {
  this.timeout(150_000);
  let emulator: Emulator;
  let tmp: string;
  let ws: string;
  const children = new Set<ChildProcess>();

  before(async function () {
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 100, starting: 100 } });
  });
  after(async () => {
    await emulator?.close();
  });
  beforeEach(() => {
    ({ tmp, ws } = tempTinyWorkspace('cli-tty-', TOML));
  });
  /** A sparse file of BIG_MIB in the uploaded data (zeros cross SSH as any bytes do). */
  const addDataset = (): void => {
    const file = path.join(ws, DATASET);
    fs.closeSync(fs.openSync(file, 'w'));
    fs.truncateSync(file, BIG_MIB * 1024 * 1024);
  };

  /**
   * `run` with the pod's writer of the dataset held (SIGSTOP) for 1.5 s as soon as it starts: on
   * a quiet machine the 160 MiB go in less than the second a transfer lasts before it is shown
   * live, so the hold makes the upload long whatever the machine. A file that big goes through a
   * channel of its own, written by `tee` (the tar stream carries the small files only: holding
   * its `tar -x` left the dataset's bytes free to go, and the upload short on a quiet machine).
   */
  async function withLongUpload<T>(run: () => Promise<T>): Promise<{ result: T; held: boolean }> {
    const stop = new AbortController();
    // The pod's writer of the dataset: `tee` (one channel), or a range's `dd` when the link
    // counts as distant (on a busy machine even loopback may): either, held, holds the upload.
    const writer = (cmdline: string): boolean =>
      cmdline === `tee -- ${DATASET}` || cmdline.startsWith(`dd of=${DATASET} `);
    const held = holdFirst((p) => writer(p.cmdline.trim()), 1_500, stop.signal);
    let result: T;
    try {
      result = await run();
    } finally {
      stop.abort(); // a hold under way ends as set; a look not yet answered gives up
    }
    return { result, held: (await held) !== null };
  }

  afterEach(() => {
    for (const child of children) child.kill('SIGKILL');
    children.clear();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const env = (extra: Record<string, string>): Record<string, string> => ({
    HOME: '/nonexistent',
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    OVERBRAINER_RUNPOD__API_KEY: emulator.apiKey,
    OVERBRAINER_RUNPOD__BASE_URL: emulator.baseUrl,
    OVERBRAINER_TIMING_SCALE: '8',
    ...extra,
  });

  /** `overbrainer -C ws train` under `script`: what the terminal received, and the exit code. */
  function trainOnTty(
    extra: Record<string, string>,
  ): Promise<{ code: number | null; out: string }> {
    const command = [process.execPath, ...cliArgv(), '-C', ws, 'train']
      .map((a) => `'${a.replace(/'/g, `'\\''`)}'`)
      .join(' ');
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      env: env(extra),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')));
    return new Promise((resolve) =>
      child.on('close', (code) => {
        children.delete(child);
        resolve({ code, out });
      }),
    );
  }

  // The boot log and a long upload are two steps of one run: on a terminal (TERM=xterm) one train
  // shows both, and one train off it both plain forms (a train is a pod's boot and a 160 MiB
  // upload: the file took 15.9 CPU-s with each shown by a train of its own, 13.0 so).
  it('on a terminal: redraws the boot log in place while the pod provisions, dimmed, leaving no block behind; a long upload is one line redrawn in place with bytes, rate and time left, then its final line', async () => {
    addDataset();
    const { result, held } = await withLongUpload(() => trainOnTty({ TERM: 'xterm' }));
    const { code, out } = result;
    assert.equal(code, 0, out);
    // The boot log.
    assert.match(out, HEADER);
    assert.match(out, REDRAW);
    assert.ok(out.includes(DIM), 'the block is dimmed when colour is allowed');
    assert.ok(!out.includes(emulator.apiKey), 'the API key was shown');
    const screen = screenOf(out);
    assert.ok(!screen.some((l) => HEADER.test(l)), `a boot block was left:\n${screen.join('\n')}`);
    assert.ok(
      screen.some((l) => /^pod: .*ready/.test(l)),
      screen.join('\n'),
    );
    // The upload.
    assert.ok(held, 'the upload was never seen on the pod');
    assert.match(out, LIVE_UPLOAD);
    assert.match(out, / left/, 'no time left was shown');
    assert.match(out, /upload: 160\.\d MiB sent, the pod checks it/);
    assert.ok(
      !screen.some((l) => LIVE_UPLOAD.test(l)),
      `a live line was left:\n${screen.join('\n')}`,
    );
    assert.equal(screen.filter((l) => FINAL_UPLOAD.test(l)).length, 1, screen.join('\n'));
    assert.ok(
      screen.some((l) => /^retrieve: [\d.]+ (B|KiB|MiB) \(\d+ files?\) in /.test(l)),
      screen.join('\n'),
    );
  });

  it('with NO_COLOR: the same redraw, without colour', async () => {
    const { code, out } = await trainOnTty({ TERM: 'xterm', NO_COLOR: '1' });
    assert.equal(code, 0, out);
    assert.match(out, HEADER);
    assert.match(out, REDRAW);
    assert.ok(!out.includes(DIM), 'coloured despite NO_COLOR');
  });

  it('without a terminal: plain `pod log:` lines, no control sequence; a long upload only its final line, no line per chunk', async () => {
    addDataset();
    const { result: ran, held } = await withLongUpload(() =>
      runCliProcess(['-C', ws, 'train'], { env: env({ TERM: 'xterm' }), children }),
    );
    assert.equal(ran.code, 0, ran.stderr);
    assert.match(ran.stderr, /^pod log: (system|container): /m);
    assert.ok(!hasEscapes(ran.stderr + ran.stdout), ran.stderr);
    assert.doesNotMatch(ran.stderr, HEADER);
    assert.ok(held, 'the upload was never seen on the pod');
    const lines = ran.stderr.split('\n');
    assert.equal(lines.filter((l) => FINAL_UPLOAD.test(l)).length, 1, ran.stderr);
    assert.equal(lines.filter((l) => /^upload: /.test(l)).length, 1, ran.stderr);
  });

  it('TERM=dumb: plain lines, no control sequence (that terminal cannot move its cursor)', async () => {
    const { code, out } = await trainOnTty({ TERM: 'dumb' });
    assert.equal(code, 0, out);
    assert.match(out, /^pod log: (system|container): /m);
    assert.ok(!hasEscapes(out), out);
  });
});
