/**
 * The real watchdog (src/core/pod/scripts/watchdog.sh) run as a process under bash, dash and
 * busybox sh (busybox with only its own applets and curl on PATH) against a local Runpod API
 * stand-in, each run in its own temp run dir: what the watchdog test files share.
 */
import * as assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { startApiStub, type ApiStub, type StubBehaviour } from './apiStub';

export const WATCHDOG = path.resolve(__dirname, '../../src/core/pod/scripts/watchdog.sh');
export const VERSION = '0.0.0-test';
export const TS_LINE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \S/;

export interface Shell {
  name: string;
  argv: string[];
  busybox: boolean;
}

export const SHELLS: Shell[] = [
  // Absolute: the busybox runs have only busybox's applets (and curl) on PATH.
  { name: 'bash', argv: ['/usr/bin/bash'], busybox: false },
  { name: 'dash', argv: ['/usr/bin/dash'], busybox: false },
  { name: 'busybox sh', argv: ['/usr/bin/busybox', 'sh'], busybox: true },
];

export const nowS = (): number => Math.floor(Date.now() / 1000);
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Keys of the runs alive now, and the argv (NUL-joined) of their shells. */
export const liveKeys = new Set<string>();
const shellCmdlines = new Set<string>();

/**
 * Reads every process's argv (and the env of every process that is not a watchdog shell or
 * the stand-in runpodctl, which gets the key in its env by design) while the watchdogs run.
 */
export class ProcScanner {
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
const mounts: string[] = [];

/**
 * Before the runs: a dir with busybox's applets (and curl) for the busybox runs. The scanner
 * starts too.
 */
export function setupWatchdogRuns(scanner?: ProcScanner): void {
  busyboxBin = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-busybox-'));
  tempRoots.push(busyboxBin);
  const install = spawnSync('busybox', ['--install', '-s', busyboxBin]);
  assert.equal(install.status, 0, String(install.stderr));
  fs.symlinkSync('/usr/bin/curl', path.join(busyboxBin, 'curl'));
  scanner?.start();
}

/** After the runs: unmounts the runs' tmpfs disks and removes every temp dir. */
export function cleanupWatchdogRuns(scanner?: ProcScanner): void {
  scanner?.stop();
  for (const dir of mounts.splice(0)) spawnSync('umount', ['-l', dir]);
  for (const dir of tempRoots.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
}

export interface RunOptions {
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
  /** The run dir on a tmpfs of this many KiB of its own (a disk a test can fill). Needs root. */
  tmpfsKiB?: number;
}

export class Run {
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
    fs.mkdirSync(this.runDir);
  }

  static async start(shell: Shell, options: RunOptions = {}): Promise<Run> {
    const run = new Run(shell, await startApiStub(options.stub));
    if (options.tmpfsKiB !== undefined) run.mountTmpfs(options.tmpfsKiB);
    fs.mkdirSync(path.join(run.runDir, '.pod'), { recursive: true });
    await run.launch(options);
    return run;
  }

  private mountTmpfs(kib: number): void {
    const mount = spawnSync('mount', [
      '-t',
      'tmpfs',
      '-o',
      `size=${kib}k,mode=0700`,
      'tmpfs',
      this.runDir,
    ]);
    assert.equal(mount.status, 0, `cannot mount a tmpfs (root needed): ${String(mount.stderr)}`);
    mounts.push(this.runDir);
  }

  /** Writes `kib` KiB of zeros to `name` (under the run dir, or an absolute path). */
  fill(name: string, kib: number): void {
    const file = path.isAbsolute(name) ? name : path.join(this.runDir, name);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, Buffer.alloc(kib * 1024));
  }

  /** The run dir's disk use in %, as `df -P` prints it. */
  dfPercent(): number {
    const out = spawnSync('df', ['-P', this.runDir], { encoding: 'utf8' }).stdout;
    return Number(/(\d+)%/.exec(out.trim().split('\n').at(-1) ?? '')?.[1]);
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

  /**
   * Until the log file holds what stdout shows (the watchdog prints a line, then appends it to
   * its log: a TERM in between would cut the file's copy short).
   */
  async waitLogged(timeoutMs = 5_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (this.log() !== this.out) {
      if (Date.now() > until) assert.fail(`the log file never caught up\n${this.describe()}`);
      await sleep(25);
    }
  }

  term(): void {
    this.child?.kill('SIGTERM');
  }

  /** What holds for every run: auth and UA on each request, the key nowhere, log = stdout. */
  checkCommon(): void {
    for (const r of this.stub.requests) {
      assert.equal(r.headers.authorization, `Bearer ${this.key}`, this.describe());
      assert.equal(r.headers['user-agent'], `overbrainer-watchdog/${VERSION}`, this.describe());
      assert.ok(
        r.path.startsWith(`/v2/pods/${this.podId}`) || r.path.startsWith('/v2/clusters/'),
        r.path,
      );
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
    const mounted = mounts.indexOf(this.runDir);
    if (mounted >= 0) {
      mounts.splice(mounted, 1);
      spawnSync('umount', ['-l', this.runDir]);
    }
  }
}

/** Starts runs, runs `body`, always disposes them. */
export async function withRuns(
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

export type Settled = { ok: true } | { ok: false; error: unknown };
export const settle = (p: Promise<void>): Promise<Settled> =>
  p.then(
    () => ({ ok: true }) as const,
    (error: unknown) => ({ ok: false, error }) as const,
  );

/**
 * In the current `describe`: a `before` that fails unless `shell` runs and then starts every
 * scenario at once under it, and an `after` that waits for them all. Each scenario's end, by
 * title, for its `it` to await.
 */
export function startScenarios(
  shell: Shell,
  scenarios: readonly { title: string; run: (shell: Shell) => Promise<void> }[],
): Map<string, Promise<Settled>> {
  const results = new Map<string, Promise<Settled>>();
  before(function () {
    const hasShell = spawnSync(shell.argv[0]!, [...shell.argv.slice(1), '-c', 'exit 0']);
    if (hasShell.status !== 0)
      assert.fail(
        `${shell.name} does not run: install it (apt-get install -y busybox dash; \`npm run test:integration\` does)`,
      );
    for (const scenario of scenarios) results.set(scenario.title, settle(scenario.run(shell)));
  });
  after(async function () {
    await Promise.all(results.values());
  });
  return results;
}
