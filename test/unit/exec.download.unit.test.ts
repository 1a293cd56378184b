import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { downloadFiles, type ReadSource, type SourceFile } from '../../src/core/exec/download';
import { ExecError, type DownloadOptions } from '../../src/core/exec/executor';
import type { TarHandler } from '../../src/core/exec/tarReader';

const LIMITS = { files: 4, chunkBytes: 8, windowPerFile: 2, readsInFlight: 4 };

/** A source holding `files` in memory, whose batch hands over `sent` (name → bytes) in order. */
function source(
  files: Record<string, string>,
  sent: [string, string][] | null,
): ReadSource & { opened: string[] } {
  const opened: string[] = [];
  const open = async (path: string): Promise<SourceFile | undefined> => {
    const name = path.replace(/^\/remote\//, '');
    opened.push(name);
    const data = files[name];
    if (data === undefined) return undefined;
    const bytes = Buffer.from(data);
    return {
      size: bytes.length,
      read: async (position, length) => bytes.subarray(position, position + length),
      close: async () => undefined,
    };
  };
  const batch =
    sent === null
      ? undefined
      : async (_dir: string, _names: readonly string[], handler: TarHandler): Promise<void> => {
          for (const [name, data] of sent) {
            const writer = await handler.file(name, data.length);
            await writer?.write(Buffer.from(data));
            await writer?.end();
          }
        };
  return { open, opened, ...(batch ? { batch } : {}) };
}

describe('downloadFiles with a batch source', function () {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'ob-dl-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const files = { 'output/a.txt': 'alpha', 'output/b.txt': 'a longer bravo file', 'm.jsonl': '{}' };
  /** Downloads every file of `files` from `src` into <dir>/out. */
  const fetchAll = (src: ReadSource, options: DownloadOptions = {}): Promise<void> =>
    downloadFiles(
      src,
      '/remote',
      join(dir, 'out'),
      Object.keys(files),
      options,
      LIMITS,
      (e) => new ExecError('io', String(e)),
    );

  it('takes every file the batch hands over, and fetches the others one by one', async () => {
    // The batch sends two of the three (the third was gone when it ran, say).
    const src = source(files, [
      ['output/a.txt', 'alpha'],
      ['m.jsonl', '{}'],
    ]);
    const seen: string[] = [];
    await fetchAll(src, { onFile: (f) => seen.push(f.file) });
    for (const [name, data] of Object.entries(files)) {
      assert.equal(readFileSync(join(dir, 'out', name), 'utf8'), data);
    }
    assert.deepEqual(src.opened, ['output/b.txt'], 'only the file not handed over was opened');
    assert.deepEqual(seen.sort(), Object.keys(files).sort());
  });

  it('refuses a name it did not ask for: nothing of it is written, everything comes one by one', async () => {
    const src = source(files, [
      ['../escape.txt', 'evil'],
      ['output/a.txt', 'alpha'],
    ]);
    await fetchAll(src);
    assert.equal(existsSync(join(dir, 'escape.txt')), false);
    assert.equal(existsSync(join(dir, 'out', 'escape.txt')), false);
    assert.deepEqual(src.opened.sort(), Object.keys(files).sort());
    for (const [name, data] of Object.entries(files)) {
      assert.equal(readFileSync(join(dir, 'out', name), 'utf8'), data);
    }
  });

  it('refuses the same name twice', async () => {
    const src = source(files, [
      ['output/a.txt', 'alpha'],
      ['output/a.txt', 'other'],
    ]);
    await fetchAll(src);
    assert.equal(readFileSync(join(dir, 'out', 'output/a.txt'), 'utf8'), 'alpha');
  });
  it('writes a small file handed over in pieces whole, with the hash of all its bytes, whatever its size', async () => {
    // 5 bytes (written at its end), 100 KiB (past a synchronous write: written beside the stream).
    const big = Buffer.alloc(100 * 1024, 7);
    big.write('head');
    const pieces: [string, Buffer[]][] = [
      ['a/five.txt', [Buffer.from('fi'), Buffer.from('v'), Buffer.from('e!')]],
      ['b/big.bin', [big.subarray(0, 1000), big.subarray(1000, 70_000), big.subarray(70_000)]],
    ];
    const batch = async (_d: string, _n: readonly string[], handler: TarHandler): Promise<void> => {
      for (const [name, parts] of pieces) {
        const writer = await handler.file(name, Buffer.concat(parts).length);
        for (const part of parts) await writer?.write(part);
        await writer?.end();
      }
    };
    const src: ReadSource = { open: async () => undefined, batch };
    const hashes = new Map<string, string>();
    await downloadFiles(
      src,
      '/remote',
      join(dir, 'out'),
      pieces.map(([name]) => name),
      { onFile: (f) => hashes.set(f.file, f.missing ? 'missing' : f.sha256) },
      { ...LIMITS, chunkBytes: 128 * 1024 },
      (e) => new ExecError('io', String(e)),
    );
    for (const [name, parts] of pieces) {
      const whole = Buffer.concat(parts);
      assert.deepEqual(readFileSync(join(dir, 'out', name)), whole, name);
      assert.equal(hashes.get(name), createHash('sha256').update(whole).digest('hex'), name);
    }
  });
});
