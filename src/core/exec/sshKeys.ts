/**
 * ed25519 key pairs in OpenSSH's formats, from node:crypto. ssh2's
 * `utils.generateKeyPairSync('ed25519')` (1.17.0) drops a leading zero byte
 * of the 32-byte public key (about one key in 256): OpenSSH then refuses the
 * private key ("error in libcrypto") and the public line is 31 bytes. This
 * encoder writes the fields at their fixed length.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';

export interface Ed25519KeyPair {
  /** `-----BEGIN OPENSSH PRIVATE KEY-----` (unencrypted), as ssh-keygen writes it. */
  privateKey: string;
  /** `ssh-ed25519 AAAA… comment` (no comment when empty). */
  publicKey: string;
}

function sshString(data: Buffer | string): Buffer {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([length, bytes]);
}

function uint32(value: number): Buffer {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(value);
  return out;
}

/** The wire blob of an ed25519 public key: string "ssh-ed25519", string pub32. */
export function ed25519PublicBlob(publicKey32: Buffer): Buffer {
  if (publicKey32.length !== 32) throw new RangeError('an ed25519 public key is 32 bytes');
  return Buffer.concat([sshString('ssh-ed25519'), sshString(publicKey32)]);
}

/** A fresh ed25519 key pair in OpenSSH's private key and authorized_keys formats. */
export function generateEd25519KeyPair(comment = ''): Ed25519KeyPair {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  // DER SPKI and PKCS#8 of ed25519 end with the raw 32-byte key and seed.
  const pub = publicKey.export({ type: 'spki', format: 'der' }).subarray(-32);
  const seed = privateKey.export({ type: 'pkcs8', format: 'der' }).subarray(-32);
  const blob = ed25519PublicBlob(pub);
  const check = randomBytes(4);
  let section = Buffer.concat([
    check,
    check,
    sshString('ssh-ed25519'),
    sshString(pub),
    sshString(Buffer.concat([seed, pub])),
    sshString(comment),
  ]);
  const padding: number[] = [];
  for (let i = 1; (section.length + padding.length) % 8 !== 0; i++) padding.push(i);
  section = Buffer.concat([section, Buffer.from(padding)]);
  const body = Buffer.concat([
    Buffer.from('openssh-key-v1\0', 'latin1'),
    sshString('none'),
    sshString('none'),
    sshString(''),
    uint32(1),
    sshString(blob),
    sshString(section),
  ]);
  const lines = body.toString('base64').match(/.{1,70}/g) ?? [];
  return {
    privateKey: `-----BEGIN OPENSSH PRIVATE KEY-----\n${lines.join('\n')}\n-----END OPENSSH PRIVATE KEY-----\n`,
    publicKey: `ssh-ed25519 ${blob.toString('base64')}${comment ? ` ${comment}` : ''}`,
  };
}
