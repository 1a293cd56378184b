import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { BLOCK_BYTES, tarDirectory, tarEnd, tarHeader } from '../../src/core/exec/tar';
import { makeTempDir, removeTempDir } from '../helpers/tempDir';

async function collect(generator: AsyncGenerator<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of generator) parts.push(part);
  return Buffer.concat(parts);
}

function octal(block: Buffer, offset: number, length: number): number {
  return parseInt(
    block
      .subarray(offset, offset + length)
      .toString('ascii')
      .replace(/\0.*$/s, ''),
    8,
  );
}

/** Names that need ustar's prefix field, and names that need a PAX header. */
const PREFIXED = `${'p'.repeat(60)}/${'q'.repeat(60)}/${'r'.repeat(90)}.bin`;
const PAX = `${'long-directory-name-'.repeat(9)}/${'x'.repeat(120)}.bin`;

describe('tar writer', () => {
  let dir: string;

  beforeEach(() => {
    dir = makeTempDir('ob-tar-');
  });
  afterEach(() => removeTempDir(dir));

  it('writes a valid ustar header with its checksum', () => {
    const block = tarHeader({
      path: 'a/b.txt',
      type: 'file',
      mode: 0o100755,
      size: 1234,
      mtimeS: 1_700_000_000,
    });
    assert.equal(block.length, BLOCK_BYTES);
    assert.equal(block.subarray(0, 7).toString(), 'a/b.txt');
    assert.equal(octal(block, 100, 8), 0o755);
    assert.equal(octal(block, 124, 12), 1234);
    assert.equal(octal(block, 136, 12), 1_700_000_000);
    assert.equal(String.fromCharCode(block[156]!), '0');
    assert.equal(block.subarray(257, 263).toString('latin1'), 'ustar\0');
    const stored = octal(block, 148, 8);
    const copy = Buffer.from(block);
    copy.fill(0x20, 148, 156);
    assert.equal(
      stored,
      copy.reduce((sum, byte) => sum + byte, 0),
    );
  });

  it('splits long names into prefix/name and falls back to a PAX path', () => {
    const prefixed = tarHeader({ path: PREFIXED, type: 'file', mode: 0o644, size: 0, mtimeS: 0 });
    assert.equal(prefixed.length, BLOCK_BYTES, 'fits ustar without PAX');
    const pax = tarHeader({ path: PAX, type: 'file', mode: 0o644, size: 0, mtimeS: 0 });
    assert.equal(String.fromCharCode(pax[156]!), 'x');
    const size = octal(pax, 124, 12);
    const record = pax.subarray(BLOCK_BYTES, BLOCK_BYTES + size).toString('utf8');
    const [length] = record.split(' ');
    assert.equal(Number(length), Buffer.byteLength(record), 'the PAX length counts itself');
    assert.equal(record, `${length} path=${PAX}\n`);
  });

  it('archives a tree the system tar lists and extracts: odd names, modes, dirs, excludes', async () => {
    const src = join(dir, 'src');
    const names = [
      'plain.txt',
      'with space.txt',
      'new\nline.txt',
      'ünïcødé-模型.txt',
      PREFIXED,
      PAX,
    ];
    for (const name of names) {
      mkdirSync(join(src, name, '..'), { recursive: true });
      writeFileSync(join(src, name), `content of ${name}\n`.repeat(50));
    }
    writeFileSync(join(src, 'empty'), '');
    writeFileSync(join(src, 'exact-block'), Buffer.alloc(512, 7));
    mkdirSync(join(src, 'empty-dir'));
    chmodSync(join(src, 'plain.txt'), 0o751);
    utimesSync(join(src, 'plain.txt'), 1_600_000_000, 1_600_000_000);
    mkdirSync(join(src, 'ssh'));
    writeFileSync(join(src, 'ssh', 'id_ed25519'), 'secret');
    writeFileSync(join(src, 'pod.json'), '{}');
    mkdirSync(join(src, 'keep', 'ssh'), { recursive: true });
    writeFileSync(join(src, 'keep', 'ssh', 'nested.txt'), 'nested names are not excluded');

    const archive = await collect(tarDirectory(src, { exclude: ['ssh', 'pod.json'] }));
    assert.equal(archive.length % BLOCK_BYTES, 0);
    assert.ok(archive.subarray(-2 * BLOCK_BYTES).equals(tarEnd()));
    const tarPath = join(dir, 'out.tar');
    writeFileSync(tarPath, archive);

    const listing = execFileSync('tar', ['-tvf', tarPath], { encoding: 'utf8' });
    assert.match(listing, /-rwxr-x--x .* plain\.txt/);
    assert.match(listing, /drwx.* empty-dir\//);
    const listed = execFileSync('tar', ['--null', '-tf', tarPath]).toString('utf8');
    assert.ok(!listed.includes('id_ed25519'), 'excluded ssh/ is not in the archive');
    assert.ok(!listed.split('\n').includes('pod.json'), 'excluded pod.json is not in the archive');

    for (const [tool, args] of [
      ['tar', ['-xf', tarPath, '-C']],
      ['busybox', ['tar', '-xf', tarPath, '-C']],
    ] as const) {
      const dest = join(dir, `x-${tool}`);
      mkdirSync(dest);
      execFileSync(tool, [...args, dest]);
      for (const name of names) {
        assert.equal(
          readFileSync(join(dest, name), 'utf8'),
          readFileSync(join(src, name), 'utf8'),
          `${tool}: ${JSON.stringify(name)}`,
        );
      }
      assert.equal(readFileSync(join(dest, 'empty')).length, 0);
      assert.ok(readFileSync(join(dest, 'exact-block')).equals(Buffer.alloc(512, 7)));
      assert.equal(statSync(join(dest, 'plain.txt')).mode & 0o777, 0o751, tool);
      assert.equal(statSync(join(dest, 'plain.txt')).mtimeMs, 1_600_000_000_000, tool);
      assert.ok(statSync(join(dest, 'empty-dir')).isDirectory());
      assert.equal(
        readFileSync(join(dest, 'keep', 'ssh', 'nested.txt'), 'utf8'),
        'nested names are not excluded',
      );
    }
  });

  it('never follows symlinks: skipped with a warning', async () => {
    const src = join(dir, 'src');
    mkdirSync(src);
    writeFileSync(join(dir, 'outside-secret'), 'must not travel');
    symlinkSync(join(dir, 'outside-secret'), join(src, 'link-to-file'));
    symlinkSync(dir, join(src, 'link-to-dir'));
    writeFileSync(join(src, 'real.txt'), 'real');
    const warnings: string[] = [];
    const archive = await collect(tarDirectory(src, { onWarning: (w) => warnings.push(w) }));
    assert.ok(!archive.includes(Buffer.from('must not travel')));
    assert.ok(!archive.includes(Buffer.from('link-to')));
    assert.equal(warnings.length, 2);
    assert.match(warnings.join('\n'), /link-to-file is a symlink/);
    assert.match(warnings.join('\n'), /link-to-dir is a symlink/);
    const tarPath = join(dir, 'out.tar');
    writeFileSync(tarPath, archive);
    assert.equal(execFileSync('tar', ['-tf', tarPath], { encoding: 'utf8' }), 'real.txt\n');
  });

  it('leaves out the files it is told to skip and hashes each file it carries', async () => {
    const src = join(dir, 'hashed');
    mkdirSync(join(src, 'data'), { recursive: true });
    const big = Buffer.alloc(600 * 1024, 3); // more than one read
    writeFileSync(join(src, 'data', 'big.bin'), big);
    writeFileSync(join(src, 'data', 'kept.bin'), 'the target has this one');
    writeFileSync(join(src, 'train.py'), 'print(1)\n');
    const sums = new Map<string, string>();
    const archive = await collect(
      tarDirectory(src, {
        skip: (path) => path === 'data/kept.bin',
        onFileHash: (path, sum) => sums.set(path, sum),
      }),
    );
    const sha = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');
    assert.deepEqual(
      sums,
      new Map([
        ['data/big.bin', sha(big)],
        ['train.py', sha('print(1)\n')],
      ]),
    );
    const tarPath = join(dir, 'hashed.tar');
    writeFileSync(tarPath, archive);
    const listed = execFileSync('tar', ['-tf', tarPath], { encoding: 'utf8' }).trim().split('\n');
    assert.deepEqual(listed.sort(), ['data/', 'data/big.bin', 'train.py']);
  });
});
