/**
 * `kind = "ssh"` in overbrainer.toml (issue 36 part 3): the user's own machine. Its address is
 * read from OVERBRAINER_TARGETS__<NAME>__HOST only (user@host[:port]); `workdir` defaults to
 * `overbrainer`; `ssh_client` openssh|builtin as a runpod target's. Each bad input is an error at
 * its place naming what to write; a target without its address loads, and a command on it names
 * the variable to set. The known_hosts reading (plain, `[host]:port`, hashed, revoked) the
 * connection trusts.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseSshHost, type SshTargetConfig } from '../../src/core/config/types';
import { knownHostKeys } from '../../src/core/exec/userHost';
import { connectTarget } from '../../src/core/flow/host';
import { FlowError, type FlowDeps } from '../../src/core/flow';
import { errors, ok, one } from '../helpers/configFixture';

const SSH = `[training]
trainer = "command"
command = "python train.py"

[targets.box]
kind = "ssh"
`;
const HOST = 'OVERBRAINER_TARGETS__BOX__HOST';

function box(text: string, env: Record<string, string> = {}): SshTargetConfig {
  const target = ok(text, env).targets.box;
  assert.ok(target?.kind === 'ssh', 'an ssh target');
  return target;
}

describe('kind = "ssh" in overbrainer.toml', () => {
  it('takes its address from the environment, with its defaults', () => {
    assert.deepEqual(box(SSH, { [HOST]: 'me@gpu-box' }), {
      kind: 'ssh',
      name: 'box',
      host: { user: 'me', host: 'gpu-box', port: null },
      workdir: 'overbrainer',
      sshClient: 'openssh',
      venv: null,
    });
    const full = box(`${SSH}workdir = "/data/runs"\nssh_client = "builtin"\nvenv = "/opt/v"\n`, {
      [HOST]: 'me@10.0.0.5:2222',
    });
    assert.deepEqual(full.host, { user: 'me', host: '10.0.0.5', port: 2222 });
    assert.equal(full.workdir, '/data/runs');
    assert.equal(full.sshClient, 'builtin');
    assert.equal(full.venv, '/opt/v');
    assert.equal(
      box(SSH, { [HOST]: 'me@h', OVERBRAINER_SSH_CLIENT: 'builtin' }).sshClient,
      'builtin',
    );
  });

  it('loads without its address; a command on it names the variable to set', async () => {
    const target = box(SSH);
    assert.equal(target.host, null);
    const error = await connectTarget({ env: {} } as unknown as FlowDeps, target).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(error instanceof FlowError, String(error));
    assert.match(
      error.message,
      /target "box" has no address: OVERBRAINER_TARGETS__BOX__HOST is not set/,
    );
    assert.match(error.hint, /Set OVERBRAINER_TARGETS__BOX__HOST=user@host\[:port\]/);
  });

  it('refuses host in the file, a bad address, a bad workdir, and runpod keys, each naming what to write', () => {
    const inFile = one(`${SSH}host = "me@gpu-box"\n`);
    assert.match(inFile.message, /targets\.box\.host is read from the environment only/);
    assert.match(inFile.hint, /set OVERBRAINER_TARGETS__BOX__HOST instead/);
    for (const bad of ['gpu-box', 'me@', 'me@box:0', 'me@box:99999', 'me@box;rm -rf']) {
      const error = one(SSH, { [HOST]: bad });
      assert.equal(error.envVar, HOST, bad);
      assert.match(error.message, /must be user@host or user@host:port/, bad);
      assert.match(error.hint, /OVERBRAINER_TARGETS__BOX__HOST=me@gpu-box/, bad);
    }
    const workdir = one(`${SSH}workdir = "runs/$HOME"\n`);
    assert.match(workdir.message, /workdir must be a path on the machine/);
    assert.match(workdir.hint, /workdir = "overbrainer"/);
    const runpodKey = errors(`${SSH}gpu_types = ["NVIDIA A40"]\n`);
    assert.equal(runpodKey.length, 1);
    assert.match(runpodKey[0]!.message, /gpu_types only applies to kind = "runpod"/);
    const client = one(`${SSH}ssh_client = "putty"\n`);
    assert.match(client.message, /ssh_client must be "openssh" or "builtin"/);
  });

  it('parses user@host[:port] and nothing else', () => {
    assert.deepEqual(parseSshHost('a.b@[::1]:22'), { user: 'a.b', host: '::1', port: 22 });
    assert.equal(parseSshHost('@host'), null);
    assert.equal(parseSshHost('me@host:'), null);
    assert.equal(parseSshHost('me@ho st'), null);
  });
});

describe("the user's known_hosts", () => {
  const KEY = 'AAAAC3NzaC1lZDI1NTE5AAAAIGq4Xv6vYpKcS2Ix0x2y4cJ8dFq6Zl1o1p2m3n4b5v6c';
  const OTHER = 'AAAAC3NzaC1lZDI1NTE5AAAAIBbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb';
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-known-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  function hashed(name: string): string {
    const salt = Buffer.from('0123456789abcdefghij');
    const mac = createHmac('sha1', salt).update(name).digest('base64');
    return `|1|${salt.toString('base64')}|${mac}`;
  }

  it('finds a host by name, by [host]:port, by pattern and hashed; never another host; revoked left out', () => {
    const file = path.join(dir, 'known_hosts');
    fs.writeFileSync(
      file,
      [
        '# comment',
        `gpu-box,10.0.0.5 ssh-ed25519 ${KEY}`,
        `[10.0.0.6]:2222 ssh-ed25519 ${KEY}`,
        `*.lab,!bad.lab ssh-ed25519 ${KEY}`,
        `${hashed('[hidden]:2200')} ssh-ed25519 ${KEY}`,
        `other ssh-ed25519 ${OTHER}`,
        `@cert-authority * ssh-ed25519 ${OTHER}`,
        `@revoked gone ssh-ed25519 ${KEY}`,
        `gone ssh-ed25519 ${KEY}`,
      ].join('\n'),
    );
    const found = (name: string): number =>
      knownHostKeys([file, path.join(dir, 'absent')], name).length;
    assert.equal(found('gpu-box'), 1);
    assert.equal(found('10.0.0.5'), 1);
    assert.equal(found('[10.0.0.6]:2222'), 1);
    assert.equal(found('10.0.0.6'), 0, 'another port is another host');
    assert.equal(found('a.lab'), 1);
    assert.equal(found('bad.lab'), 0);
    assert.equal(found('[hidden]:2200'), 1);
    assert.equal(found('hidden'), 0);
    assert.equal(found('unknown'), 0, 'the CA line names no host key');
    assert.equal(found('gone'), 0, 'a revoked key is never trusted');
    assert.equal(knownHostKeys([file], 'other')[0]?.blob.toString('base64'), OTHER);
  });
});
