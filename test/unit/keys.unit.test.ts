import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { utils } from 'ssh2';
import {
  alias,
  checkEndpoint,
  forgetClientKey,
  generateRunKeys,
  KeysError,
  sshCommand,
  writeKnownHosts,
} from '../../src/core/pod/keys';

const ENDPOINT = { host: '203.0.113.7', port: 40122, user: 'root' };

/** The `ssh-ed25519 AAAA…` public key of an OpenSSH private key text, as ssh2 reads it. */
function publicOf(privateKey: string): string {
  const parsed = utils.parseKey(privateKey);
  if (parsed instanceof Error) throw parsed;
  const key = Array.isArray(parsed) ? parsed[0] : parsed;
  return `ssh-ed25519 ${key.getPublicSSH().toString('base64')}`;
}

describe('keys: names', () => {
  it('alias and the ssh command of a run', () => {
    assert.equal(alias('my_model_20260929-120000'), 'overbrainer-my_model_20260929-120000');
    assert.equal(sshCommand('r1'), 'overbrainer runs ssh r1');
    assert.throws(() => sshCommand('../x'), KeysError);
    for (const bad of ['../x', 'a b', '', 'a\nb']) {
      assert.throws(
        () => alias(bad),
        (error: unknown) => error instanceof KeysError && error.kind === 'invalid_alias',
      );
    }
  });
});

describe('keys: generateRunKeys', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-keys-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('writes the client key (0600) in a 700 dir and keeps the host key in memory only', () => {
    const sshDir = path.join(dir, 'runs', 'r1', 'ssh');
    const keys = generateRunKeys(sshDir, 'overbrainer-r1');
    assert.equal(fs.statSync(sshDir).mode & 0o777, 0o700);
    assert.deepEqual(fs.readdirSync(sshDir).sort(), ['id_ed25519', 'id_ed25519.pub']);
    assert.equal(keys.clientKeyPath, path.join(sshDir, 'id_ed25519'));
    assert.equal(fs.statSync(keys.clientKeyPath).mode & 0o777, 0o600);
    const clientPrivate = fs.readFileSync(keys.clientKeyPath, 'utf8');
    assert.match(
      clientPrivate,
      /^-----BEGIN OPENSSH PRIVATE KEY-----\n[\s\S]+-----END OPENSSH PRIVATE KEY-----\n$/,
    );
    assert.match(keys.clientPublic, /^ssh-ed25519 AAAA[A-Za-z0-9+/]+=* overbrainer-r1$/);
    assert.equal(
      fs.readFileSync(path.join(sshDir, 'id_ed25519.pub'), 'utf8'),
      `${keys.clientPublic}\n`,
    );
    assert.equal(publicOf(clientPrivate), keys.clientPublic.split(' ').slice(0, 2).join(' '));
    assert.match(keys.hostPublic, /^ssh-ed25519 AAAA[A-Za-z0-9+/]+=*$/);
    const hostPrivate = Buffer.from(keys.hostPrivateB64, 'base64').toString('utf8');
    assert.match(hostPrivate, /^-----BEGIN OPENSSH PRIVATE KEY-----\n[\s\S]+\n$/);
    assert.equal(publicOf(hostPrivate), keys.hostPublic);
    assert.notEqual(keys.hostPublic, publicOf(clientPrivate));
    // The host private key is nowhere on disk (lines 4-5 of the armor hold its private bytes).
    const secretLines = hostPrivate.split('\n').slice(3, 5);
    assert.equal(secretLines.length, 2);
    for (const name of fs.readdirSync(sshDir)) {
      const text = fs.readFileSync(path.join(sshDir, name), 'utf8');
      for (const line of secretLines) assert.ok(!text.includes(line), name);
    }
  });

  it('the host key decodes the way the pod bootstrap does it, and ssh-keygen agrees', function () {
    const keys = generateRunKeys(path.join(dir, 'ssh'), 'overbrainer-r1');
    const out = path.join(dir, 'decoded');
    const result = spawnSync(
      'sh',
      [
        '-c',
        'printf %s "$KEY" | base64 -d > "$OUT" && chmod 600 "$OUT" && ssh-keygen -y -f "$OUT"',
      ],
      {
        env: { ...process.env, KEY: keys.hostPrivateB64, OUT: out },
        encoding: 'utf8',
      },
    );
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout.trim().split(' ').slice(0, 2).join(' '), keys.hostPublic);
  });

  it('new keys replace old ones, mode included', () => {
    const sshDir = path.join(dir, 'ssh');
    const first = generateRunKeys(sshDir, 'overbrainer-r1');
    fs.chmodSync(first.clientKeyPath, 0o644);
    fs.chmodSync(sshDir, 0o755);
    const second = generateRunKeys(sshDir, 'overbrainer-r1');
    assert.notEqual(second.clientPublic, first.clientPublic);
    assert.equal(fs.statSync(second.clientKeyPath).mode & 0o777, 0o600);
    assert.equal(fs.statSync(sshDir).mode & 0o777, 0o700);
  });

  it('refuses an alias that is not a run alias', () => {
    assert.throws(
      () => generateRunKeys(path.join(dir, 'ssh'), 'evil\nHost *'),
      (error: unknown) => error instanceof KeysError && error.kind === 'invalid_alias',
    );
    assert.equal(fs.existsSync(path.join(dir, 'ssh')), false);
  });
});

describe('keys: known_hosts', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob keys %h-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('pins the key under the alias (0600 in a 700 dir) and removes any ssh config found there', () => {
    const sshDir = path.join(dir, 'ssh');
    fs.mkdirSync(sshDir, { mode: 0o755 });
    fs.writeFileSync(path.join(sshDir, 'config'), 'Host *\n  ProxyCommand sh -c id\n');
    fs.writeFileSync(path.join(sshDir, 'known_hosts'), '* ssh-ed25519 AAAAother\n', {
      mode: 0o644,
    });
    const file = writeKnownHosts(sshDir, 'overbrainer-r1', 'ssh-ed25519 AAAAkey comment');
    assert.equal(file, path.join(sshDir, 'known_hosts'));
    assert.equal(fs.readFileSync(file, 'utf8'), 'overbrainer-r1 ssh-ed25519 AAAAkey\n');
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.equal(fs.statSync(sshDir).mode & 0o777, 0o700);
    assert.deepEqual(fs.readdirSync(sshDir), ['known_hosts']);
  });

  it('refuses endpoints no pod has', () => {
    const bad = [
      { ...ENDPOINT, host: '1.2.3.4\n  ProxyCommand x' },
      { ...ENDPOINT, host: '' },
      { ...ENDPOINT, host: 'a b' },
      { ...ENDPOINT, host: '-oProxyCommand=x' },
      { ...ENDPOINT, host: '-v' },
      { ...ENDPOINT, user: 'root x' },
      { ...ENDPOINT, user: '' },
      { ...ENDPOINT, user: '-oProxyCommand=x' },
      { ...ENDPOINT, user: '-Fconfig' },
      { ...ENDPOINT, port: 0 },
      { ...ENDPOINT, port: 65536 },
      { ...ENDPOINT, port: 22.5 },
    ];
    for (const endpoint of bad) {
      assert.throws(
        () => checkEndpoint(endpoint),
        (error: unknown) =>
          error instanceof KeysError &&
          error.kind === 'invalid_endpoint' &&
          /Nothing was connected/.test(error.hint),
        JSON.stringify(endpoint),
      );
    }
    checkEndpoint({ host: '::1', port: 65535, user: 'a.b_c-d' });
  });

  it('refuses a host key that is not one ed25519 key', () => {
    for (const key of ['ssh-rsa AAAAkey', 'ssh-ed25519 AAAA\nx ssh-ed25519 BBBB', '']) {
      assert.throws(() => writeKnownHosts(path.join(dir, 'ssh'), 'overbrainer-r1', key), KeysError);
    }
    assert.equal(fs.existsSync(path.join(dir, 'ssh')), false);
  });
});

describe('keys: forgetClientKey', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-forget-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('removes only the private client key; absent counts as gone', () => {
    const sshDir = path.join(dir, 'ssh');
    generateRunKeys(sshDir, 'overbrainer-r1');
    writeKnownHosts(sshDir, 'overbrainer-r1', 'ssh-ed25519 AAAAkey');
    assert.equal(forgetClientKey(sshDir), true);
    assert.deepEqual(fs.readdirSync(sshDir).sort(), ['id_ed25519.pub', 'known_hosts']);
    assert.equal(forgetClientKey(sshDir), true);
    assert.equal(forgetClientKey(path.join(dir, 'never-made')), true);
  });

  it('says so when the key cannot be removed', () => {
    const notADir = path.join(dir, 'file');
    fs.writeFileSync(notADir, 'x');
    assert.equal(forgetClientKey(notADir), false);
  });
});
