import assert from 'node:assert/strict';
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
});
