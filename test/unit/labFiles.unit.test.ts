/**
 * The labs' secret scan reads files a chunk at a time (needlesIn): a secret that straddles two
 * chunks must still be found, and a file without one must find nothing.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { needlesIn } from '../helpers/labFiles';

describe('needlesIn (the labs secret scan)', () => {
  let dir: string;
  before(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'needles-'))));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('finds a needle across the 1 MiB read boundary, and only the needles present', async () => {
    const file = path.join(dir, 'big.bin');
    const data = Buffer.alloc(3 * 1024 * 1024, 7);
    data.write('SECRET-KEY-123', 1024 * 1024 - 5, 'latin1');
    data.write('\xffTAIL', data.length - 5, 'latin1');
    fs.writeFileSync(file, data);
    const found = await needlesIn(file, ['SECRET-KEY-123', 'absent', '\xffTAIL']);
    assert.deepEqual([...found].sort(), ['SECRET-KEY-123', '\xffTAIL'].sort());
  });

  it('finds nothing in an empty file', async () => {
    const file = path.join(dir, 'empty');
    fs.writeFileSync(file, '');
    assert.equal((await needlesIn(file, ['x'])).size, 0);
  });
});
