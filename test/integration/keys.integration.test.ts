/**
 * The per-run keys and pinned known_hosts against the real OpenSSH: a real sshd
 * serving the generated host key (as a pod's bootstrap installs it) and the
 * system `ssh -F none …` with the options the product hands out (opensshArgs).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  alias,
  CLIENT_KEY,
  forgetClientKey,
  generateRunKeys,
  writeKnownHosts,
  type SshEndpoint,
} from '../../src/core/pod/keys';
import { opensshArgs } from '../../src/core/pod/sshAccess';
import { RunStore } from '../../src/core/runs';
import { systemClock } from '../../src/core/clock';
import { freePort } from '../emulator/ports';
import { spawnAsUser, type ShellRun } from '../helpers/userMachine';

const SSHD = '/usr/sbin/sshd';

interface Daemon {
  port: number;
  log: () => string;
  stop: () => Promise<void>;
}

/**
 * Starts `sshd -D -e` on 127.0.0.1 with `hostKeyB64` (the run's in-memory host
 * key, decoded as the bootstrap does) and `authorizedKey`. Retries on a port
 * taken between choosing and binding it.
 */
async function startSshd(dir: string, hostKeyB64: string, authorizedKey: string): Promise<Daemon> {
  fs.mkdirSync('/run/sshd', { recursive: true, mode: 0o755 }); // privilege separation directory
  const hostKey = path.join(dir, 'ssh_host_ed25519_key');
  fs.writeFileSync(hostKey, Buffer.from(hostKeyB64, 'base64'), { mode: 0o600 });
  const authorized = path.join(dir, 'authorized_keys');
  fs.writeFileSync(authorized, `${authorizedKey}\n`, { mode: 0o600 });
  for (let tries = 0; ; tries++) {
    const port = await freePort();
    const config = path.join(dir, 'sshd_config');
    fs.writeFileSync(
      config,
      [
        'ListenAddress 127.0.0.1',
        `HostKey ${hostKey}`,
        `AuthorizedKeysFile ${authorized}`,
        'PidFile none',
        'StrictModes no',
        'UsePAM no',
        'PubkeyAuthentication yes',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'PermitRootLogin prohibit-password',
        `AllowUsers ${os.userInfo().username}`,
        'LogLevel VERBOSE',
        'UseDNS no',
        // bash sources ~/.bashrc for ssh commands only at SHLVL < 2; this machine's .bashrc is slow.
        'SetEnv SHLVL=1',
        '',
      ].join('\n'),
    );
    const child: ChildProcess = spawn(SSHD, ['-D', '-e', '-f', config, '-p', String(port)], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    child.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString()));
    const listening = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 10_000);
      const check = (): void => {
        if (log.includes(`Server listening on 127.0.0.1 port ${port}`)) {
          clearTimeout(timer);
          resolve(true);
        }
      };
      child.stderr?.on('data', check);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve(false);
      });
    });
    const stop = async (): Promise<void> => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await gone;
    };
    if (listening) return { port, log: () => log, stop };
    await stop();
    if (tries >= 2 || !/Address already in use/.test(log))
      throw new Error(`sshd did not start:\n${log}`);
  }
}

/** The system ssh with the product's options for the run's files, with a throwaway HOME. */
async function ssh(
  workspace: string,
  home: string,
  runId: string,
  command: string,
): Promise<ShellRun> {
  const sshDir = path.join(workspace, 'runs', runId, 'ssh');
  const endpoint = JSON.parse(fs.readFileSync(path.join(sshDir, 'endpoint.json'), 'utf8')) as {
    endpoint: SshEndpoint;
    pinned: string;
  };
  const args = opensshArgs({
    runId,
    alias: alias(runId),
    endpoint: endpoint.endpoint,
    keyFile: path.join(sshDir, CLIENT_KEY),
    knownHostsFile: path.join(sshDir, 'known_hosts'),
    hostPublicKey: endpoint.pinned,
  });
  const options = ['-o', 'BatchMode=yes', '-o', 'ConnectTimeout=10'];
  return spawnAsUser('ssh', [...args.slice(0, -1), ...options, ...args.slice(-1), command], {
    cwd: workspace,
    env: { HOME: home },
  });
}

describe('keys: the run key and pinned known_hosts against a real sshd', function () {
  this.timeout(60_000);
  let dir: string;
  let home: string;
  let store: RunStore;
  const daemons: Daemon[] = [];

  before(function () {
    if (!fs.existsSync(SSHD)) {
      assert.fail(`${SSHD} is missing: install openssh-server (\`npm run test:integration\` does)`);
    }
  });

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-keys-it-'));
    home = path.join(dir, 'home');
    fs.mkdirSync(home);
    store = new RunStore(path.join(dir, 'runs'), systemClock);
  });

  afterEach(async () => {
    for (const daemon of daemons.splice(0)) await daemon.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /**
   * The keys of `runId` and an sshd holding its host key and authorizing its client key; the
   * run's ssh config points at it and pins `pinned` (default: the daemon's own host key).
   */
  async function pinnedDaemon(
    runId: string,
    pinned?: string,
  ): Promise<{ sshDir: string; daemon: Daemon }> {
    const sshDir = store.sshDir(runId);
    const keys = generateRunKeys(sshDir, alias(runId));
    const daemon = await startSshd(dir, keys.hostPrivateB64, keys.clientPublic);
    daemons.push(daemon);
    const endpoint = { host: '127.0.0.1', port: daemon.port, user: os.userInfo().username };
    writeKnownHosts(sshDir, alias(runId), pinned ?? keys.hostPublic);
    // Where the test's ssh finds the endpoint (the product reads it from pod.json).
    fs.writeFileSync(
      path.join(sshDir, 'endpoint.json'),
      JSON.stringify({ endpoint, pinned: pinned ?? keys.hostPublic }),
    );
    return { sshDir, daemon };
  }

  it('ssh -F none with the run key and known_hosts logs in with the pinned host key', async () => {
    const runId = 'tiny_20260929-120000';
    const { daemon } = await pinnedDaemon(runId);

    const ok = await ssh(dir, home, runId, 'true');
    assert.equal(ok.code, 0, `${ok.stderr}\n--- sshd ---\n${daemon.log()}`);
    const echo = await ssh(dir, home, runId, 'echo "run $((40 + 2))"');
    assert.equal(echo.code, 0, echo.stderr);
    assert.equal(echo.stdout, 'run 42\n');
    // Nothing was learnt outside the run's own files.
    assert.equal(fs.existsSync(path.join(home, '.ssh')), false);
    assert.match(daemon.log(), /Accepted publickey/);
  });

  it('a different pinned host key is refused before anything runs', async () => {
    const runId = 'tiny_20260929-120001';
    const impostor = generateRunKeys(path.join(dir, 'other-ssh'), alias(runId));
    const { sshDir, daemon } = await pinnedDaemon(runId, impostor.hostPublic);

    const marker = path.join(dir, 'ran');
    const refused = await ssh(dir, home, runId, `touch ${marker}`);
    assert.equal(refused.code, 255);
    assert.match(
      refused.stderr,
      /REMOTE HOST IDENTIFICATION HAS CHANGED|Host key verification failed/,
    );
    assert.equal(fs.existsSync(marker), false);
    assert.doesNotMatch(daemon.log(), /Accepted publickey/);
    // The pinned line stays as it was: UpdateHostKeys no, StrictHostKeyChecking yes.
    assert.equal(
      fs.readFileSync(path.join(sshDir, 'known_hosts'), 'utf8'),
      `${alias(runId)} ${impostor.hostPublic}\n`,
    );
  });

  it('once the client key is forgotten, the pod no longer lets this client in', async () => {
    const runId = 'tiny_20260929-120002';
    const { sshDir } = await pinnedDaemon(runId);
    assert.equal((await ssh(dir, home, runId, 'true')).code, 0);

    assert.equal(forgetClientKey(sshDir), true);
    const denied = await ssh(dir, home, runId, 'true');
    assert.equal(denied.code, 255);
    assert.match(denied.stderr, /Permission denied/);
  });
});
