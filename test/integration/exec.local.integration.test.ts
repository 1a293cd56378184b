/**
 * LocalExecutor with real shells and files: exec, stdin, exit codes, process
 * groups killed on abort and timeout, reads, atomic writes, the copy-based
 * upload (links never followed) and the resuming download.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { DownloadedFile } from '../../src/core/exec/executor';
import { LocalExecutor } from '../../src/core/exec/local';
import { processAlive } from '../helpers/sshd';
import { rejects, waitFor } from '../helpers/execAsserts';
import { makeTempDir, removeTempDir } from '../helpers/tempDir';

describe('LocalExecutor', function () {
  this.timeout(30_000);
  let dir: string;
  let executor: LocalExecutor;

  beforeEach(() => {
    dir = makeTempDir('ob-local-');
    executor = new LocalExecutor();
  });
  afterEach(() => {
    executor.dispose();
    removeTempDir(dir);
  });

  it('runs sh -c with stdin, stdout, stderr and the exit code', async () => {
    const result = await executor.exec('IFS= read -r T; echo "got $T"; echo err >&2; exit 4', {
      stdin: 'secret\n',
    });
    assert.equal(result.code, 4);
    assert.equal(result.stdout.toString(), 'got secret\n');
    assert.equal(result.stderr.toString(), 'err\n');
    const killed = await executor.exec('kill -KILL $$');
    assert.equal(killed.signal, 'SIGKILL');
  });

  it('kills the whole process group on abort and on timeout', async () => {
    const pids = join(dir, 'pids');
    const controller = new AbortController();
    const received: string[] = [];
    const streaming = executor.stream(`sleep 300 & echo "$$ $!" > ${pids}; echo ready; wait`, {
      signal: controller.signal,
      onStdout: (chunk) => received.push(chunk.toString()),
    });
    await waitFor(() => received.join('') === 'ready\n' && existsSync(pids));
    const [shell, sleeper] = readFileSync(pids, 'utf8').trim().split(' ').map(Number);
    controller.abort();
    await rejects(streaming, 'aborted');
    // SIGKILL went to the group; a loaded machine may take a moment to schedule the deaths.
    await waitFor(() => !processAlive(shell!) && !processAlive(sleeper!), 5_000);

    const timeoutPids = join(dir, 'timeout-pids');
    // 1.5 s: time for a loaded machine to start the shell and write the pid.
    await rejects(
      executor.exec(`sleep 300 & echo "$!" > ${timeoutPids}; wait`, { timeoutMs: 1_500 }),
      'timeout',
    );
    const timedOut = Number(readFileSync(timeoutPids, 'utf8'));
    await waitFor(() => !processAlive(timedOut), 5_000);
  });

  it('reads ranges and writes atomically', async () => {
    const path = join(dir, 'a', 'b', 'file');
    await executor.writeFileAtomic(path, 'hello world');
    assert.equal((await executor.readRange(path, 6, 100)).toString(), 'world');
    assert.equal((await executor.readRange(path, 11, 100)).length, 0);
    await rejects(executor.readRange(join(dir, 'missing'), 0, 1), 'not_found');
    assert.deepEqual(readdirSync(join(dir, 'a', 'b')), ['file']);
  });

  it('uploads by copying the tree minus excludes, never following links', async () => {
    const src = join(dir, 'src');
    mkdirSync(join(src, 'data', 'sub'), { recursive: true });
    writeFileSync(join(src, 'data', 'sub', 'new\nline'), 'x');
    writeFileSync(join(src, 'pod.json'), '{}');
    writeFileSync(join(dir, 'secret'), 'outside');
    symlinkSync(join(dir, 'secret'), join(src, 'data', 'link'));
    const dest = join(dir, 'dest');
    mkdirSync(dest);
    // A link already at the destination is replaced, never written through.
    symlinkSync(join(dir, 'secret'), join(dest, 'pod2'));
    writeFileSync(join(src, 'pod2'), 'new content');
    const warnings: string[] = [];
    await executor.upload(src, dest, { exclude: ['pod.json'], onWarning: (w) => warnings.push(w) });
    assert.equal(readFileSync(join(dest, 'data', 'sub', 'new\nline'), 'utf8'), 'x');
    assert.equal(existsSync(join(dest, 'pod.json')), false);
    assert.equal(existsSync(join(dest, 'data', 'link')), false);
    assert.equal(readFileSync(join(dir, 'secret'), 'utf8'), 'outside');
    assert.equal(lstatSync(join(dest, 'pod2')).isFile(), true);
    assert.equal(warnings.length, 1);
    // The local target running in place: nothing to copy.
    await executor.upload(src, src, { exclude: [] });
  });

  it('downloads with hashes and resumes a partial file from where it stopped', async () => {
    const remote = join(dir, 'remote');
    mkdirSync(join(remote, 'output'), { recursive: true });
    const data = Buffer.from(Array.from({ length: 3_000_000 }, (_, i) => (i * 7) % 256));
    writeFileSync(join(remote, 'output', 'model.bin'), data);
    const partDir = join(dir, 'partial');
    mkdirSync(join(partDir, 'output'), { recursive: true });
    writeFileSync(join(partDir, 'output', 'model.bin'), data.subarray(0, 1_000_000));
    const done: DownloadedFile[] = [];
    await executor.download(remote, join(dir, 'done'), ['output/model.bin'], {
      partDir,
      onFile: (file) => done.push(file),
    });
    assert.ok(readFileSync(join(dir, 'done', 'output', 'model.bin')).equals(data));
    assert.deepEqual(done, [
      {
        file: 'output/model.bin',
        bytes: data.length,
        sha256: createHash('sha256').update(data).digest('hex'),
        resumedBytes: 1_000_000,
      },
    ]);
    assert.equal(
      existsSync(join(partDir, 'output', 'model.bin')),
      false,
      'the partial became the file',
    );
    assert.ok(statSync(join(dir, 'done', 'output')).isDirectory());
    await rejects(executor.download(remote, join(dir, 'done'), ['output/nope']), 'not_found');
    await rejects(executor.download(remote, join(dir, 'done'), ['../escape']), 'io');
  });
});
