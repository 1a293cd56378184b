/**
 * SshExecutor against a real OpenSSH sshd on loopback: exec, stdin, exit
 * codes, streaming and aborts (the remote process really ends), SFTP reads
 * and atomic writes, tar uploads, the pinned host key (nothing sent to a
 * wrong one, even on reconnect), auth failures, keepalive on a dead link and
 * reconnects after sshd restarts.
 */
import assert from 'node:assert/strict';
import {
  appendFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { systemClock, type Clock } from '../../src/core/clock';
import { ExecError } from '../../src/core/exec/executor';
import { SshExecutor, type SshExecutorOptions } from '../../src/core/exec/ssh';
import { openShell } from '../../src/core/exec/sshShell';
import { scaleTiming } from '../../src/core/timing';
import {
  executorOptions,
  generateEd25519,
  processAlive,
  startSshd,
  startTcpProxy,
  type Sshd,
} from '../helpers/sshd';
import { closedPort } from '../helpers/apiStub';
import { rejects, waitFor } from '../helpers/execAsserts';
import { makeTempDir, removeTempDir } from '../helpers/tempDir';

const TIMING = scaleTiming(1, { connectTimeoutMs: 10_000 });

function options(sshd: Sshd, overrides: Partial<SshExecutorOptions> = {}): SshExecutorOptions {
  return executorOptions(sshd, { timing: TIMING, ...overrides });
}

/** Authentication attempts sshd logged (a refused host key must leave none). */
function authLines(sshd: Sshd): string[] {
  return sshd
    .log()
    .split('\n')
    .filter((line) => /publickey|Accepted|Failed|authenticat/i.test(line));
}

describe('SshExecutor against a real sshd', function () {
  this.timeout(60_000);
  let sshd: Sshd;
  let executor: SshExecutor;
  let local: string;

  before(async () => {
    sshd = await startSshd();
    executor = await SshExecutor.connect(options(sshd));
  });
  after(async () => {
    executor?.dispose();
    await sshd?.stop();
  });
  beforeEach(() => {
    local = makeTempDir('ob-exec-');
  });
  afterEach(() => removeTempDir(local));

  describe('exec', () => {
    it('gives stdout, stderr and the exit code', async () => {
      const result = await executor.exec('echo out; echo err >&2; exit 7');
      assert.equal(result.code, 7);
      assert.equal(result.signal, null);
      assert.equal(result.stdout.toString(), 'out\n');
      assert.equal(result.stderr.toString(), 'err\n');
    });

    it('runs under sh -c with the quoting intact', async () => {
      const result = await executor.exec(`printf '%s|' "a b" 'c'"'"'d' $((6*7))`);
      assert.equal(result.stdout.toString(), "a b|c'd|42|");
    });

    it('passes stdin and keeps it out of every process argument', async () => {
      const secret = `hf_${Math.random().toString(36).slice(2)}SECRET`;
      const result = await executor.exec(
        // While the command runs, look at every argv on the machine for the secret (with
        // builtins only: a grep would carry it in its own argv).
        `IFS= read -r TOKEN; leaked=clean; ` +
          `for f in /proc/[0-9]*/cmdline; do c=$(tr '\\0' ' ' < "$f" 2>/dev/null) || continue; ` +
          `case "$c" in *"$TOKEN"*) leaked=leaked;; esac; done; echo "$leaked"; ` +
          `printf '%s' "$TOKEN" | wc -c`,
        { stdin: `${secret}\n` },
      );
      assert.equal(result.stdout.toString(), `clean\n${secret.length}\n`);
    });

    it('reports a command killed by a signal', async () => {
      const result = await executor.exec('kill -KILL $$');
      assert.equal(result.code, null);
      assert.equal(result.signal, 'SIGKILL');
    });

    it('caps the output it keeps and says so', async () => {
      const result = await executor.exec('head -c 100000 /dev/zero', { maxOutputBytes: 1000 });
      assert.equal(result.stdout.length, 1000);
      assert.equal(result.truncated, true);
      assert.equal(result.code, 0);
    });

    it('times out, killing the remote command', async () => {
      const pidFile = join(sshd.root, `timeout-${Date.now()}.pid`);
      const started = Date.now();
      await rejects(
        executor.exec(`echo $$ > ${pidFile}; sleep 30; echo never`, { timeoutMs: 500 }),
        'timeout',
      );
      // Before the command could have ended by itself (no tighter wall bound on a loaded machine).
      assert.ok(Date.now() - started < 30_000);
      const pid = Number(readFileSync(pidFile, 'utf8'));
      await waitFor(() => !processAlive(pid));
    });

    it('runs more commands at once than sshd has sessions (MaxSessions 10)', async () => {
      const results = await Promise.all(
        Array.from({ length: 24 }, (_, i) => executor.exec(`sleep 0.2; echo ${i}`)),
      );
      assert.deepEqual(
        results.map((r) => r.stdout.toString().trim()),
        Array.from({ length: 24 }, (_, i) => String(i)),
      );
    });
    it('asks again for a channel the server refused (its sessions outnumber ours while it closes them)', async () => {
      // sshd allows 2 sessions here and we open up to 4 channels at once: it refuses the others
      // until some close, as it did in CI when its count of closing sessions lagged behind ours.
      const tight = await startSshd({ extraConfig: ['MaxSessions 2'] });
      const client = await SshExecutor.connect({ ...options(tight), maxChannels: 4 });
      try {
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) => client.exec(`sleep 0.3; echo ${i}`)),
        );
        assert.deepEqual(
          results.map((r) => r.stdout.toString().trim()),
          Array.from({ length: 8 }, (_, i) => String(i)),
        );
      } finally {
        client.dispose();
        await tight.stop();
      }
    });
  });

  describe('stream', () => {
    it('hands output over as it arrives; an abort kills the remote process group', async () => {
      const log = join(sshd.root, `metrics-${Date.now()}.jsonl`);
      const pids = join(sshd.root, `stream-${Date.now()}.pids`);
      writeFileSync(log, '{"step":1}\n');
      const controller = new AbortController();
      let received = '';
      // A child of the streamed shell too: the whole group must go, not just the leader.
      const streaming = executor.stream(
        `sleep 300 & echo "$$ $!" > ${pids}; exec tail -c +1 -f ${log}`,
        { signal: controller.signal, onStdout: (chunk) => (received += chunk.toString()) },
      );
      await waitFor(() => received === '{"step":1}\n');
      // Appended, as a trainer writes: rewriting the file truncates it first, and a tail that
      // looks in between reads it again from the start (the flake CI once met).
      appendFileSync(log, '{"step":2}\n');
      await waitFor(() => received === '{"step":1}\n{"step":2}\n');
      const [tailPid, sleepPid] = readFileSync(pids, 'utf8').trim().split(' ').map(Number);
      assert.ok(processAlive(tailPid!) && processAlive(sleepPid!));
      controller.abort();
      await rejects(streaming, 'aborted');
      // The kill is confirmed before the promise settles.
      assert.equal(processAlive(tailPid!), false, 'tail is gone');
      assert.equal(processAlive(sleepPid!), false, 'its sibling in the group is gone');
      // The executor is still usable.
      assert.equal((await executor.exec('echo ok')).stdout.toString(), 'ok\n');
    });

    it('resolves with the exit code when the command ends by itself', async () => {
      const chunks: string[] = [];
      const result = await executor.stream('echo a; sleep 0.1; echo b; exit 3', {
        onStdout: (chunk) => chunks.push(chunk.toString()),
      });
      assert.equal(chunks.join(''), 'a\nb\n');
      assert.equal(result.code, 3);
      assert.equal(result.stdout.length, 0);
    });
  });

  describe('SFTP', () => {
    it('readRange reads bounded ranges and says not_found', async () => {
      const path = join(sshd.root, 'range.bin');
      const data = Buffer.from(Array.from({ length: 300_000 }, (_, i) => i % 251));
      writeFileSync(path, data);
      assert.ok((await executor.readRange(path, 0, 10)).equals(data.subarray(0, 10)));
      assert.ok(
        (await executor.readRange(path, 1000, 200_000)).equals(data.subarray(1000, 201_000)),
      );
      assert.ok((await executor.readRange(path, 299_990, 1_000)).equals(data.subarray(299_990)));
      assert.equal((await executor.readRange(path, 300_000, 1_000)).length, 0);
      await rejects(executor.readRange(join(sshd.root, 'missing'), 0, 10), 'not_found');
    });

    it('writeFileAtomic creates directories, replaces atomically and leaves no temp file', async () => {
      const dir = join(sshd.root, 'atomic', 'deep', 'er');
      const path = join(dir, '.pod', 'lease');
      await executor.writeFileAtomic(path, 'first');
      assert.equal(readFileSync(path, 'utf8'), 'first');
      const big = Buffer.alloc(200_000, 'x');
      await executor.writeFileAtomic(path, big);
      assert.ok(readFileSync(path).equals(big));
      assert.deepEqual(readdirSync(join(dir, '.pod')), ['lease']);
    });
  });

  describe('upload', () => {
    it('unpacks a tar of the directory minus excludes, odd names intact, links not followed', async () => {
      const src = join(local, 'run');
      const names = [
        'axolotl.yaml',
        'data/train.jsonl',
        'data/with space.jsonl',
        'data/new\nline.jsonl',
        'data/ünïcødé-数据.jsonl',
        `data/${'deep/'.repeat(40)}file.txt`,
        `data/${'n'.repeat(200)}`,
      ];
      for (const name of names) {
        mkdirSync(join(src, name, '..'), { recursive: true });
        writeFileSync(join(src, name), `# ${name}\n`);
      }
      mkdirSync(join(src, 'ssh'), { recursive: true });
      writeFileSync(join(src, 'ssh', 'id_ed25519'), 'PRIVATE');
      writeFileSync(join(src, 'pod.json'), '{}');
      mkdirSync(join(src, '.pod'));
      writeFileSync(join(src, '.pod', 'pod.log'), 'log');
      writeFileSync(join(local, 'outside'), 'outside the run');
      symlinkSync(join(local, 'outside'), join(src, 'data', 'link'));
      mkdirSync(join(src, 'empty'));
      const warnings: string[] = [];
      const remote = join(sshd.root, 'uploads', `run-${Date.now()}`);
      await executor.upload(src, remote, {
        exclude: ['ssh', 'pod.json', '.pod'],
        onWarning: (warning) => warnings.push(warning),
      });
      for (const name of names) {
        assert.equal(readFileSync(join(remote, name), 'utf8'), `# ${name}\n`, JSON.stringify(name));
      }
      assert.equal(existsSync(join(remote, 'ssh')), false);
      assert.equal(existsSync(join(remote, 'pod.json')), false);
      assert.equal(existsSync(join(remote, '.pod')), false);
      assert.equal(existsSync(join(remote, 'data', 'link')), false);
      assert.ok(statSync(join(remote, 'empty')).isDirectory());
      assert.deepEqual(warnings, [
        'not uploaded: data/link is a symlink (links are never followed)',
      ]);
    });

    it('reports a failing unpack', async () => {
      const src = join(local, 'run');
      mkdirSync(src);
      writeFileSync(join(src, 'a'), 'a');
      const blocker = join(sshd.root, `blocker-${Date.now()}`);
      writeFileSync(blocker, 'a file where the directory should be');
      await rejects(executor.upload(src, join(blocker, 'run'), { exclude: [] }), 'io');
      const missing = await rejects(
        executor.upload(join(local, 'no-such-dir'), join(sshd.root, 'never'), { exclude: [] }),
        'io',
      );
      assert.match(missing.message, /could not read its input: ENOENT/);
    });
  });

  describe('download', () => {
    it('copies files with their hashes and never writes through a local symlink', async () => {
      const remote = join(sshd.root, `dl-${Date.now()}`);
      mkdirSync(join(remote, 'output'), { recursive: true });
      writeFileSync(join(remote, 'output', 'a.bin'), Buffer.alloc(5_000_000, 1));
      writeFileSync(join(remote, 'output', 'b.txt'), 'b');
      const files: { file: string; sha256?: string; bytes?: number }[] = [];
      await executor.download(
        remote,
        join(local, 'done'),
        ['output/a.bin', 'output/b.txt', 'output/gone'],
        {
          onFile: (file) => files.push(file),
        },
      );
      assert.equal(readFileSync(join(local, 'done', 'output', 'a.bin')).length, 5_000_000);
      assert.deepEqual(files.map((f) => f.file).sort(), [
        'output/a.bin',
        'output/b.txt',
        'output/gone',
      ]);
      assert.equal(
        files.find((f) => f.file === 'output/b.txt')?.sha256,
        '3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d',
      );
      assert.deepEqual(
        files.find((f) => f.file === 'output/gone'),
        { file: 'output/gone', missing: true },
      );

      // A symlink planted where a directory goes is refused, and nothing lands behind it.
      const target = join(local, 'elsewhere');
      mkdirSync(target);
      mkdirSync(join(local, 'done2'));
      symlinkSync(target, join(local, 'done2', 'output'));
      await rejects(executor.download(remote, join(local, 'done2'), ['output/b.txt']), 'io');
      assert.deepEqual(readdirSync(target), []);
      assert.ok(lstatSync(join(local, 'done2', 'output')).isSymbolicLink());
    });
  });

  describe('host key and authentication', () => {
    it('refuses a host whose key is not the pinned one before authenticating: nothing sent', async () => {
      const before = authLines(sshd).length;
      const wrong = generateEd25519().publicKey;
      const error = await rejects(
        SshExecutor.connect(options(sshd, { hostPublicKey: wrong })),
        'host_key',
      );
      assert.match(error.message, /before anything was sent/);
      assert.match(error.message, /SHA256:/);
      assert.equal(authLines(sshd).length, before, 'no authentication was attempted');
    });

    it('never reconnects to a host with a different key: the marker command never runs', async () => {
      const other = await startSshd();
      const pinned = await SshExecutor.connect(options(other));
      try {
        assert.equal((await pinned.exec('echo first')).stdout.toString(), 'first\n');
        // The pod is replaced on the same port by a machine with another host key.
        const port = other.port;
        await other.kill();
        const impostor = await startSshd({ port, root: other.root });
        try {
          const marker = join(other.root, 'marker');
          const authBefore = authLines(impostor).length;
          await rejects(pinned.exec(`touch ${marker}`), 'host_key');
          await rejects(pinned.writeFileAtomic(marker, 'x'), 'host_key');
          assert.equal(existsSync(marker), false, 'the marker command never ran');
          assert.equal(authLines(impostor).length, authBefore, 'no authentication was attempted');
        } finally {
          await impostor.stop();
        }
      } finally {
        pinned.dispose();
        await other.stop();
      }
    });

    it('says auth when the key is refused', async () => {
      const error = await rejects(
        SshExecutor.connect(options(sshd, { privateKey: generateEd25519().privateKey })),
        'auth',
      );
      assert.match(error.message, /refused this run's SSH key/);
    });

    it('rejects a pinned key that is not ssh-ed25519', async () => {
      await rejects(
        SshExecutor.connect(options(sshd, { hostPublicKey: 'ssh-rsa AAAAB3NzaC1yc2E' })),
        'host_key',
      );
    });

    it('says connection when nothing listens and timeout when nothing answers', async () => {
      const port = await closedPort();
      await rejects(SshExecutor.connect(options(sshd, { port })), 'connection');
      const proxy = await startTcpProxy(sshd.port);
      try {
        proxy.blackhole();
        // Only the connect limit ends a connect to a blackhole (else it hangs): the kind says so.
        await rejects(
          SshExecutor.connect(
            options(sshd, { port: proxy.port, timing: scaleTiming(1, { connectTimeoutMs: 800 }) }),
          ),
          'timeout',
        );
      } finally {
        await proxy.close();
      }
    });

    it("the terminal's own client waits for a connect as long as every other connection (at least 2 s)", async () => {
      const proxy = await startTcpProxy(sshd.port);
      try {
        proxy.blackhole();
        // A scaled timing's 800 ms, too short on a loaded machine for a pod's handshake: the same
        // floor as SshExecutor's (a loaded CI's terminal gave up after 1,250 ms).
        await assert.rejects(
          openShell({
            host: sshd.host,
            port: proxy.port,
            username: sshd.user,
            privateKey: sshd.clientPrivateKey,
            hostPublicKey: sshd.hostPublicKey,
            connectTimeoutMs: 800,
            pty: null,
            onOutput: () => undefined,
          }),
          (error: unknown) => {
            assert.ok(error instanceof ExecError && error.kind === 'timeout', String(error));
            assert.match(error.message, /gave no SSH answer within 2000 ms/);
            return true;
          },
        );
      } finally {
        await proxy.close();
      }
    });
  });

  describe('dropped connections', () => {
    it('notices a dead link by keepalive in seconds, then reconnects once it is back', async () => {
      const proxy = await startTcpProxy(sshd.port);
      const viaProxy = await SshExecutor.connect(
        options(sshd, { port: proxy.port, keepaliveIntervalMs: 300, keepaliveCountMax: 2 }),
      );
      try {
        const running = viaProxy.exec('sleep 30');
        await new Promise((resolve) => setTimeout(resolve, 200));
        proxy.blackhole();
        const started = Date.now();
        await rejects(running, 'connection');
        // Nothing comes through a blackhole: only the keepalive can end this, and before the
        // remote `sleep 30` would have (no tighter wall bound on a loaded machine).
        assert.ok(Date.now() - started < 30_000, `noticed after ${Date.now() - started} ms`);
        proxy.cut();
        proxy.heal();
        assert.equal((await viaProxy.exec('echo back')).stdout.toString(), 'back\n');
      } finally {
        viaProxy.dispose();
        await proxy.close();
      }
    });

    it('reconnects transparently after sshd restarts on the same port', async () => {
      const restarting = await startSshd();
      const pinned = await SshExecutor.connect(options(restarting));
      try {
        assert.equal((await pinned.exec('echo before')).stdout.toString(), 'before\n');
        assert.equal((await pinned.readRange('/proc/self/status', 0, 4)).toString(), 'Name');
        await restarting.restart();
        assert.equal((await pinned.exec('echo after')).stdout.toString(), 'after\n');
        assert.equal((await pinned.readRange('/proc/self/status', 0, 4)).toString(), 'Name');
      } finally {
        pinned.dispose();
        await restarting.stop();
      }
    });

    it('fails what was in flight with connection and kills a cut-off stream after reconnecting', async () => {
      const pidFile = join(sshd.root, `orphan-${Date.now()}.pid`);
      const dropping = await SshExecutor.connect(options(sshd));
      try {
        let seen = '';
        const streaming = dropping.stream(`echo $$ > ${pidFile}; echo started; exec sleep 300`, {
          onStdout: (chunk) => (seen += chunk.toString()),
        });
        // The client learns the command's process group from the first thing it prints; only once
        // a line printed after it has arrived is that group known here (the pid file on disk says
        // nothing about what sshd has forwarded yet: a drop before that leaves nothing to kill).
        await waitFor(() => seen.includes('started'));
        const pid = Number(readFileSync(pidFile, 'utf8'));
        const failed = rejects(streaming, 'connection');
        // Kill only the sshd processes of the sessions: the remote sleep survives them.
        await sshd.dropSessions();
        await failed;
        assert.equal(processAlive(pid), true, 'the cut-off command lingers on the pod');
        await dropping.exec('true');
        await waitFor(() => !processAlive(pid));
      } finally {
        dropping.dispose();
      }
    });

    it('dispose rejects what is in flight with aborted', async () => {
      const disposing = await SshExecutor.connect(options(sshd));
      const running = disposing.exec('sleep 30');
      await new Promise((resolve) => setTimeout(resolve, 200));
      disposing.dispose();
      await rejects(running, 'aborted');
      await rejects(disposing.exec('true'), 'aborted');
    });
  });
});

describe("A download's receive window (a real sshd counting the window adjusts it got)", function () {
  this.timeout(120_000);
  const SIZE = 64 * 1024 * 1024;
  let sshd: Sshd;
  before(async () => (sshd = await startSshd({ extraConfig: ['LogLevel DEBUG2'] })));
  after(() => sshd.stop());

  const logged = (pattern: RegExp): number =>
    sshd
      .log()
      .split('\n')
      .filter((line) => pattern.test(line)).length;

  /** Streams 64 MiB through `port` as a retrieval does and counts the adjusts sshd got for it. */
  async function adjustsFor(port: number, bulk: boolean): Promise<number> {
    const executor = await SshExecutor.connect(options(sshd, { port }));
    try {
      const adjusts0 = logged(/rcvd adjust/);
      const freed0 = logged(/free: server-session/);
      let bytes = 0;
      await executor.run(`head -c ${SIZE} /dev/zero`, {
        what: 'zeros',
        bulk,
        onStdoutAsync: async (chunk) => {
          bytes += chunk.length;
        },
      });
      assert.equal(bytes, SIZE);
      // Everything of that session is in the log once sshd freed its channel.
      await waitFor(() => logged(/free: server-session/) > freed0);
      return logged(/rcvd adjust/) - adjusts0;
    } finally {
      executor.dispose();
    }
  }

  it('over a distant link, a bulk stream tops its window up by MiBs at a time, not one adjust per MiB', async () => {
    // 50 ms per round trip: ssh2's 2 MiB window held such a download to 17 MiB/s.
    const distant = await startTcpProxy(sshd.port, { oneWayDelayMs: 25 });
    try {
      const plain = await adjustsFor(distant.port, false);
      assert.ok(plain >= 60, `ssh2's own window: ${plain} adjusts for 64 MiB`);
      const bulk = await adjustsFor(distant.port, true);
      assert.ok(bulk <= 16, `the bulk window: ${bulk} adjusts for 64 MiB`);
    } finally {
      await distant.close();
    }
  });
});

describe('A distant link (what the download window and the upload ranges are for)', function () {
  this.timeout(60_000);
  let sshd: Sshd;
  before(async () => (sshd = await startSshd()));
  after(() => sshd.stop());

  it('is one whose every channel is slow to open: one slow opening on loopback (a busy fork) is not', async () => {
    // A clock that jumps 50 ms once, between the start and the end of the next channel's opening.
    let offsetMs = 0;
    let armed = 0;
    const clock: Clock = {
      nowMs: () => {
        if (armed > 0 && --armed === 0) offsetMs += 50;
        return Date.now() + offsetMs;
      },
      sleep: (ms, signal) => systemClock.sleep(ms, signal),
    };
    const near = await SshExecutor.connect(options(sshd, { clock }));
    try {
      // A new connection's first openings may be slow here too (sshd's first forks): loopback
      // shows itself near once one opening was quick.
      let quick = false;
      for (let i = 0; i < 10 && !quick; i++) {
        quick = (await near.run('true', { what: 'a command' })).distant === false;
      }
      assert.ok(quick, 'no opening on loopback took under 30 ms in 10');
      armed = 2; // the opening's start is the next call, its end the one after
      assert.equal((await near.run('true', { what: 'a slow opening' })).distant, false);
    } finally {
      near.dispose();
    }
    const relay = await startTcpProxy(sshd.port, { oneWayDelayMs: 25 });
    const far = await SshExecutor.connect(options(sshd, { port: relay.port }));
    try {
      assert.equal((await far.run('true', { what: 'a command across the relay' })).distant, true);
    } finally {
      far.dispose();
      await relay.close();
    }
  });
});
