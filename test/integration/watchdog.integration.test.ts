/**
 * The real watchdog (src/core/runpod/scripts/watchdog.sh) under bash, dash and busybox sh
 * (busybox with only its own applets and curl on PATH), against a local Runpod API stand-in,
 * with a 1 s tick and short graces: its verdicts, each delete rule and their order, the delete
 * fallbacks, and the key kept out of every argv, child env, output and log.
 *
 * Per shell, all scenarios start at once (each in its own temp run dir with its own stub) and
 * each `it` awaits its own: the file takes about the longest scenario per shell.
 */
import * as assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { closedPort, startApiStub, type ApiStub, type StubBehaviour } from '../helpers/apiStub';

const WATCHDOG = path.resolve(__dirname, '../../src/core/runpod/scripts/watchdog.sh');
const VERSION = '0.0.0-test';
const TS_LINE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \S/;

interface Shell {
  name: string;
  argv: string[];
  busybox: boolean;
}

const SHELLS: Shell[] = [
  // Absolute: the busybox runs have only busybox's applets (and curl) on PATH.
  { name: 'bash', argv: ['/usr/bin/bash'], busybox: false },
  { name: 'dash', argv: ['/usr/bin/dash'], busybox: false },
  { name: 'busybox sh', argv: ['/usr/bin/busybox', 'sh'], busybox: true },
];

const nowS = (): number => Math.floor(Date.now() / 1000);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Keys of the runs alive now, and the argv (NUL-joined) of their shells. */
const liveKeys = new Set<string>();
const shellCmdlines = new Set<string>();

/**
 * Reads every process's argv (and the env of every process that is not a watchdog shell or
 * the stand-in runpodctl, which gets the key in its env by design) while the watchdogs run.
 */
class ProcScanner {
  hits: string[] = [];
  scans = 0;
  private timer: NodeJS.Timeout | undefined;
  constructor(private readonly keys: () => Iterable<string>) {}
  start(): void {
    this.timer = setInterval(() => this.scan(), 50);
  }
  stop(): void {
    clearInterval(this.timer);
  }
  scan(): void {
    this.scans++;
    const keys = [...this.keys()];
    if (keys.length === 0) return;
    for (const pid of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
      let cmdline: string;
      try {
        cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1');
      } catch {
        continue;
      }
      for (const key of keys) {
        if (cmdline.includes(key)) this.hits.push(`argv of ${pid}: ${cmdline.replace(/\0/g, ' ')}`);
      }
      if (shellCmdlines.has(cmdline) || cmdline.includes('runpodctl')) continue;
      let environ: string;
      try {
        environ = fs.readFileSync(`/proc/${pid}/environ`, 'latin1');
      } catch {
        continue;
      }
      for (const key of keys) {
        if (environ.includes(key)) this.hits.push(`env of ${pid}: ${cmdline.replace(/\0/g, ' ')}`);
      }
    }
  }
}

let busyboxBin = '';
const tempRoots: string[] = [];

interface RunOptions {
  env?: Record<string, string | undefined>;
  stub?: StubBehaviour;
  /** Overrides the stub's URL (e.g. a closed port). */
  apiUrl?: string;
  /** `live`: job.pid of a running process group; `dead`: of a process that already ended. */
  job?: 'live' | 'dead';
  /** Files to write in the run dir before the start (relative path → content). */
  files?: Record<string, string>;
  /** Put a stand-in `runpodctl` on PATH. */
  runpodctl?: boolean;
}

class Run {
  readonly key = `rpa_${randomBytes(16).toString('hex')}`;
  readonly podId = `pod${randomBytes(4).toString('hex')}`;
  readonly root: string;
  readonly runDir: string;
  out = '';
  err = '';
  startMs = 0;
  exitCode: number | null | undefined;
  private child: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  private jobPids: number[] = [];

  private constructor(
    readonly shell: Shell,
    readonly stub: ApiStub,
  ) {
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-watchdog-'));
    tempRoots.push(this.root);
    this.runDir = path.join(this.root, 'run');
    fs.mkdirSync(path.join(this.runDir, '.pod'), { recursive: true });
  }

  static async start(shell: Shell, options: RunOptions = {}): Promise<Run> {
    const run = new Run(shell, await startApiStub(options.stub));
    await run.launch(options);
    return run;
  }

  private async launch(options: RunOptions): Promise<void> {
    if (options.job === 'live') {
      const job = spawn('sleep', ['120'], { detached: true, stdio: 'ignore' });
      job.unref();
      this.jobPids.push(job.pid!);
      this.write('job.pid', `${job.pid}\n`);
    } else if (options.job === 'dead') {
      const job = spawn('true', [], { detached: true, stdio: 'ignore' });
      await new Promise((r) => job.on('exit', r));
      this.write('job.pid', `${job.pid}\n`);
    }
    for (const [name, content] of Object.entries(options.files ?? {})) this.write(name, content);
    const bin = path.join(this.root, 'bin');
    fs.mkdirSync(bin);
    if (options.runpodctl) {
      // Records its arguments and a hash of the key it got in its env, then succeeds.
      fs.writeFileSync(
        path.join(bin, 'runpodctl'),
        '#!/bin/sh\nk=$RUNPOD_API_KEY\nunset RUNPOD_API_KEY\n' +
          `printf '%s\\n' "$*" > "${this.root}/runpodctl.args"\n` +
          `printf '%s' "$k" | sha256sum > "${this.root}/runpodctl.key"\n`,
        { mode: 0o755 },
      );
    }
    const env: Record<string, string> = {
      PATH: this.shell.busybox ? `${bin}:${busyboxBin}` : `${bin}:/usr/bin:/bin`,
      RUNPOD_API_KEY: this.key,
      RUNPOD_POD_ID: this.podId,
      OVERBRAINER_RUN_DIR: this.runDir,
      OVERBRAINER_API_URL: options.apiUrl ?? this.stub.baseUrl,
      OVERBRAINER_VERSION: VERSION,
      OVERBRAINER_INTERVAL: '1',
      OVERBRAINER_PROBE_TRIES: '3',
      OVERBRAINER_PROBE_WAIT: '0',
      OVERBRAINER_BOOT_GRACE: '600',
      OVERBRAINER_RETRIEVE_GRACE: '600',
      OVERBRAINER_LEASE_TTL: '900',
      OVERBRAINER_KEEP_POD: '0',
      OVERBRAINER_DEADLINE: String(nowS() + 3600),
    };
    for (const [name, value] of Object.entries(options.env ?? {})) {
      if (value === undefined) delete env[name];
      else env[name] = value;
    }
    liveKeys.add(this.key);
    shellCmdlines.add([...this.shell.argv, WATCHDOG, ''].join('\0'));
    this.startMs = Date.now();
    const child = spawn(this.shell.argv[0]!, [...this.shell.argv.slice(1), WATCHDOG], {
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stdout!.on('data', (d: Buffer) => (this.out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (this.err += d.toString()));
    // `close`, not `exit`: its output is then read to the end.
    this.exited = new Promise((resolve) => {
      child.on('error', (error) => {
        this.err += String(error);
        this.exitCode = null;
        resolve();
      });
      child.on('close', (code) => {
        this.exitCode = code;
        resolve();
      });
    });
  }

  write(name: string, content = ''): void {
    const file = path.join(this.runDir, name);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, content);
  }

  remove(name: string): void {
    fs.rmSync(path.join(this.runDir, name), { force: true });
  }

  log(): string {
    try {
      return fs.readFileSync(path.join(this.runDir, '.pod/watchdog.log'), 'utf8');
    } catch {
      return '';
    }
  }

  verdict(): string | null {
    try {
      return fs.readFileSync(path.join(this.runDir, '.pod/watchdog'), 'utf8');
    } catch {
      return null;
    }
  }

  lines(): string[] {
    return this.out.split('\n').filter((l) => l !== '');
  }

  /** Messages without their timestamps. */
  messages(): string[] {
    return this.lines().map((l) => l.replace(/^\S+ /, ''));
  }

  methods(): string[] {
    return this.stub.requests.map((r) =>
      r.method === 'POST' ? `POST ${JSON.parse(r.body).action}` : r.method,
    );
  }

  describe(): string {
    return `[${this.shell.name}] stdout:\n${this.out}\nstderr:\n${this.err}\nrequests: ${this.methods().join(', ')}`;
  }

  async waitFor(pattern: RegExp, timeoutMs = 15_000): Promise<number> {
    const until = Date.now() + timeoutMs;
    while (!pattern.test(this.out)) {
      if (Date.now() > until)
        assert.fail(`no ${pattern} within ${timeoutMs} ms\n${this.describe()}`);
      await sleep(25);
    }
    return Date.now();
  }

  async waitExit(timeoutMs = 15_000): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    const result = await Promise.race([this.exited!.then(() => 'exited' as const), timeout]);
    clearTimeout(timer);
    if (result === 'timeout')
      assert.fail(`still running after ${timeoutMs} ms\n${this.describe()}`);
    return this.exitCode ?? null;
  }

  term(): void {
    this.child?.kill('SIGTERM');
  }

  /** What holds for every run: auth and UA on each request, the key nowhere, log = stdout. */
  checkCommon(): void {
    for (const r of this.stub.requests) {
      assert.equal(r.headers.authorization, `Bearer ${this.key}`, this.describe());
      assert.equal(r.headers['user-agent'], `overbrainer-watchdog/${VERSION}`, this.describe());
      assert.ok(r.path.startsWith(`/v2/pods/${this.podId}`), r.path);
    }
    for (const text of [this.out, this.err, this.log(), this.verdict() ?? '']) {
      assert.ok(!text.includes(this.key), `the key leaked\n${this.describe()}`);
    }
    assert.equal(this.log(), this.out, 'the log file and stdout differ');
    for (const line of this.lines()) assert.match(line, TS_LINE);
  }

  /** Exited 0 after exactly one DELETE, for `reason`. */
  checkDeletedOnce(reason: string): void {
    assert.equal(this.exitCode, 0, this.describe());
    assert.deepEqual(
      this.methods().filter((m) => m === 'DELETE'),
      ['DELETE'],
      this.describe(),
    );
    const messages = this.messages();
    assert.deepEqual(
      messages.filter((m) => m.startsWith('delete reason=')),
      [`delete reason=${reason}`],
      this.describe(),
    );
    assert.equal(messages.at(-1), 'deleted', this.describe());
  }

  deleteAtMs(): number | undefined {
    return this.stub.requests.find((r) => r.method === 'DELETE')?.atMs;
  }

  async dispose(): Promise<void> {
    liveKeys.delete(this.key);
    if (this.child?.pid !== undefined && this.exitCode === undefined) {
      try {
        process.kill(-this.child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      await this.exited;
    }
    for (const pid of this.jobPids) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await this.stub.close();
  }
}

/** Starts runs, runs `body`, always disposes them. */
async function withRuns(
  shell: Shell,
  options: RunOptions[],
  body: (runs: Run[]) => Promise<void>,
): Promise<void> {
  const runs: Run[] = [];
  try {
    for (const o of options) runs.push(await Run.start(shell, o));
    await body(runs);
    for (const run of runs) run.checkCommon();
  } finally {
    await Promise.all(runs.map((r) => r.dispose()));
  }
}

interface Scenario {
  title: string;
  run(shell: Shell): Promise<void>;
}

const SCENARIOS: Scenario[] = [
  {
    title:
      'proves it can reach the API (verdict ready), then deletes at once on the retrieved marker',
    run: (shell) =>
      withRuns(shell, [{ job: 'live' }], async ([r]) => {
        await r!.waitFor(/job started pid=\d+/);
        assert.equal(r!.verdict(), 'ready\n');
        assert.deepEqual(r!.methods(), ['GET']);
        const markedMs = Date.now();
        r!.write('.pod/retrieved');
        await r!.waitExit();
        assert.ok(r!.deleteAtMs()! - markedMs < 3000, 'not deleted at the next tick');
        r!.checkDeletedOnce('retrieved');
        assert.deepEqual(r!.messages().slice(-4), [
          'retrieved marker seen',
          'delete reason=retrieved',
          'DELETE 204',
          'deleted',
        ]);
        assert.match(r!.messages()[0]!, new RegExp(`^start overbrainer-watchdog/${VERSION} pod=`));
        assert.deepEqual(r!.methods(), ['GET', 'DELETE']);
      }),
  },
  {
    title:
      'without key or pod id: verdict failed missing_key, no request; TERM stops its sleep with exit 0',
    run: (shell) =>
      withRuns(
        shell,
        [
          { env: { RUNPOD_API_KEY: undefined, OVERBRAINER_INTERVAL: '30' } },
          { env: { RUNPOD_POD_ID: undefined, OVERBRAINER_INTERVAL: '30' } },
        ],
        async (runs) => {
          for (const r of runs) {
            await r.waitFor(/verdict failed missing_key/);
            assert.equal(r.verdict(), 'failed missing_key\n');
          }
          await sleep(300);
          for (const r of runs) {
            const termMs = Date.now();
            r.term();
            assert.equal(await r.waitExit(5000), 0);
            assert.ok(Date.now() - termMs < 3000, 'TERM waited for the 30 s sleep');
            assert.equal(r.messages().at(-1), 'stopping');
            assert.deepEqual(r.methods(), []);
          }
        },
      ),
  },
  {
    title: 'a refused key: failed http_401 after one try',
    run: (shell) =>
      withRuns(shell, [{ stub: { get: [401] } }], async ([r]) => {
        await r!.waitFor(/verdict /);
        assert.equal(r!.verdict(), 'failed http_401\n');
        assert.deepEqual(r!.methods(), ['GET']);
      }),
  },
  {
    title: 'no answer: failed unreachable after OVERBRAINER_PROBE_TRIES tries',
    run: async (shell) =>
      withRuns(shell, [{ apiUrl: `http://127.0.0.1:${await closedPort()}/v2` }], async ([r]) => {
        await r!.waitFor(/verdict /);
        assert.equal(r!.verdict(), 'failed unreachable\n');
        assert.deepEqual(
          r!.messages().filter((m) => m.startsWith('probe ')),
          [1, 2, 3].map((n) => `probe GET /pods/${r!.podId} 000 (try ${n}/3)`),
        );
      }),
  },
  {
    title:
      'a busy API (5xx, 429) is tried again: ready once it answers, failed http_503 if it never does',
    run: (shell) =>
      withRuns(
        shell,
        [{ stub: { get: [503, 429, 200] } }, { stub: { get: [503] } }],
        async ([ok, busy]) => {
          await ok!.waitFor(/verdict /);
          await busy!.waitFor(/verdict /);
          assert.equal(ok!.verdict(), 'ready\n');
          assert.deepEqual(ok!.methods(), ['GET', 'GET', 'GET']);
          assert.equal(busy!.verdict(), 'failed http_503\n');
          assert.deepEqual(busy!.methods(), ['GET', 'GET', 'GET']);
        },
      ),
  },
  {
    title: 'a failed bootstrap: verdict names its reason, and the pod is deleted even kept',
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            env: {
              OVERBRAINER_BOOT_FAILED: '1',
              OVERBRAINER_KEEP_POD: '1',
              OVERBRAINER_DEADLINE: undefined,
            },
            files: {
              '.pod/bootstrap_failed': `cannot start\tsshd (exit 1) ${'x'.repeat(300)}\nsecond line\n`,
            },
          },
          {
            job: 'live',
            env: { OVERBRAINER_BOOT_FAILED: '1' },
            files: { '.pod/bootstrap_failed': 'run dir claimed by another pod\n', '.pod/keep': '' },
          },
        ],
        async (runs) => {
          for (const r of runs) await r.waitExit();
          // Only printable ASCII of its first line, cut at 200 characters.
          const reason = `cannot startsshd (exit 1) ${'x'.repeat(300)}`.slice(0, 200);
          assert.equal(runs[0]!.verdict(), `failed bootstrap: ${reason}\n`);
          assert.equal(runs[1]!.verdict(), 'failed bootstrap: run dir claimed by another pod\n');
          for (const r of runs) {
            r.checkDeletedOnce('bootstrap_failed');
            assert.deepEqual(r.methods(), ['DELETE'], 'a failed bootstrap needs no probe');
          }
        },
      ),
  },
  {
    title: 'kept with a job: never deleted (retrieved, ended, boot grace, cost cap all ignored)',
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            env: {
              OVERBRAINER_KEEP_POD: '1',
              OVERBRAINER_DEADLINE: undefined,
              OVERBRAINER_BOOT_GRACE: '1',
              OVERBRAINER_RETRIEVE_GRACE: '0',
            },
            files: {
              exit_code: '0\n',
              '.pod/retrieved': '',
              '.pod/cost_cap_at': `${nowS() - 60}\n`,
            },
          },
        ],
        async ([r]) => {
          await r!.waitFor(/job ended/);
          await sleep(3000);
          assert.deepEqual(r!.methods(), ['GET'], r!.describe());
          r!.term();
          assert.equal(await r!.waitExit(5000), 0);
          assert.equal(r!.messages().at(-1), 'stopping');
        },
      ),
  },
  {
    title:
      'max_hours: a fresh lease holds the deadline off, each renewal extends it, then it deletes',
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            env: {
              OVERBRAINER_DEADLINE: String(nowS() - 5),
              OVERBRAINER_LEASE_TTL: '3',
              OVERBRAINER_BOOT_GRACE: '1',
            },
            files: { '.pod/lease': '' },
          },
        ],
        async ([r]) => {
          // The client renews every 0.5 s (as the real one does every 5 min of a 15 min TTL).
          let renewedMs = Date.now();
          let renewing = true;
          const renewer = (async () => {
            while (renewing) {
              r!.write('.pod/lease');
              renewedMs = Date.now();
              await sleep(500);
            }
          })();
          await r!.waitFor(/deadline passed, lease held by the client/);
          await sleep(2500);
          renewing = false;
          await renewer;
          assert.deepEqual(r!.methods(), ['GET'], `deleted while renewed\n${r!.describe()}`);
          await r!.waitExit();
          r!.checkDeletedOnce('deadline');
          // The pod clock counts whole seconds: a lease of 3 s holds at least 2 s.
          assert.ok(
            r!.deleteAtMs()! - renewedMs >= 2000,
            `deleted ${r!.deleteAtMs()! - renewedMs} ms after the last renewal\n${r!.describe()}`,
          );
          assert.equal(
            r!.messages().filter((m) => m === 'deadline passed, lease held by the client').length,
            1,
          );
        },
      ),
  },
  {
    title: 'rule order: cost cap before the deadline before the retrieved marker',
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            env: { OVERBRAINER_DEADLINE: String(nowS() - 1) },
            files: { '.pod/cost_cap_at': `${nowS() - 1}\n`, '.pod/retrieved': '' },
          },
          {
            job: 'live',
            env: { OVERBRAINER_DEADLINE: String(nowS() - 1), OVERBRAINER_LEASE_TTL: '5' },
            files: { '.pod/retrieved': '', '.pod/lease': '' },
          },
        ],
        async ([cap, deadline]) => {
          // A lease last renewed 10 s ago is stale (TTL 5 s): its mtime counts, not its presence.
          const old = new Date(Date.now() - 10_000);
          fs.utimesSync(path.join(deadline!.runDir, '.pod/lease'), old, old);
          await cap!.waitExit();
          await deadline!.waitExit();
          cap!.checkDeletedOnce('cost_cap');
          deadline!.checkDeletedOnce('deadline');
        },
      ),
  },
  {
    title: 'abandoned: the retrieve grace after the job ended (exit code, cancelled, group gone)',
    run: (shell) =>
      withRuns(
        shell,
        [
          { job: 'live', env: { OVERBRAINER_RETRIEVE_GRACE: '2' }, files: { exit_code: '0\n' } },
          { job: 'live', env: { OVERBRAINER_RETRIEVE_GRACE: '2' }, files: { cancelled: '' } },
          { job: 'dead', env: { OVERBRAINER_RETRIEVE_GRACE: '2' } },
        ],
        async (runs) => {
          for (const r of runs) {
            await r.waitExit();
            r.checkDeletedOnce('abandoned');
            const m = r.messages();
            assert.ok(m.indexOf('job ended') > m.findIndex((x) => x.startsWith('job started')));
            // Whole seconds on the pod clock: a 2 s grace lasts at least 1 s.
            assert.ok(r.deleteAtMs()! - r.startMs >= 1000, r.describe());
          }
        },
      ),
  },
  {
    title: 'never_started: no job within the boot grace',
    run: (shell) =>
      withRuns(shell, [{ env: { OVERBRAINER_BOOT_GRACE: '2' } }], async ([r]) => {
        await r!.waitExit();
        r!.checkDeletedOnce('never_started');
        assert.ok(r!.deleteAtMs()! - r!.startMs >= 1000);
      }),
  },
  {
    title: 'the runtime keep marker holds a pod past its deadline; removing it releases the pod',
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            env: { OVERBRAINER_DEADLINE: String(nowS() - 1) },
            files: { '.pod/keep': '' },
          },
        ],
        async ([r]) => {
          await r!.waitFor(/keep marker seen: the pod is kept/);
          await sleep(2500);
          assert.deepEqual(r!.methods(), ['GET'], r!.describe());
          r!.remove('.pod/keep');
          await r!.waitExit();
          r!.checkDeletedOnce('deadline');
          assert.ok(r!.messages().includes('keep marker removed: the pod is released'));
        },
      ),
  },
  {
    title: 'delete fallbacks: terminate, then stop (still billing), the next tick, runpodctl',
    run: (shell) =>
      withRuns(
        shell,
        [
          { files: { '.pod/retrieved': '' }, stub: { delete: [500] } },
          { files: { '.pod/retrieved': '' }, stub: { delete: [500], terminate: [500] } },
          {
            files: { '.pod/retrieved': '' },
            stub: { delete: [500, 204], terminate: [500], stop: [500] },
          },
          {
            files: { '.pod/retrieved': '' },
            stub: { delete: [500], terminate: [500], stop: [500] },
            runpodctl: true,
          },
        ],
        async ([terminate, stop, retry, ctl]) => {
          for (const r of [terminate, stop, retry, ctl]) assert.equal(await r!.waitExit(), 0);

          assert.deepEqual(terminate!.methods(), ['GET', 'DELETE', 'POST terminate']);
          assert.deepEqual(terminate!.messages().slice(-3), [
            'DELETE 500',
            'terminate 200',
            'deleted',
          ]);
          const post = terminate!.stub.requests[2]!;
          assert.equal(post.path, `/v2/pods/${terminate!.podId}/action`);
          assert.equal(post.headers['content-type'], 'application/json');

          assert.deepEqual(stop!.methods(), ['GET', 'DELETE', 'POST terminate', 'POST stop']);
          assert.deepEqual(stop!.messages().slice(-2), [
            'stop 200',
            'stopped, volume keeps billing',
          ]);

          assert.deepEqual(retry!.methods(), [
            'GET',
            'DELETE',
            'POST terminate',
            'POST stop',
            'DELETE',
          ]);
          assert.ok(retry!.messages().includes('delete failed, retrying in 1s'));
          assert.equal(retry!.messages().filter((m) => m === 'delete reason=retrieved').length, 2);
          assert.equal(retry!.messages().at(-1), 'deleted');

          assert.deepEqual(ctl!.messages().slice(-2), ['runpodctl pod delete exit 0', 'deleted']);
          const args = fs.readFileSync(path.join(ctl!.root, 'runpodctl.args'), 'utf8');
          assert.equal(args, `pod delete ${ctl!.podId}\n`);
          const keyHash = fs.readFileSync(path.join(ctl!.root, 'runpodctl.key'), 'utf8');
          assert.equal(keyHash.split(' ')[0], createHash('sha256').update(ctl!.key).digest('hex'));
        },
      ),
  },
];

type Settled = { ok: true } | { ok: false; error: unknown };
const settle = (p: Promise<void>): Promise<Settled> =>
  p.then(
    () => ({ ok: true }) as const,
    (error: unknown) => ({ ok: false, error }) as const,
  );

describe('watchdog.sh (integration)', function () {
  this.timeout(60_000);
  const scanner = new ProcScanner(() => liveKeys);

  before(function () {
    busyboxBin = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-busybox-'));
    tempRoots.push(busyboxBin);
    const install = spawnSync('busybox', ['--install', '-s', busyboxBin]);
    assert.equal(install.status, 0, String(install.stderr));
    fs.symlinkSync('/usr/bin/curl', path.join(busyboxBin, 'curl'));
    scanner.start();
  });

  after(function () {
    scanner.stop();
    for (const dir of tempRoots) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('the process scanner sees a key in an argv and in an env (so its silence means something)', async function () {
    const argvKey = `rpa_${randomBytes(8).toString('hex')}`;
    const envKey = `rpa_${randomBytes(8).toString('hex')}`;
    const probe = new ProcScanner(() => [argvKey, envKey]);
    const child = spawn('/bin/sh', ['-c', 'sleep 5', 'sh', argvKey], {
      env: { PATH: '/usr/bin:/bin', X: envKey },
      stdio: 'ignore',
    });
    try {
      await sleep(200);
      probe.scan();
      assert.ok(probe.hits.some((h) => h.startsWith('argv of')));
      assert.ok(probe.hits.some((h) => h.startsWith('env of')));
    } finally {
      child.kill('SIGKILL');
    }
  });

  for (const shell of SHELLS) {
    describe(`under ${shell.name}`, function () {
      const results = new Map<string, Promise<Settled>>();

      before(function () {
        const hasShell = spawnSync(shell.argv[0]!, [...shell.argv.slice(1), '-c', 'exit 0']);
        if (hasShell.status !== 0) this.skip();
        // Every scenario at once; each `it` waits for its own.
        for (const scenario of SCENARIOS) results.set(scenario.title, settle(scenario.run(shell)));
      });

      after(async function () {
        await Promise.all(results.values());
      });

      for (const scenario of SCENARIOS) {
        it(scenario.title, async function () {
          const result = await results.get(scenario.title)!;
          if (!result.ok) throw result.error;
        });
      }

      it('never put the key in a process argv or a child process env', async function () {
        await Promise.all(results.values());
        assert.ok(scanner.scans > 20, `only ${scanner.scans} scans`);
        assert.deepEqual(scanner.hits, []);
      });
    });
  }
});
