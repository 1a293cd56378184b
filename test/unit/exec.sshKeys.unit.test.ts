import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { utils } from 'ssh2';
import { generateEd25519KeyPair } from '../../src/core/exec/sshKeys';

function publicBlob(line: string): Buffer {
  return Buffer.from(line.split(' ')[1]!, 'base64');
}

describe('generateEd25519KeyPair', () => {
  it('writes keys OpenSSH and ssh2 read, with the comment', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ob-keys-'));
    try {
      const pair = generateEd25519KeyPair('overbrainer-run_20260929-120000');
      const path = join(dir, 'id_ed25519');
      writeFileSync(path, pair.privateKey, { mode: 0o600 });
      assert.equal(
        execFileSync('ssh-keygen', ['-y', '-f', path], { encoding: 'utf8' }).trim(),
        pair.publicKey,
      );
      assert.match(
        pair.publicKey,
        /^ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI[A-Za-z0-9+/]{43} overbrainer-run_20260929-120000$/,
      );
      const parsed = utils.parseKey(pair.privateKey);
      assert.ok(!(parsed instanceof Error));
      const key = Array.isArray(parsed) ? parsed[0]! : parsed;
      assert.equal(key.type, 'ssh-ed25519');
      assert.ok(key.getPublicSSH().equals(publicBlob(pair.publicKey)));
      // The private key signs what the public key verifies.
      const signature = key.sign(Buffer.from('hello'));
      assert.ok(!(signature instanceof Error));
      assert.equal(key.verify(Buffer.from('hello'), signature as Buffer), true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps a public key that starts with a zero byte at 32 bytes (the ssh2 generator drops it)', () => {
    let zeroLed = 0;
    for (let i = 0; i < 3000 && zeroLed < 3; i++) {
      const pair = generateEd25519KeyPair();
      const blob = publicBlob(pair.publicKey);
      assert.equal(blob.length, 51, 'string "ssh-ed25519" + string of 32 bytes');
      if (blob[19] !== 0) continue;
      zeroLed++;
      const dir = mkdtempSync(join(tmpdir(), 'ob-keys-'));
      try {
        writeFileSync(join(dir, 'k'), pair.privateKey, { mode: 0o600 });
        assert.equal(
          execFileSync('ssh-keygen', ['-y', '-f', join(dir, 'k')], { encoding: 'utf8' }).trim(),
          pair.publicKey,
        );
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    assert.ok(zeroLed > 0, 'a key with a leading zero byte was tried');
  });

  it('gives a private key node:crypto can use too', () => {
    const pair = generateEd25519KeyPair();
    const parsed = utils.parseKey(pair.privateKey);
    const key = Array.isArray(parsed) ? parsed[0]! : parsed;
    assert.ok(!(key instanceof Error));
    const privatePem = key.getPrivatePEM();
    const publicPem = key.getPublicPEM();
    const signature = sign(null, Buffer.from('x'), createPrivateKey(privatePem));
    assert.equal(verify(null, Buffer.from('x'), createPublicKey(publicPem), signature), true);
  });
});
