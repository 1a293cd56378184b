/**
 * The upload over SSH against a real sshd: what the pod wrote is hashed there against the hashes
 * of what was sent (a damaged write fails the upload), and files the pod already has with the
 * same content (a run directory on a volume a new pod mounts again) are not sent again.
 */
import assert from 'node:assert/strict';
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecError } from '../../src/core/exec/executor';
import { uploadVerified } from '../../src/core/exec/sshUpload';
import { podWithTools, type PodWithTools } from '../helpers/podTools';

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
    local = mkdtempSync(join(tmpdir(), 'ob-upload-'));
    mkdirSync(join(local, 'run', 'data'), { recursive: true });
    writeFileSync(join(local, 'run', 'train.py'), 'print("hi")\n');
    writeFileSync(join(local, 'run', 'data', 'model.bin'), randomBytes(3 * 1024 * 1024 + 7));
    writeFileSync(join(local, 'run', 'data', 'small.txt'), 'small\n');
  });
  afterEach(async () => {
    await pod?.close();
    pod = null;
    rmSync(local, { recursive: true, force: true });
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
