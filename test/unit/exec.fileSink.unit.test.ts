import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import fsPromises from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { FileSink, SafeDirs } from '../../src/core/exec/localFiles';
import { makeTempDir, removeTempDir } from '../helpers/tempDir';

const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

/** `data` cut into chunks of the sizes an SSH channel and the read engine hand over. */
function chunks(data: Buffer, seed = 7): Buffer[] {
  const sizes = [1, 4096, 32 * 1024, 100, 128 * 1024, 32 * 1024 - 9, 70_000, 3];
  const out: Buffer[] = [];
  for (let at = 0, i = seed; at < data.length; i++) {
    const size = Math.min(sizes[i % sizes.length]!, data.length - at);
    out.push(data.subarray(at, at + size));
    at += size;
  }
  return out;
}

describe('FileSink (a downloaded file written behind the stream)', function () {
  let dir: string;
  let done: SafeDirs;
  let part: SafeDirs;
  beforeEach(() => {
    dir = makeTempDir('ob-sink-');
    done = new SafeDirs(join(dir, 'done'));
    part = new SafeDirs(join(dir, 'part'));
  });
  afterEach(() => removeTempDir(dir));

  it('writes small and big chunks in order, though the caller reuses each buffer once its write returns', async () => {
    const data = randomBytes(5 * 1024 * 1024 + 12_345);
    const sink = await FileSink.open(done, part, 'out/model.bin');
    const scratch = Buffer.alloc(256 * 1024);
    for (const chunk of chunks(data)) {
      // The read engine hands over pooled buffers and reuses them once write() resolves.
      chunk.copy(scratch);
      await sink.write(scratch.subarray(0, chunk.length));
      scratch.fill(0xee);
    }
    assert.equal(sink.offset, data.length);
    const result = await sink.finish();
    assert.deepEqual(result, { bytes: data.length, sha256: sha256(data), resumedBytes: 0 });
    assert.ok(readFileSync(join(dir, 'done', 'out', 'model.bin')).equals(data));
  });

  it('keeps every byte it took when closed midway, and a resume continues from there', async () => {
    const data = randomBytes(3 * 1024 * 1024 + 777);
    const cut = 2 * 1024 * 1024 + 4321; // inside a block that is still being filled
    const first = await FileSink.open(done, part, 'model.bin');
    for (const chunk of chunks(data.subarray(0, cut))) await first.write(chunk);
    await first.close();
    assert.equal(statSync(join(dir, 'part', 'model.bin')).size, cut);

    const second = await FileSink.open(done, part, 'model.bin');
    assert.equal(second.offset, cut);
    for (const chunk of chunks(data.subarray(cut), 3)) await second.write(chunk);
    const result = await second.finish();
    assert.deepEqual(result, { bytes: data.length, sha256: sha256(data), resumedBytes: cut });
  });

  it('fails, never finishes, when a write behind the stream fails (the file size limit, as a full disk)', function () {
    this.timeout(30_000);
    // The sink in a process whose files may not grow past 1 MiB: writes past it fail with EFBIG.
    const module = resolve(__dirname, '../../src/core/exec/localFiles.ts');
    const script = `
      const loaded = await import(${JSON.stringify(module)});
      const { FileSink, SafeDirs } = loaded.default ?? loaded;
      const base = ${JSON.stringify(dir)};
      const sink = await FileSink.open(new SafeDirs(base + '/done'), new SafeDirs(base + '/part'), 'm.bin');
      let outcome;
      try {
        for (let i = 0; i < 256; i++) await sink.write(Buffer.alloc(16 * 1024, i));
        const result = await sink.finish();
        outcome = { finished: result.bytes };
      } catch (error) {
        outcome = { failed: error.code };
      }
      console.log(JSON.stringify(outcome));
    `;
    const child = spawnSync(
      'prlimit',
      [
        `--fsize=${1024 * 1024}`,
        process.execPath,
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        script,
      ],
      { encoding: 'utf8' },
    );
    assert.equal(child.status, 0, child.stderr);
    assert.deepEqual(JSON.parse(child.stdout), { failed: 'EFBIG' });
  });
});

describe('SafeDirs (the directories a download writes into)', function () {
  let dir: string;
  beforeEach(() => (dir = makeTempDir('ob-dirs-')));
  afterEach(() => removeTempDir(dir));

  it('makes the directories of many files asked at once, parents first', async () => {
    const dirs = new SafeDirs(join(dir, 'base'));
    const files = Array.from({ length: 300 }, (_, i) => `a/b${i % 3}/c/f${i}.bin`);
    await Promise.all(files.map((file) => dirs.ensureParent(file)));
    for (const parent of ['a', 'a/b0/c', 'a/b1/c', 'a/b2/c']) {
      assert.ok(statSync(join(dir, 'base', parent)).isDirectory(), parent);
    }
  });

  it('makes each directory once however many files wait on it', async () => {
    // Files come 64 at a time: each new directory used to be made (and, as it then existed,
    // looked at) by every file waiting on it — thousands of failed mkdirs for 10,000 files.
    const real = fsPromises.mkdir;
    const made: string[] = [];
    fsPromises.mkdir = ((path: string, options?: unknown) => {
      made.push(path);
      return real(path, options as never);
    }) as typeof real;
    try {
      const dirs = new SafeDirs(join(dir, 'base'));
      const files = Array.from({ length: 300 }, (_, i) => `a/b${i % 3}/c/f${i}.bin`);
      await Promise.all(files.map((file) => dirs.ensureParent(file)));
      await Promise.all(files.map((file) => dirs.ensureParent(file)));
    } finally {
      fsPromises.mkdir = real;
    }
    const below = made.map((path) => path.slice(join(dir, 'base').length)).sort();
    assert.deepEqual(below, [
      '',
      '',
      '/a',
      '/a/b0',
      '/a/b0/c',
      '/a/b1',
      '/a/b1/c',
      '/a/b2',
      '/a/b2/c',
    ]);
  });

  it('refuses a file or a link in the way for every file waiting on it, and tries again after', async () => {
    const base = join(dir, 'base');
    mkdirSync(join(base, 'a'), { recursive: true });
    writeFileSync(join(base, 'a', 'b'), 'in the way');
    symlinkSync(dir, join(base, 'link'));
    const dirs = new SafeDirs(base);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => dirs.ensureParent(`a/b/c/f${i}`)),
    );
    for (const outcome of outcomes) {
      assert.equal(outcome.status, 'rejected');
      assert.match(String((outcome as PromiseRejectedResult).reason), /a file is in the way/);
    }
    await assert.rejects(dirs.ensureParent('link/f'), /is a symlink/);
    rmSync(join(base, 'a', 'b'));
    await dirs.ensureParent('a/b/c/f0');
    assert.ok(statSync(join(base, 'a', 'b', 'c')).isDirectory());
  });
});
