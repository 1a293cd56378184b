/**
 * The real pod cmd (podCmd(): bash -c of the bootstrap with the watchdog embedded), run with
 * the create call's env from podEnv() in a temp root (the path overrides stand in for
 * /etc/overbrainer, /etc/ssh, /root/.ssh): it claims the run dir, installs the pinned host key
 * and the one authorized key, writes job.env without a secret, starts a real OpenSSH sshd (an
 * ssh2 client logs in with the pinned host key, and a wrong pin is refused), and execs the
 * watchdog in the same process. Refused claims and failed steps end in the watchdog's
 * `failed bootstrap: …` verdict and the pod's deletion, with no sshd started.
 */
import * as assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { Client } from 'ssh2';

import { podCmd, podEnv } from '../../src/core/pod/podScripts';
import { scaleTiming } from '../../src/core/timing';
import { startApiStub, type ApiStub, type StubBehaviour } from '../helpers/apiStub';
import { freePort } from '../emulator/ports';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function keygen(file: string, comment: string): { privateKey: string; publicKey: string } {
  const r = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', comment, '-f', file]);
  assert.equal(r.status, 0, String(r.stderr));
  return {
    privateKey: fs.readFileSync(file, 'utf8'),
    publicKey: fs.readFileSync(`${file}.pub`, 'utf8').trim(),
  };
}

function mode(file: string): number {
  return fs.statSync(file).mode & 0o777;
}

/** One pod's worth of directories, keys, stub and sshd config. */
class Pod {
  readonly root = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-bootstrap-'));
  readonly runId = `run_${randomBytes(3).toString('hex')}`;
  readonly workdir = path.join(this.root, 'workspace/overbrainer');
  readonly runDir = path.join(this.workdir, this.runId);
  readonly etc = path.join(this.root, 'etc/overbrainer');
  readonly sshEtc = path.join(this.root, 'etc/ssh');
  readonly rootSsh = path.join(this.root, 'root/.ssh');
  readonly refused = path.join(this.root, 'root/overbrainer-refused-run');
  readonly apiKey = `rpa_${randomBytes(16).toString('hex')}`;
  readonly podId = `pod${randomBytes(4).toString('hex')}`;
  readonly host: { privateKey: string; publicKey: string };
  readonly client: { privateKey: string; publicKey: string };
  readonly sshdPidFile = path.join(this.root, 'sshd.pid');
  port = 0;
  stub: ApiStub | undefined;
  child: ChildProcess | undefined;
  out = '';
  exitCode: number | null | undefined;
  private exited: Promise<void> | undefined;

  constructor() {
    fs.mkdirSync(path.join(this.root, 'keys'));
    this.host = keygen(path.join(this.root, 'keys/host'), `overbrainer-${this.runId}`);
    this.client = keygen(path.join(this.root, 'keys/client'), `overbrainer-${this.runId}`);
    fs.mkdirSync(this.sshEtc, { recursive: true });
  }

  hostKeyB64(): string {
    return Buffer.from(this.host.privateKey).toString('base64');
  }

  async start(options: { stub?: StubBehaviour; env?: Record<string, string> } = {}): Promise<void> {
    this.port = await freePort();
    const sshdConfig = path.join(this.root, 'sshd_config');
    fs.writeFileSync(
      sshdConfig,
      [
        `Port ${this.port}`,
        'ListenAddress 127.0.0.1',
        `HostKey ${this.sshEtc}/ssh_host_ed25519_key`,
        `AuthorizedKeysFile ${this.rootSsh}/authorized_keys`,
        `PidFile ${this.sshdPidFile}`,
        'PermitRootLogin prohibit-password',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'UsePAM no',
        // bash sources ~/.bashrc for ssh commands only at SHLVL < 2: the test host's rc (pyenv)
        // must not run in the pod's sessions (it costs seconds and can wait 60 s on a stale lock).
        'SetEnv SHLVL=1',
        // The temp root sits under the world-writable /tmp.
        'StrictModes no',
        'LogLevel ERROR',
        '',
      ].join('\n'),
    );
    fs.mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
    // The image's CUDA env script: adds to PATH (with a quote to escape) and LD_LIBRARY_PATH.
    const cudaEnv = path.join(this.root, 'cuda_env.sh');
    fs.writeFileSync(
      cudaEnv,
      'export PATH="/opt/it\'s cuda/bin:$PATH"\nexport LD_LIBRARY_PATH=/opt/cuda/lib64\necho noise\n',
    );
    this.stub = await startApiStub(options.stub);
    const env: Record<string, string> = {
      ...podEnv({
        runId: this.runId,
        workdir: this.workdir,
        deadlineUnixS: Math.floor(Date.now() / 1000) + 3600,
        bootGraceS: 600,
        retrieveGraceS: 600,
        keepPod: false,
        apiUrl: this.stub.baseUrl,
        authorizedKey: this.client.publicKey,
        claim: this.host.publicKey,
        version: '0.0.0-test',
        hostKey: this.hostKeyB64(),
        timing: scaleTiming(60, { watchdogProbeWaitS: 0 }),
      }),
      PATH: '/usr/bin:/bin:/usr/sbin:/sbin',
      RUNPOD_POD_ID: this.podId,
      RUNPOD_API_KEY: this.apiKey,
      OVERBRAINER_ETC_DIR: this.etc,
      OVERBRAINER_SSH_ETC: this.sshEtc,
      OVERBRAINER_ROOT_SSH: this.rootSsh,
      OVERBRAINER_REFUSED_DIR: this.refused,
      OVERBRAINER_CUDA_ENV: cudaEnv,
      OVERBRAINER_SSHD_START: `/usr/sbin/sshd -f ${sshdConfig}`,
      ...options.env,
    };
    const [command, ...args] = podCmd();
    const child = spawn(command!, args, { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    child.stdout!.on('data', (d: Buffer) => (this.out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (this.out += d.toString()));
    this.exited = new Promise((resolve) =>
      child.on('close', (code) => {
        this.exitCode = code;
        resolve();
      }),
    );
  }

  read(file: string): string {
    return fs.readFileSync(file, 'utf8');
  }

  async waitFor(pattern: RegExp, timeoutMs = 15_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!pattern.test(this.out)) {
      if (Date.now() > until) assert.fail(`no ${pattern} within ${timeoutMs} ms:\n${this.out}`);
      await sleep(25);
    }
  }

  async waitExit(timeoutMs = 15_000): Promise<number | null | undefined> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.exited,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    assert.notEqual(this.exitCode, undefined, `still running:\n${this.out}`);
    return this.exitCode;
  }

  sshdPid(): number | null {
    try {
      return Number(fs.readFileSync(this.sshdPidFile, 'utf8').trim());
    } catch {
      return null;
    }
  }

  /** No secret in what the pod logged or wrote outside its host key file. */
  assertNoSecrets(...files: string[]): void {
    const body = this.host.privateKey.split('\n')[1]!;
    for (const [name, text] of [['stdout', this.out], ...files.map((f) => [f, this.read(f)])]) {
      for (const secret of [this.apiKey, this.hostKeyB64(), body]) {
        assert.ok(!text!.includes(secret), `a secret in ${name}`);
      }
    }
  }

  async dispose(): Promise<void> {
    if (this.child?.pid !== undefined && this.exitCode === undefined) {
      try {
        process.kill(-this.child.pid, 'SIGKILL');
      } catch {
        // gone
      }
      await this.exited;
    }
    const sshd = this.sshdPid();
    if (sshd !== null) {
      try {
        process.kill(sshd, 'SIGTERM');
      } catch {
        // gone
      }
    }
    await this.stub?.close();
    fs.rmSync(this.root, { recursive: true, force: true });
  }
}

function sshExec(
  pod: Pod,
  command: string,
  pinnedPublicKey: string,
): Promise<{ stdout: string; code: number | null }> {
  const pinned = Buffer.from(pinnedPublicKey.split(' ')[1]!, 'base64');
  return new Promise((resolve, reject) => {
    const conn = new Client();
    conn
      .on('ready', () => {
        conn.exec(command, (error, stream) => {
          if (error) return reject(error);
          let stdout = '';
          stream.on('data', (d: Buffer) => (stdout += d.toString()));
          stream.stderr.on('data', () => undefined);
          stream.on('close', (code: number | null) => {
            conn.end();
            resolve({ stdout, code });
          });
        });
      })
      .on('error', reject)
      .connect({
        host: '127.0.0.1',
        port: pod.port,
        username: 'root',
        privateKey: pod.client.privateKey,
        hostVerifier: (key: Buffer) => key.equals(pinned),
        readyTimeout: 10_000,
      });
  });
}

describe('the pod cmd: bootstrap + watchdog (integration)', function () {
  this.timeout(40_000);
  const pods: Pod[] = [];
  const newPod = (): Pod => {
    const pod = new Pod();
    pods.push(pod);
    return pod;
  };

  afterEach(async function () {
    await Promise.all(pods.splice(0).map((p) => p.dispose()));
  });

  it('claims, installs the pinned host key and the one authorized key, writes job.env, starts sshd, execs the watchdog', async function () {
    const pod = newPod();
    // This run's dir from an earlier boot of the same pod: same claim owner, a stale verdict.
    fs.mkdirSync(path.join(pod.runDir, '.pod'), { recursive: true });
    fs.writeFileSync(path.join(pod.runDir, '.claim'), `${pod.host.publicKey}\n`);
    fs.writeFileSync(path.join(pod.runDir, '.pod/watchdog'), 'ready\n');
    // Keys the image shipped: all must go.
    fs.writeFileSync(path.join(pod.sshEtc, 'ssh_host_rsa_key'), 'old');
    fs.writeFileSync(path.join(pod.sshEtc, 'ssh_host_ecdsa_key.pub'), 'old');
    let open = (): void => undefined;
    const gate = new Promise<void>((resolve) => (open = resolve));
    await pod.start({ stub: { gate } });

    // The watchdog runs (its probe waits at the gate): the stale verdict is already gone.
    await pod.waitFor(/start overbrainer-watchdog\/0\.0\.0-test/);
    assert.ok(!fs.existsSync(path.join(pod.runDir, '.pod/watchdog')), 'stale verdict kept');
    open();
    await pod.waitFor(/verdict ready/);
    assert.equal(pod.read(path.join(pod.runDir, '.pod/watchdog')), 'ready\n');

    // exec: the pod's process is now the watchdog itself.
    const cmdline = fs.readFileSync(`/proc/${pod.child!.pid}/cmdline`, 'utf8');
    assert.equal(cmdline, `bash\0${pod.etc}/watchdog.sh\0`);
    assert.equal(mode(path.join(pod.etc, 'watchdog.sh')), 0o700);

    assert.equal(pod.read(path.join(pod.runDir, '.claim')), `${pod.host.publicKey}\n`);
    assert.deepEqual(fs.readdirSync(pod.sshEtc).sort(), [
      'ssh_host_ed25519_key',
      'ssh_host_ed25519_key.pub',
    ]);
    const hostKeyFile = path.join(pod.sshEtc, 'ssh_host_ed25519_key');
    assert.equal(pod.read(hostKeyFile), pod.host.privateKey);
    assert.equal(mode(hostKeyFile), 0o600);
    assert.equal(
      pod.read(`${hostKeyFile}.pub`).split(' ').slice(0, 2).join(' '),
      pod.host.publicKey.split(' ').slice(0, 2).join(' '),
    );
    assert.equal(pod.read(path.join(pod.rootSsh, 'authorized_keys')), `${pod.client.publicKey}\n`);
    assert.equal(mode(path.join(pod.rootSsh, 'authorized_keys')), 0o600);
    assert.equal(mode(pod.rootSsh), 0o700);

    const jobEnv = path.join(pod.etc, 'job.env');
    assert.equal(mode(jobEnv), 0o600);
    const sourced = spawnSync(
      'bash',
      ['-c', `. '${jobEnv}' && printf '%s\\n' "$PATH" "$LD_LIBRARY_PATH" "$HF_HOME"`],
      { env: {}, encoding: 'utf8' },
    );
    assert.equal(sourced.status, 0, sourced.stderr);
    assert.deepEqual(sourced.stdout.split('\n').slice(0, 3), [
      "/opt/it's cuda/bin:/usr/bin:/bin:/usr/sbin:/sbin",
      '/opt/cuda/lib64',
      `${pod.workdir}/.hf-cache`,
    ]);
    assert.deepEqual(
      pod
        .read(jobEnv)
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => l.split('=')[0]),
      ['export PATH', 'export LD_LIBRARY_PATH', 'export HF_HOME'],
    );

    const bootLog = path.join(pod.runDir, '.pod/bootstrap.log');
    const log = pod.read(bootLog);
    assert.match(log, /run dir already claimed by this pod/);
    assert.match(log, /^\S+ bootstrap overbrainer\/0\.0\.0-test run=/);
    assert.match(log, /exec watchdog$/m);
    assert.ok(!log.includes('noise'), 'the CUDA script output reached the log');
    pod.assertNoSecrets(bootLog, jobEnv, path.join(pod.runDir, '.pod/watchdog.log'));

    // sshd: up, without the Runpod key in its env; the pinned host key logs in.
    const sshd = pod.sshdPid();
    assert.ok(sshd !== null, 'sshd wrote no pid file');
    assert.ok(!fs.readFileSync(`/proc/${sshd}/environ`, 'latin1').includes(pod.apiKey));
    const session = await sshExec(pod, `cat '${pod.etc}/job.env' && echo ok`, pod.host.publicKey);
    assert.equal(session.code, 0);
    assert.match(session.stdout, /^export HF_HOME=.*\nok\n$/m);
    // Another pinned key is refused.
    const other = keygen(path.join(pod.root, 'keys/other'), 'other');
    await assert.rejects(sshExec(pod, 'true', other.publicKey));

    // The pod lives on in the watchdog: TERM stops it cleanly.
    assert.deepEqual(
      pod.stub!.requests.map((r) => r.method),
      ['GET'],
    );
    pod.child!.kill('SIGTERM');
    assert.equal(await pod.waitExit(), 0);
    assert.match(pod.out, /stopping\n$/);
  });

  it('refuses a run dir claimed by another pod: no sshd, verdict in the refused dir, pod deleted', async function () {
    const pod = newPod();
    fs.mkdirSync(pod.runDir, { recursive: true });
    const owner =
      'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherPodOtherPodOtherPodOtherPodOther other\n';
    fs.writeFileSync(path.join(pod.runDir, '.claim'), owner);
    await pod.start();
    assert.equal(await pod.waitExit(), 0);
    assert.equal(pod.read(path.join(pod.runDir, '.claim')), owner);
    assert.deepEqual(fs.readdirSync(pod.runDir), ['.claim'], 'wrote into the other pod’s dir');
    assert.equal(
      pod.read(path.join(pod.refused, '.pod/watchdog')),
      'failed bootstrap: run dir claimed by another pod\n',
    );
    assert.match(pod.read(path.join(pod.refused, '.pod/bootstrap.log')), /claimed by another pod/);
    assert.deepEqual(fs.readdirSync(pod.sshEtc), [], 'host key installed');
    assert.equal(pod.sshdPid(), null, 'sshd started');
    assert.deepEqual(
      pod.stub!.requests.map((r) => r.method),
      ['DELETE'],
    );
    assert.match(pod.out, /delete reason=bootstrap_failed/);
    pod.assertNoSecrets(path.join(pod.refused, '.pod/bootstrap.log'));
  });

  for (const [title, env, reason] of [
    [
      'a host key that is no key',
      { OVERBRAINER_HOST_KEY: Buffer.from('not a key').toString('base64') },
      'OVERBRAINER_HOST_KEY is not an OpenSSH private key',
    ],
    [
      'an unresolved host key secret',
      { OVERBRAINER_HOST_KEY: '{{ RUNPOD_SECRET_overbrainer_host_key_x }}' },
      'OVERBRAINER_HOST_KEY is an unresolved secret reference',
    ],
    ['sshd that does not start', { OVERBRAINER_SSHD_START: 'false' }, 'cannot start sshd (exit 1)'],
  ] as const) {
    it(`fails on ${title}: verdict "failed bootstrap: …", pod deleted, no sshd`, async function () {
      const pod = newPod();
      await pod.start({ env });
      assert.equal(await pod.waitExit(), 0);
      assert.equal(pod.read(path.join(pod.runDir, '.claim')), `${pod.host.publicKey}\n`);
      assert.equal(
        pod.read(path.join(pod.runDir, '.pod/watchdog')),
        `failed bootstrap: ${reason}\n`,
      );
      assert.equal(pod.read(path.join(pod.runDir, '.pod/bootstrap_failed')), `${reason}\n`);
      assert.equal(pod.sshdPid(), null, 'sshd started');
      assert.deepEqual(
        pod.stub!.requests.map((r) => r.method),
        ['DELETE'],
      );
      assert.match(pod.out, /delete reason=bootstrap_failed/);
      pod.assertNoSecrets(path.join(pod.runDir, '.pod/bootstrap.log'));
    });
  }

  it('fails after the keys are in place: sshd serves the verdict to the client, the watchdog deletes the pod only after OVERBRAINER_FAIL_GRACE', async function () {
    const pod = newPod();
    // The image's CUDA env script fails: job.env cannot be written (after host key and authorized_keys).
    const badCuda = path.join(pod.root, 'bad_cuda_env.sh');
    fs.writeFileSync(badCuda, 'exit 3\n');
    const startedMs = Date.now();
    await pod.start({ env: { OVERBRAINER_CUDA_ENV: badCuda, OVERBRAINER_FAIL_GRACE: '3' } });
    const reason = `cannot write ${pod.etc}/job.env`;
    await pod.waitFor(/sshd serves the verdict to the client; deleting in 3s unless it does/);
    // sshd runs, with the pinned host key, and the client's key reads the verdict.
    assert.ok(pod.sshdPid() !== null, 'sshd did not start');
    assert.match(pod.out, /sshd started so the client can read the verdict/);
    const verdict = await sshExec(pod, `cat ${pod.runDir}/.pod/watchdog`, pod.host.publicKey);
    assert.equal(verdict.stdout, `failed bootstrap: ${reason}\n`);
    assert.equal(await pod.waitExit(), 0);
    const [del] = pod.stub!.requests;
    assert.deepEqual(
      pod.stub!.requests.map((r) => r.method),
      ['DELETE'],
    );
    // The watchdog counts the grace in whole seconds of `date +%s` from its start: the delete
    // comes at least grace - 1 s after it (2.1 s when it started at x.9 s), never sooner.
    assert.ok(del!.atMs - startedMs >= 2_000, `deleted ${del!.atMs - startedMs} ms after start`);
    assert.match(pod.out, /delete reason=bootstrap_failed/);
    pod.assertNoSecrets(path.join(pod.runDir, '.pod/bootstrap.log'));
  });
});
