import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TarFormatError, TarReader } from '../../src/core/exec/tarReader';

/** Reads `archive` fed in pieces of `step` bytes: regular files' bytes, and the other entries. */
async function read(archive: Buffer, step: number) {
  const files = new Map<string, Buffer>();
  const others: string[] = [];
  const reader = new TarReader({
    file: async (name, size) => {
      const parts: Buffer[] = [];
      return {
        write: async (chunk) => void parts.push(Buffer.from(chunk)),
        end: async () => {
          const data = Buffer.concat(parts);
          assert.equal(data.length, size);
          files.set(name, data);
        },
      };
    },
    other: (name, type) => others.push(`${type} ${name}`),
  });
  for (let at = 0; at < archive.length; at += step)
    await reader.push(archive.subarray(at, at + step));
  return { files, others, ended: reader.ended, atBoundary: reader.atBoundary };
}

describe('TarReader', function () {
  let dir: string;
  const long = `output/${'deep/'.repeat(30)}${'n'.repeat(120)}.bin`;
  const contents: Record<string, Buffer> = {
    'output/empty': Buffer.alloc(0),
    'output/one block.txt': Buffer.alloc(512, 7),
    'output/odd \u00e9\u00e8 name': Buffer.from('caf\u00e9\n'),
    [long]: Buffer.alloc(70_000, 3),
  };
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ob-tarreader-'));
    for (const [name, data] of Object.entries(contents)) {
      mkdirSync(join(dir, name, '..'), { recursive: true });
      writeFileSync(join(dir, name), data);
    }
    symlinkSync('/etc/passwd', join(dir, 'output', 'link'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const format of ['gnu', 'pax', 'ustar-busybox']) {
    for (const step of [1, 511, 4096, 1 << 20]) {
      it(`reads a ${format} archive fed ${step} byte(s) at a time`, async function () {
        const names = [...Object.keys(contents), 'output/link'];
        const archive =
          format === 'ustar-busybox'
            ? execFileSync('busybox', ['tar', '-cf', '-', '--', ...names], {
                cwd: dir,
                maxBuffer: 1 << 26,
              })
            : execFileSync('tar', [`--format=${format}`, '-cf', '-', '--', ...names], {
                cwd: dir,
                maxBuffer: 1 << 26,
              });
        const got = await read(archive, step);
        assert.ok(got.ended && got.atBoundary);
        assert.deepEqual([...got.files.keys()].sort(), Object.keys(contents).sort());
        for (const [name, data] of Object.entries(contents)) {
          assert.ok(got.files.get(name)?.equals(data), name);
        }
        assert.deepEqual(got.others, ['2 output/link']);
      });
    }
  }

  it('refuses a header whose checksum is wrong', async () => {
    const archive = execFileSync('tar', ['-cf', '-', '--', 'output/one block.txt'], { cwd: dir });
    archive[0] = archive[0]! ^ 1;
    await assert.rejects(read(archive, 4096), TarFormatError);
  });

  it('says when a stream stops inside a file', async () => {
    const archive = execFileSync('tar', ['-cf', '-', '--', long], { cwd: dir, maxBuffer: 1 << 26 });
    const got = await read(archive.subarray(0, 2048), 512);
    assert.equal(got.atBoundary, false);
    assert.equal(got.files.size, 0);
  });
});
