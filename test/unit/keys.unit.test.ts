import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { utils } from 'ssh2';
import {
  alias,
  forgetClientKey,
  generateRunKeys,
  KeysError,
  sshCommand,
  sshConfigText,
  writeSshConfig,
} from '../../src/core/runpod/keys';

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
    assert.equal(sshCommand('r1'), 'ssh -F runs/r1/ssh/config overbrainer-r1');
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

describe('keys: ssh config', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob keys %h-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('pins the alias, ignores the agent, and quotes absolute paths with % doubled', () => {
    const sshDir = path.join(dir, 'ssh');
    const config = writeSshConfig(
      sshDir,
      'overbrainer-r1',
      ENDPOINT,
      'ssh-ed25519 AAAAkey comment',
    );
    const quoted = (name: string): string => `"${path.join(sshDir, name).replace(/%/g, '%%')}"`;
    assert.equal(config, path.join(sshDir, 'config'));
    assert.equal(
      fs.readFileSync(config, 'utf8'),
      [
        'Host overbrainer-r1',
        '  HostName 203.0.113.7',
        '  Port 40122',
        '  User root',
        `  IdentityFile ${quoted('id_ed25519')}`,
        '  IdentitiesOnly yes',
        '  IdentityAgent none',
        `  UserKnownHostsFile ${quoted('known_hosts')}`,
        '  GlobalKnownHostsFile /dev/null',
        '  HostKeyAlias overbrainer-r1',
        '  CheckHostIP no',
        '  StrictHostKeyChecking yes',
        '  UpdateHostKeys no',
        '  PasswordAuthentication no',
        '  KbdInteractiveAuthentication no',
        '',
      ].join('\n'),
    );
    assert.equal(
      fs.readFileSync(path.join(sshDir, 'known_hosts'), 'utf8'),
      'overbrainer-r1 ssh-ed25519 AAAAkey\n',
    );
    assert.equal(fs.statSync(config).mode & 0o777, 0o600);
    assert.equal(fs.statSync(sshDir).mode & 0o777, 0o700);
  });

  it('rewrites both files for a new endpoint (a pod reset changes its port)', () => {
    const sshDir = path.join(dir, 'ssh');
    writeSshConfig(sshDir, 'overbrainer-r1', ENDPOINT, 'ssh-ed25519 AAAAkey');
    writeSshConfig(
      sshDir,
      'overbrainer-r1',
      { ...ENDPOINT, port: 2222, host: 'ssh.example.net' },
      'ssh-ed25519 AAAAkey',
    );
    const text = fs.readFileSync(path.join(sshDir, 'config'), 'utf8');
    assert.match(text, /^ {2}HostName ssh\.example\.net$/m);
    assert.match(text, /^ {2}Port 2222$/m);
    assert.equal(
      fs.readFileSync(path.join(sshDir, 'known_hosts'), 'utf8'),
      'overbrainer-r1 ssh-ed25519 AAAAkey\n',
    );
  });

  it('refuses endpoints no pod has, before writing anything', () => {
    const sshDir = path.join(dir, 'ssh');
    const bad = [
      { ...ENDPOINT, host: '1.2.3.4\n  ProxyCommand x' },
      { ...ENDPOINT, host: '' },
      { ...ENDPOINT, host: 'a b' },
      { ...ENDPOINT, user: 'root x' },
      { ...ENDPOINT, user: '' },
      { ...ENDPOINT, port: 0 },
      { ...ENDPOINT, port: 65536 },
      { ...ENDPOINT, port: 22.5 },
    ];
    for (const endpoint of bad) {
      assert.throws(
        () => writeSshConfig(sshDir, 'overbrainer-r1', endpoint, 'ssh-ed25519 AAAAkey'),
        (error: unknown) =>
          error instanceof KeysError &&
          error.kind === 'invalid_endpoint' &&
          /Nothing was connected/.test(error.hint),
        JSON.stringify(endpoint),
      );
    }
    assert.equal(fs.existsSync(sshDir), false);
    assert.ok(
      writeSshConfig(
        sshDir,
        'overbrainer-r1',
        { host: '::1', port: 65535, user: 'a.b_c-d' },
        'ssh-ed25519 AAAAkey',
      ),
    );
  });

  it('refuses a host key that is not one ed25519 key, and paths an ssh config cannot hold', () => {
    for (const key of ['ssh-rsa AAAAkey', 'ssh-ed25519 AAAA\nx ssh-ed25519 BBBB', '']) {
      assert.throws(
        () => writeSshConfig(path.join(dir, 'ssh'), 'overbrainer-r1', ENDPOINT, key),
        KeysError,
      );
    }
    assert.throws(
      () => sshConfigText('overbrainer-r1', ENDPOINT, '/a"b/id', '/kh'),
      (error: unknown) =>
        error instanceof KeysError &&
        error.kind === 'invalid_path' &&
        /Move the workspace/.test(error.hint),
    );
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
    writeSshConfig(sshDir, 'overbrainer-r1', ENDPOINT, 'ssh-ed25519 AAAAkey');
    assert.equal(forgetClientKey(sshDir), true);
    assert.deepEqual(fs.readdirSync(sshDir).sort(), ['config', 'id_ed25519.pub', 'known_hosts']);
    assert.equal(forgetClientKey(sshDir), true);
    assert.equal(forgetClientKey(path.join(dir, 'never-made')), true);
  });

  it('says so when the key cannot be removed', () => {
    const notADir = path.join(dir, 'file');
    fs.writeFileSync(notADir, 'x');
    assert.equal(forgetClientKey(notADir), false);
  });
});
