/**
 * A run directory as a job leaves it, for the retrieval tests: odd names, a big file, checkpoints
 * to leave out, planted links never to follow; and the check that exactly the results came home.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { STAGING_DIR } from '../../src/core/train/retrieval';

export const ENTRIES = ['output/', 'metrics.jsonl', 'job.log'];
export const EXCLUDES = ['checkpoint-*'];

/**
 * Odd names every platform reads alike (a line break, a backslash, a colon… are refused on
 * every platform: see src/core/exec/pathRules.ts and UNPORTABLE_NAMES).
 */
export const ODD_NAMES = [
  'output/adapter_model.safetensors',
  'output/with space.txt',
  'output/ünïcødé/模型.bin',
  'output/-leading-dash',
  "output/quote'single",
  'output/$dollar and (parens) & [brackets]',
  `output/${'deep/'.repeat(30)}file`,
];

/** Names a job can write that Windows would read differently: each refuses the whole list. */
export const UNPORTABLE_NAMES = [
  'output/new\nline.txt',
  'output/..\\..\\escape.txt',
  'output/C:evil.txt',
  'output/NUL.txt',
  'output/trailing.',
];

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** A run directory as a job leaves it: results, a checkpoint to skip, planted links. */
export function makeRun(root: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  for (const name of ODD_NAMES) files.set(name, Buffer.from(`content of ${name}\n`));
  files.set('output/big.bin', randomBytes(3_000_000));
  files.set('metrics.jsonl', Buffer.from('{"event":"begin"}\n'));
  for (const [name, data] of files) {
    mkdirSync(join(root, name, '..'), { recursive: true });
    writeFileSync(join(root, name), data);
  }
  mkdirSync(join(root, 'output', 'checkpoint-20'), { recursive: true });
  writeFileSync(join(root, 'output', 'checkpoint-20', 'optimizer.pt'), 'skip me');
  mkdirSync(join(root, 'output', 'sub', 'checkpoint-5'), { recursive: true });
  writeFileSync(join(root, 'output', 'sub', 'checkpoint-5', 'x'), 'skip me too');
  mkdirSync(join(root, 'ssh'), { recursive: true });
  writeFileSync(join(root, 'ssh', 'id_ed25519'), 'not an artifact');
  // Links a hostile job could plant: never followed, never retrieved.
  symlinkSync('/etc/passwd', join(root, 'output', 'passwd-link'));
  symlinkSync('/etc', join(root, 'output', 'etc-link'));
  symlinkSync('/etc/hostname', join(root, 'job.log'));
  return files;
}

export function assertRetrieved(localRunDir: string, files: Map<string, Buffer>): void {
  for (const [name, data] of files) {
    assert.ok(readFileSync(join(localRunDir, name)).equals(data), JSON.stringify(name));
  }
  assert.equal(existsSync(join(localRunDir, STAGING_DIR)), false, 'staging removed');
  assert.equal(existsSync(join(localRunDir, 'output', 'checkpoint-20')), false);
  assert.equal(existsSync(join(localRunDir, 'output', 'sub', 'checkpoint-5')), false);
  assert.equal(existsSync(join(localRunDir, 'output', 'passwd-link')), false);
  assert.equal(existsSync(join(localRunDir, 'output', 'etc-link')), false);
  assert.equal(existsSync(join(localRunDir, 'job.log')), false);
  assert.equal(existsSync(join(localRunDir, 'ssh')), false);
}
