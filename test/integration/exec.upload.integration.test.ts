/**
 * The upload over SSH against a real sshd: what the pod wrote is hashed there against the hashes
 * of what was sent (a damaged write fails the upload), and files the pod already has with the
 * same content (a run directory on a volume a new pod mounts again) are not sent again.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { ExecError } from '../../src/core/exec/executor';
import { SshExecutor } from '../../src/core/exec/ssh';
import { uploadVerified } from '../../src/core/exec/sshUpload';
import { podWithTools, type PodWithTools } from '../helpers/podTools';
import { executorOptions, startTcpProxy, type TcpProxy } from '../helpers/sshd';
import { makeTempDir, removeTempDir } from '../helpers/tempDir';

/** A `tar` that runs the real one, then appends a byte to data/model.bin under its -C dir. */
const DAMAGING_TAR = `#!/bin/sh
real=$(PATH=/usr/local/bin:/usr/bin:/bin command -v tar)
"$real" "$@" || exit $?
for last; do :; done
if [ -f "$last/data/model.bin" ]; then printf X >> "$last/data/model.bin"; fi
`;

/**
 * A `tee` as on a full disk: the file gets its first MiB only, everything still goes on to its
 * standard output (so the hash of the stream alone would match), and it fails saying why.
 */
const FULL_DISK_TEE = `#!/bin/sh
for f; do :; done
real=$(PATH=/usr/local/bin:/usr/bin:/bin command -v tee)
"$real" -- "$f.all" && head -c 1048576 "$f.all" > "$f" && rm -f -- "$f.all"
echo "tee: $f: No space left on device" >&2
exit 1
`;

/** Big enough to go through a channel of its own (OWN_CHANNEL_MIN_BYTES). */
const BIG_BYTES = 17 * 1024 * 1024 + 5;

describe('upload over SSH, verified on the pod', function () {
  this.timeout(60_000);
  let local: string;
  let pod: PodWithTools | null = null;

  beforeEach(() => {
    local = makeTempDir('ob-upload-');
    mkdirSync(join(local, 'run', 'data'), { recursive: true });
    writeFileSync(join(local, 'run', 'train.py'), 'print("hi")\n');
    writeFileSync(join(local, 'run', 'data', 'model.bin'), randomBytes(3 * 1024 * 1024 + 7));
    writeFileSync(join(local, 'run', 'data', 'small.txt'), 'small\n');
  });
  afterEach(async () => {
    await pod?.close();
    pod = null;
    removeTempDir(local);
  });

  it('fails, naming the file, when what the pod wrote differs from what was sent', async () => {
    pod = await podWithTools({ tar: DAMAGING_TAR });
    const remote = join(pod.sshd.root, 'run');
    const error = await pod.executor.upload(join(local, 'run'), remote, { exclude: [] }).then(
      () => assert.fail('the damaged upload was accepted'),
      (caught: unknown) => caught,
    );
    assert.ok(error instanceof ExecError, String(error));
    assert.equal(error.kind, 'io');
    assert.match(error.message, /did not verify: .*data\/model\.bin/);
  });

  it('does not send again the files the pod has with the same content, and sends the others', async () => {
    pod = await podWithTools({});
    const remote = join(pod.sshd.root, 'run');
    const src = join(local, 'run');
    const first = await uploadVerified(pod.executor, src, remote, { exclude: [] });
    assert.deepEqual(first, { sent: 3, kept: 0 });
    const inode = statSync(join(remote, 'data', 'model.bin')).ino;
    // The pod's copy of one file differs (same size), one local file changed, one is new.
    writeFileSync(join(remote, 'train.py'), 'print("ho")\n');
    writeFileSync(join(src, 'data', 'small.txt'), 'changed\n');
    writeFileSync(join(src, 'data', 'new.txt'), 'new\n');
    const second = await uploadVerified(pod.executor, src, remote, { exclude: [] });
    assert.deepEqual(second, { sent: 3, kept: 1 });
    assert.equal(
      statSync(join(remote, 'data', 'model.bin')).ino,
      inode,
      'model.bin was sent again',
    );
    for (const rel of ['train.py', 'data/small.txt', 'data/new.txt', 'data/model.bin']) {
      assert.deepEqual(readFileSync(join(remote, rel)), readFileSync(join(src, rel)), rel);
    }
    // Through the executor too: nothing changed, nothing is rewritten.
    const before = statSync(join(remote, 'data', 'new.txt')).ino;
    await pod.executor.upload(src, remote, { exclude: [] });
    assert.equal(statSync(join(remote, 'data', 'new.txt')).ino, before);
  });

  it('sends a big file through its own channel, hashed as the pod writes it: its bytes and mode, a link at its path replaced, never written through', async () => {
    pod = await podWithTools({});
    const remote = join(pod.sshd.root, 'run');
    const src = join(local, 'run');
    const big = randomBytes(BIG_BYTES);
    writeFileSync(join(src, 'data', 'big.bin'), big, { mode: 0o750 });
    // The pod has a link where the big file goes: the upload replaces it.
    const outside = join(pod.sshd.root, 'outside.bin');
    writeFileSync(outside, 'not to be overwritten');
    mkdirSync(join(remote, 'data'), { recursive: true });
    symlinkSync(outside, join(remote, 'data', 'big.bin'));
    const progress: number[] = [];
    const summary = await uploadVerified(pod.executor, src, remote, {
      exclude: [],
      onProgress: (p) => progress.push(p.bytesDone),
    });
    assert.deepEqual(summary, { sent: 4, kept: 0 });
    assert.equal(readFileSync(outside, 'utf8'), 'not to be overwritten');
    const stats = lstatSync(join(remote, 'data', 'big.bin'));
    assert.ok(stats.isFile(), 'the link was written through');
    assert.equal(stats.mode & 0o777, 0o750);
    assert.ok(readFileSync(join(remote, 'data', 'big.bin')).equals(big));
    for (const rel of ['train.py', 'data/small.txt', 'data/model.bin']) {
      assert.deepEqual(readFileSync(join(remote, rel)), readFileSync(join(src, rel)), rel);
    }
    assert.equal(progress.at(-1), BIG_BYTES + 3 * 1024 * 1024 + 7 + 12 + 6);
    // Again: the pod has it, nothing is sent.
    assert.deepEqual(await uploadVerified(pod.executor, src, remote, { exclude: [] }), {
      sent: 0,
      kept: 4,
    });
  });

  it('fails, naming the file and why, when the pod could not write all of a big file (a full disk)', async () => {
    pod = await podWithTools({ tee: FULL_DISK_TEE });
    writeFileSync(join(local, 'run', 'data', 'big.bin'), randomBytes(BIG_BYTES));
    const error = await uploadVerified(
      pod.executor,
      join(local, 'run'),
      join(pod.sshd.root, 'run'),
      {
        exclude: [],
      },
    ).then(
      () => assert.fail('the short write was accepted'),
      (caught: unknown) => caught,
    );
    assert.ok(error instanceof ExecError, String(error));
    assert.match(error.message, /did not verify: data\/big\.bin: .*No space left on device/);
  });

  it('sends again what the pod does not have when the connection drops midway, and says so', async () => {
    pod = await podWithTools({});
    const src = join(local, 'run');
    const remote = join(pod.sshd.root, 'run');
    const first = randomBytes(BIG_BYTES);
    const second = randomBytes(BIG_BYTES);
    writeFileSync(join(src, 'data', 'a-first.bin'), first);
    writeFileSync(join(src, 'data', 'b-second.bin'), second);
    const total = 2 * BIG_BYTES + 3 * 1024 * 1024 + 7 + 12 + 6;
    const totals: number[] = [];
    const warnings: string[] = [];
    let dropped = false;
    await pod.executor.upload(src, remote, {
      exclude: [],
      onWarning: (message) => warnings.push(message),
      onProgress: (p) => {
        if (p.bytesTotal !== null) totals.push(p.bytesTotal);
        // The big files go one after the other: the first is whole once more than it was sent.
        if (!dropped && p.bytesDone > BIG_BYTES + 3 * 1024 * 1024 + 1024 * 1024) {
          dropped = true;
          void pod!.sshd.dropSessions();
        }
      },
    });
    assert.ok(dropped, 'the connection was dropped');
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.match(warnings[0]!, /connection dropped during the upload.*attempt 2 of 3/);
    assert.ok(readFileSync(join(remote, 'data', 'a-first.bin')).equals(first));
    assert.ok(readFileSync(join(remote, 'data', 'b-second.bin')).equals(second));
    for (const rel of ['train.py', 'data/small.txt', 'data/model.bin']) {
      assert.deepEqual(readFileSync(join(remote, rel)), readFileSync(join(src, rel)), rel);
    }
    // The second attempt's totals leave out what had arrived whole (the first big file at least).
    assert.equal(totals[0], total);
    assert.ok(
      totals.some((bytes) => bytes <= total - BIG_BYTES),
      `the totals sent: ${[...new Set(totals)].join(', ')}`,
    );
  });

  it('stops both streams when aborted while a big file goes, and says it was aborted', async () => {
    pod = await podWithTools({});
    writeFileSync(join(local, 'run', 'data', 'big.bin'), randomBytes(BIG_BYTES));
    const stop = new AbortController();
    const error = await uploadVerified(
      pod.executor,
      join(local, 'run'),
      join(pod.sshd.root, 'run'),
      {
        exclude: [],
        signal: stop.signal,
        onProgress: (p) => {
          if (p.bytesDone > 8 * 1024 * 1024) stop.abort(new Error('the user stopped it'));
        },
      },
    ).then(
      () => assert.fail('the aborted upload resolved'),
      (caught: unknown) => caught,
    );
    assert.ok(error instanceof ExecError, String(error));
    assert.equal(error.kind, 'aborted');
  });
});

/** A `dd` that notes its arguments (a line per run, in dd.log beside its bin/) and runs the real one. */
const NOTING_DD = `#!/bin/sh
echo "$*" >> "$(dirname "$0")/../dd.log"
real=$(PATH=/usr/local/bin:/usr/bin:/bin command -v dd)
exec "$real" "$@"
`;

/** A `dd` as on a full disk: takes its input and writes none of it. */
const FULL_DISK_DD = `#!/bin/sh
cat > /dev/null
echo "dd: error writing: No space left on device" >&2
exit 1
`;

describe('upload over a distant link (a relay adding 50 ms of round trip)', function () {
  this.timeout(120_000);
  let local: string;
  let pod: PodWithTools | null = null;
  let relay: TcpProxy | null = null;
  let distant: SshExecutor | null = null;

  /** A pod whose commands find `scripts` first, and an executor reaching it through the relay. */
  async function distantPod(scripts: Record<string, string>): Promise<SshExecutor> {
    pod = await podWithTools(scripts);
    relay = await startTcpProxy(pod.sshd.port, { oneWayDelayMs: 25 });
    distant = await SshExecutor.connect(executorOptions(pod.sshd, { port: relay.port }));
    return distant;
  }

  /** The arguments of each run of the pod's dd (NOTING_DD's notes). */
  const ddRuns = (): string[] => {
    const file = join(pod!.tools, 'dd.log');
    return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : [];
  };

  beforeEach(() => {
    local = makeTempDir('ob-upload-far-');
    mkdirSync(join(local, 'run', 'data'), { recursive: true });
    writeFileSync(join(local, 'run', 'train.py'), 'print("hi")\n');
  });
  afterEach(async () => {
    distant?.dispose();
    distant = null;
    await relay?.close();
    relay = null;
    await pod?.close();
    pod = null;
    removeTempDir(local);
  });

  it('sends a big file as byte ranges at once, each through its own channel and hashed as the pod writes it', async () => {
    const executor = await distantPod({ dd: NOTING_DD });
    const remote = join(pod!.sshd.root, 'run');
    const src = join(local, 'run');
    // Not a whole number of MiB: the last range is short.
    const big = randomBytes(40 * 1024 * 1024 + 12_345);
    writeFileSync(join(src, 'data', 'big.bin'), big, { mode: 0o640 });
    // The pod has a longer file there: what is left of it must not outlive the upload.
    mkdirSync(join(remote, 'data'), { recursive: true });
    writeFileSync(join(remote, 'data', 'big.bin'), Buffer.alloc(48 * 1024 * 1024, 1));

    const summary = await uploadVerified(executor, src, remote, { exclude: [] });

    assert.deepEqual(summary, { sent: 2, kept: 0 });
    const written = readFileSync(join(remote, 'data', 'big.bin'));
    assert.equal(written.length, big.length);
    assert.ok(written.equals(big), 'the file on the pod differs from the one sent');
    assert.equal(statSync(join(remote, 'data', 'big.bin')).mode & 0o777, 0o640);
    // Two ranges of 21 MiB (the second shorter), one dd each, at their offsets in MiB.
    const seeks = ddRuns().map((line) => Number(/seek=(\d+)/.exec(line)?.[1]));
    assert.deepEqual(
      seeks.sort((a, b) => a - b),
      [0, 21],
    );
  });

  it('leaves a channel free while the ranges go: a command beside the upload (the watchdog verdict, the cost cap) runs at once', async () => {
    const executor = await distantPod({});
    const size = 96 * 1024 * 1024;
    writeFileSync(join(local, 'run', 'data', 'big.bin'), randomBytes(size));
    let sentBytes = 0;
    let beside: Promise<number> | null = null;
    await uploadVerified(executor, join(local, 'run'), join(pod!.sshd.root, 'run'), {
      exclude: [],
      onProgress: (p) => {
        sentBytes = p.bytesDone;
        // Every range under way: a command asks for a channel, and notes how far the upload
        // had got when it ended. Without a free channel it would wait for a range to end,
        // which the ranges going side by side all do near the end of the file.
        if (beside === null && p.bytesDone > 16 * 1024 * 1024) {
          beside = executor
            .run('true', { what: 'a command beside the upload' })
            .then(() => sentBytes);
        }
      },
    });
    assert.ok(beside !== null, 'the upload never got to 16 MiB');
    const at = await beside;
    assert.ok(at < size * 0.75, `the command ended when ${at} of ${size} bytes were sent`);
  });

  it('sends again what the pod does not have when the connection drops while the ranges go', async () => {
    const executor = await distantPod({});
    const remote = join(pod!.sshd.root, 'run');
    const big = randomBytes(64 * 1024 * 1024 + 3);
    writeFileSync(join(local, 'run', 'data', 'big.bin'), big);
    const warnings: string[] = [];
    let cut = false;
    await executor.upload(join(local, 'run'), remote, {
      exclude: [],
      onWarning: (message) => warnings.push(message),
      onProgress: (p) => {
        // Every range under way, none done: the drop comes in the middle of each.
        if (!cut && p.bytesDone > 24 * 1024 * 1024) {
          cut = true;
          relay!.cut();
        }
      },
    });
    assert.ok(cut, 'the connection was cut');
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.match(warnings[0]!, /connection dropped during the upload.*attempt 2 of 3/);
    assert.ok(readFileSync(join(remote, 'data', 'big.bin')).equals(big), 'big.bin differs');
  });

  it('fails, naming the file, its range and why, when the pod could not write a range (a full disk)', async () => {
    const executor = await distantPod({ dd: FULL_DISK_DD });
    writeFileSync(join(local, 'run', 'data', 'big.bin'), randomBytes(33 * 1024 * 1024));
    const error = await uploadVerified(executor, join(local, 'run'), join(pod!.sshd.root, 'run'), {
      exclude: [],
    }).then(
      () => assert.fail('the unwritten range was accepted'),
      (caught: unknown) => caught,
    );
    assert.ok(error instanceof ExecError, String(error));
    assert.match(
      error.message,
      /did not verify: data\/big\.bin \(bytes \d+–\d+\): writing data\/big\.bin failed/,
    );
  });
});
