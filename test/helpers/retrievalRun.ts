/**
 * A run directory as a job leaves it, for the retrieval tests: odd names, a big file, checkpoints
 * to leave out, planted links never to follow; and the check that exactly the results came home.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../../src/core/clock';
import { SshExecutor } from '../../src/core/exec/ssh';
import { scaleTiming } from '../../src/core/timing';
import { STAGING_DIR } from '../../src/core/train/retrieval';
import { startSshd, type Sshd } from './sshd';

export const ENTRIES = ['output/', 'metrics.jsonl', 'job.log'];
export const EXCLUDES = ['checkpoint-*'];

export const ODD_NAMES = [
  'output/adapter_model.safetensors',
  'output/with space.txt',
  'output/new\nline.txt',
  'output/ünïcødé/模型.bin',
  'output/back\\slash',
  'output/-leading-dash',
  'output/quote\'and"double',
  `output/${'deep/'.repeat(30)}file`,
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

/**
 * A pod (a real sshd) whose sessions find `scripts` first on their PATH (via BASH_ENV, read by
 * the login shell of every session); `root` shares another sshd's files.
 */
export async function podWithTools(
  scripts: Record<string, string>,
  root?: string,
): Promise<{ sshd: Sshd; executor: SshExecutor; close: () => Promise<void> }> {
  const tools = mkdtempSync(join(tmpdir(), 'ob-pod-tools-'));
  mkdirSync(join(tools, 'bin'));
  for (const [name, body] of Object.entries(scripts)) {
    writeFileSync(join(tools, 'bin', name), body);
    chmodSync(join(tools, 'bin', name), 0o755);
  }
  writeFileSync(join(tools, 'rc'), `PATH=${join(tools, 'bin')}:$PATH; export PATH\n`);
  const sshd = await startSshd({ env: { BASH_ENV: join(tools, 'rc') }, root });
  const executor = await SshExecutor.connect({
    host: sshd.host,
    port: sshd.port,
    username: sshd.user,
    privateKey: sshd.clientPrivateKey,
    hostPublicKey: sshd.hostPublicKey,
    clock: systemClock,
    timing: scaleTiming(1),
  });
  return {
    sshd,
    executor,
    close: async () => {
      executor.dispose();
      await sshd.stop();
      rmSync(tools, { recursive: true, force: true });
    },
  };
}
