/**
 * The job's launcher, status and cancel scripts run for real under sh (the
 * system's /bin/sh), dash and busybox sh (busybox's own applets only: no
 * nohup, busybox tail), with the example trainer (examples/tiny/train.py) as
 * the job; and the metrics follower streaming a live job through the real
 * LocalExecutor, across a forced stream drop, with its latency measured.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { systemClock } from '../../src/core/clock';
import { EventBus, type CoreEvent, type JobStatus, type TrainMetric } from '../../src/core/events';
import {
  ExecError,
  type ExecOptions,
  type ExecResult,
  type Executor,
  type StreamOptions,
} from '../../src/core/exec/executor';
import { LocalExecutor } from '../../src/core/exec/local';
import { scaleTiming } from '../../src/core/timing';
import { MetricsFollower, PollingMetricsReader } from '../../src/core/train/follow';
import {
  cancelJob,
  JobError,
  jobScript,
  jobStatus,
  shQuote,
  startJob,
} from '../../src/core/train/job';
import { parseMetricLine } from '../../src/core/train/metrics';
import { jobOutcome } from '../../src/core/train/outcome';

const ROOT = path.resolve(__dirname, '..', '..');
const EXAMPLE = path.join(ROOT, 'examples', 'tiny');

/** The real interpreter behind `python3` (a pyenv shim would cost a second per start). */
function realPython(): string | null {
  const probe = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], {
    encoding: 'utf8',
  });
  return probe.status === 0 ? probe.stdout.trim() : null;
}

function which(name: string): string | null {
  const probe = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  return probe.status === 0 ? probe.stdout.trim() : null;
}

/**
 * Runs every command under a chosen shell, through the real LocalExecutor
 * (its process groups, aborts and reads): `PATH=<path> exec <shell> -c <command>`.
 */
class ShellExecutor implements Executor {
  readonly kind = 'local' as const;
  constructor(
    private readonly inner: LocalExecutor,
    private readonly shell: string,
    private readonly pathValue: string,
  ) {}

  private wrap(command: string): string {
    return `PATH=${shQuote(this.pathValue)}; export PATH; exec ${this.shell} -c ${shQuote(command)}`;
  }
  exec(command: string, options?: ExecOptions): Promise<ExecResult> {
    return this.inner.exec(this.wrap(command), options);
  }
  stream(command: string, options: StreamOptions): Promise<ExecResult> {
    return this.inner.stream(this.wrap(command), options);
  }
  readRange(p: string, offset: number, maxBytes: number): Promise<Buffer> {
    return this.inner.readRange(p, offset, maxBytes);
  }
  writeFileAtomic(p: string, data: string | Buffer): Promise<void> {
    return this.inner.writeFileAtomic(p, data);
  }
  upload(...args: Parameters<Executor['upload']>): Promise<void> {
    return this.inner.upload(...args);
  }
  download(...args: Parameters<Executor['download']>): Promise<void> {
    return this.inner.download(...args);
  }
  dispose(): void {}
}

/** PIDs of live (non-zombie) processes in process group `pgid`, from /proc. */
function liveGroupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
    if (fields[0] !== 'Z' && fields[0] !== 'X' && Number(fields[2]) === pgid)
      members.push(Number(entry));
  }
  return members;
}

/** Live processes whose working directory is under `dir` (a job or a tail left behind). */
function liveProcessesIn(dir: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cwd = readlinkSync(`/proc/${entry}/cwd`);
      if (cwd === dir || cwd.startsWith(`${dir}/`)) found.push(Number(entry));
    } catch {
      // Gone, a zombie, or not ours to look at.
    }
  }
  return found;
}

async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | null>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function waitForStatus(
  executor: Executor,
  runDir: string,
  timeoutMs = 30_000,
): Promise<JobStatus> {
  return waitFor('the job to end', timeoutMs, async () => {
    const status = await jobStatus(executor, runDir);
    return status.kind === 'running' ? null : status;
  });
}

function metricsOf(file: string): TrainMetric[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .flatMap((line) => {
      const parsed = parseMetricLine(Buffer.from(line));
      return parsed.kind === 'metric' ? [parsed.metric] : [];
    });
}

const python = realPython();
/** A shell the scripts must run under: missing, the file fails (it does not drop the shell). */
function requiredShell(name: string): string {
  const found = which(name);
  if (found === null) {
    throw new Error(`${name} is not on PATH: install it (\`npm run test:integration\` does)`);
  }
  return found;
}
const busybox = requiredShell('busybox');
const dash = requiredShell('dash');

interface Variant {
  name: string;
  make: (local: LocalExecutor, root: string) => Executor;
}

/** A directory whose only commands are busybox applets (and python3 for the trainer). */
function busyboxBin(root: string): string {
  const bin = path.join(root, 'busybox-bin');
  mkdirSync(bin);
  const applets = spawnSync(busybox, ['--list'], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter(Boolean);
  for (const applet of applets) symlinkSync(busybox, path.join(bin, applet));
  symlinkSync(python as string, path.join(bin, 'python3'));
  // So the launcher's path without nohup (busybox has none) is the one tested here.
  assert.ok(!existsSync(path.join(bin, 'nohup')));
  return bin;
}

const systemSh = realpathSync('/bin/sh');
const variants: Variant[] = [
  { name: `sh (${systemSh}), through the LocalExecutor`, make: (local) => local },
];
// Where /bin/sh is dash already, the run above is the dash run.
if (realpathSync(dash) !== systemSh) {
  variants.push({
    name: 'dash',
    make: (local, root) => {
      const bin = path.join(root, 'dash-bin');
      mkdirSync(bin);
      symlinkSync(dash, path.join(bin, 'sh'));
      return new ShellExecutor(
        local,
        shQuote(dash),
        `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`,
      );
    },
  });
}
variants.push({
  name: 'busybox sh (busybox applets only)',
  make: (local, root) => new ShellExecutor(local, `${shQuote(busybox)} sh`, busyboxBin(root)),
});

describe('job scripts on real shells', function () {
  before(function () {
    if (python === null)
      assert.fail(
        'python3 (>= 3.7) is not on PATH: install it (apt-get install -y python3; `npm run test:integration` does)',
      );
  });

  for (const variant of variants) {
    describe(variant.name, () => {
      let root: string;
      let local: LocalExecutor;
      let executor: Executor;
      let runCount = 0;

      before(() => {
        root = realpathSync(mkdtempSync(path.join(tmpdir(), 'ob-job-')));
        local = new LocalExecutor();
        executor = variant.make(local, root);
      });

      after(() => {
        const left = liveProcessesIn(root);
        for (const pid of left) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // Already gone.
          }
        }
        local.dispose();
        rmSync(root, { recursive: true, force: true });
        assert.deepEqual(left, [], 'no process of a test job is left running');
      });

      /** A fresh run directory holding the example, as the upload would leave it. */
      function newRunDir(): string {
        const dir = path.join(root, `run ${++runCount} 'quoted'`);
        mkdirSync(dir);
        cpSync(path.join(EXAMPLE, 'train.py'), path.join(dir, 'train.py'));
        cpSync(path.join(EXAMPLE, 'data'), path.join(dir, 'data'), { recursive: true });
        return dir;
      }

      function script(command: string, runDir: string): string {
        return jobScript({ trainer: 'command', command }, { runDir, jobEnvFile: null });
      }

      it('start → running → exited 0 with metrics; secrets arrive through stdin only', async () => {
        const runDir = newRunDir();
        const secret = 'hf_s3cr3t-value';
        const command =
          'printf "%s|%s|%s\\n" "$HF_TOKEN" "$GREETING" "$OVERBRAINER_METRICS" > seen.txt\n' +
          'python3 train.py --steps 15 --step-seconds 0.05';
        const { pid } = await startJob(executor, {
          runDir,
          script: script(command, runDir),
          env: { GREETING: "it's me" },
          secrets: { HF_TOKEN: secret },
        });
        assert.ok(pid > 1);
        assert.equal(readFileSync(path.join(runDir, 'job.pid'), 'utf8').trim(), String(pid));
        assert.deepEqual(await jobStatus(executor, runDir), { kind: 'running' });
        const status = await waitForStatus(executor, runDir);
        assert.deepEqual(status, { kind: 'exited', code: 0 });
        assert.equal(readFileSync(path.join(runDir, 'exit_code'), 'utf8').trim(), '0');
        assert.equal(
          readFileSync(path.join(runDir, 'seen.txt'), 'utf8'),
          `${secret}|it's me|${path.join(runDir, 'metrics.jsonl')}\n`,
        );
        const metrics = metricsOf(path.join(runDir, 'metrics.jsonl'));
        assert.deepEqual(
          metrics.filter((m) => m.loss !== null && m.loss !== undefined).map((m) => m.step),
          Array.from({ length: 15 }, (_, i) => i + 1),
        );
        assert.deepEqual(jobOutcome(status, metrics.length, 'r'), {
          state: 'succeeded',
          message: null,
        });
        assert.ok(existsSync(path.join(runDir, 'output', 'model.json')));
        const log = readFileSync(path.join(runDir, 'job.log'), 'utf8');
        assert.match(log, /done: eval_loss/);
        assert.ok(!log.includes(secret));
        assert.deepEqual(liveGroupMembers(pid), []);
      });

      it('a job exiting non-zero reads exited N; one without metrics fails as plugin not loaded', async () => {
        const failing = newRunDir();
        await startJob(executor, {
          runDir: failing,
          script: script('python3 train.py --steps 2 --step-seconds 0 --exit-code 3', failing),
        });
        const status = await waitForStatus(executor, failing);
        assert.deepEqual(status, { kind: 'exited', code: 3 });
        assert.equal(
          jobOutcome(status, 2, 'r')?.message,
          'exited with code 3 (see runs/r/job.log)',
        );

        const silent = newRunDir();
        await startJob(executor, {
          runDir: silent,
          script: script('echo no metrics here', silent),
        });
        const quiet = await waitForStatus(executor, silent);
        assert.deepEqual(quiet, { kind: 'exited', code: 0 });
        assert.match(jobOutcome(quiet, 0, 'r')?.message ?? '', /^plugin not loaded: /);
      });

      it('cancel: TERM reaches the whole group, the status reads cancelled, nothing is left', async () => {
        const runDir = newRunDir();
        const { pid } = await startJob(executor, {
          runDir,
          // A grandchild in the background too: the group signal must reach it.
          script: script('sleep 300 &\npython3 train.py --steps 1000 --step-seconds 0.2', runDir),
        });
        await waitFor('the first metric', 20_000, async () =>
          metricsOf(path.join(runDir, 'metrics.jsonl')).length > 0 ? true : null,
        );
        assert.ok(liveGroupMembers(pid).length >= 2);
        assert.equal(await cancelJob(executor, runDir), 'cancelled');
        assert.deepEqual(liveGroupMembers(pid), []);
        assert.deepEqual(await jobStatus(executor, runDir), { kind: 'cancelled' });
        assert.ok(
          existsSync(path.join(runDir, 'cancelling')) && existsSync(path.join(runDir, 'cancelled')),
        );
        assert.ok(!existsSync(path.join(runDir, 'exit_code')), 'the wrapper died with the group');
        // The trainer's own SIGTERM handling ran: it saved a checkpoint.
        assert.ok(
          readdirSync(path.join(runDir, 'output')).some((name) => name.startsWith('checkpoint-')),
        );
        // A second cancel signals nothing.
        assert.equal(await cancelJob(executor, runDir), 'already_ended');
      });

      it('cancel escalates to KILL for a job that ignores TERM; cancelling alone reads running', async () => {
        const runDir = newRunDir();
        const { pid } = await startJob(executor, {
          runDir,
          script: script("trap '' TERM\nsleep 300", runDir),
        });
        // A cancel in progress (marker written, group alive) is still running.
        writeFileSync(path.join(runDir, 'cancelling'), '');
        assert.deepEqual(await jobStatus(executor, runDir), { kind: 'running' });
        const started = Date.now();
        assert.equal(
          await cancelJob(executor, runDir, { termWaitS: 1, killWaitS: 5 }),
          'cancelled',
        );
        assert.ok(Date.now() - started >= 900, 'it waited for TERM first');
        assert.deepEqual(liveGroupMembers(pid), []);
        assert.deepEqual(await jobStatus(executor, runDir), { kind: 'cancelled' });
      });

      it('a job killed from outside reads lost; cancel after an exit touches nothing', async () => {
        const runDir = newRunDir();
        const { pid } = await startJob(executor, { runDir, script: script('sleep 300', runDir) });
        assert.deepEqual(await jobStatus(executor, runDir), { kind: 'running' });
        process.kill(-pid, 'SIGKILL');
        await waitFor('the group to die', 10_000, async () =>
          liveGroupMembers(pid).length === 0 ? true : null,
        );
        assert.deepEqual(await jobStatus(executor, runDir), { kind: 'lost' });
        assert.deepEqual(
          jobOutcome({ kind: 'lost' }, 0, 'r')?.message,
          'stopped without an exit code',
        );

        const ended = newRunDir();
        await startJob(executor, { runDir: ended, script: script('true', ended) });
        await waitForStatus(executor, ended);
        assert.equal(await cancelJob(executor, ended), 'already_ended');
        assert.ok(!existsSync(path.join(ended, 'cancelling')));
        assert.deepEqual(await jobStatus(executor, ended), { kind: 'exited', code: 0 });
      });

      it('refuses to start in a missing directory or with a script that does not parse', async () => {
        const missing = path.join(root, 'missing');
        await assert.rejects(
          startJob(executor, { runDir: missing, script: 'true' }),
          (error: unknown) => {
            assert.ok(error instanceof JobError && error.kind === 'start_failed', String(error));
            assert.match(error.message, /does not exist/);
            return true;
          },
        );
        assert.deepEqual(await jobStatus(executor, missing), { kind: 'lost' });
        const runDir = newRunDir();
        await assert.rejects(
          startJob(executor, { runDir, script: 'if then fi (' }),
          (error: unknown) => {
            assert.ok(error instanceof JobError && error.kind === 'start_failed', String(error));
            assert.match(error.message, /not valid sh/);
            return true;
          },
        );
        assert.ok(!existsSync(path.join(runDir, 'job.pid')));
      });

      it('follows a live job by streaming: every metric once, in order, then the drained end', async () => {
        const runDir = newRunDir();
        const bus = new EventBus();
        const events: CoreEvent[] = [];
        bus.on((event) => events.push(event));
        await startJob(executor, {
          runDir,
          script: script('python3 train.py --steps 20 --step-seconds 0.05', runDir),
        });
        const follower = new MetricsFollower({
          executor,
          runId: 'r',
          runDir,
          bus,
          clock: systemClock,
          timing: scaleTiming(4), // status every 500 ms
        });
        const result = await follower.follow();
        assert.deepEqual(result.status, { kind: 'exited', code: 0 });
        const published = events.flatMap((e) => (e.type === 'metric' ? [e.metric] : []));
        assert.deepEqual(published, metricsOf(path.join(runDir, 'metrics.jsonl')));
        assert.equal(result.metrics, published.length);
        assert.equal(result.offset, readFileSync(path.join(runDir, 'metrics.jsonl')).length);
        assert.deepEqual(
          events.flatMap((e) => (e.type === 'jobStatus' ? [e.status.kind] : [])),
          ['running', 'exited'],
        );
        await waitFor('the stream to be gone', 5_000, async () =>
          liveProcessesIn(runDir).length === 0 ? true : null,
        );
      });

      it('the baseline poll (tail -c +N | head -c LIMIT) reads the same lines', async () => {
        const runDir = newRunDir();
        await startJob(executor, {
          runDir,
          script: script('python3 train.py --steps 5 --step-seconds 0', runDir),
        });
        await waitForStatus(executor, runDir);
        const bus = new EventBus();
        const seen: TrainMetric[] = [];
        bus.on((e) => e.type === 'metric' && seen.push(e.metric));
        const reader = new PollingMetricsReader({
          executor,
          runId: 'r',
          runDir,
          bus,
          clock: systemClock,
          timing: scaleTiming(1),
        });
        await reader.pollOnce();
        assert.equal(await reader.pollOnce(), 0);
        assert.deepEqual(seen, metricsOf(path.join(runDir, 'metrics.jsonl')));
      });
    });
  }
});

/**
 * Forwards to the real executor but breaks the first stream after `dropAfter`
 * chunks, in the middle of a chunk, as a dropped connection would.
 */
class DroppingExecutor extends ShellExecutor {
  streams = 0;
  dropped = false;
  constructor(
    private readonly real: LocalExecutor,
    private readonly dropAfter: number,
  ) {
    super(real, '/bin/sh', process.env.PATH ?? '/usr/bin:/bin');
  }

  override stream(command: string, options: StreamOptions): Promise<ExecResult> {
    if (++this.streams > 1) return this.real.stream(command, options);
    const cut = new AbortController();
    options.signal?.addEventListener('abort', () => cut.abort(), { once: true });
    let chunks = 0;
    return new Promise<ExecResult>((resolve, reject) => {
      this.real
        .stream(command, {
          signal: cut.signal,
          onStderr: options.onStderr,
          onStdout: (chunk) => {
            if (this.dropped) return;
            if (++chunks < this.dropAfter || chunk.length < 2) {
              options.onStdout(chunk);
              return;
            }
            // Half of this chunk gets through, then the connection is gone.
            options.onStdout(chunk.subarray(0, Math.floor(chunk.length / 2)));
            this.dropped = true;
            cut.abort();
            reject(new ExecError('connection', 'connection reset by the test'));
          },
        })
        .then(resolve, (error: unknown) => {
          if (!this.dropped) reject(error);
        });
    });
  }
}

function percentile(sorted: number[], p: number): number {
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? NaN;
}

describe('following a live job through the LocalExecutor', function () {
  let root: string;
  let local: LocalExecutor;

  before(function () {
    if (python === null)
      assert.fail(
        'python3 (>= 3.7) is not on PATH: install it (apt-get install -y python3; `npm run test:integration` does)',
      );
    root = realpathSync(mkdtempSync(path.join(tmpdir(), 'ob-follow-')));
    local = new LocalExecutor();
  });

  after(() => {
    if (!root) return;
    const left = liveProcessesIn(root);
    for (const pid of left) process.kill(pid, 'SIGKILL');
    local.dispose();
    rmSync(root, { recursive: true, force: true });
    assert.deepEqual(left, [], 'no job or tail left running');
  });

  it('publishes every line once and in order across a forced stream drop; measures append-to-event latency', async () => {
    const runDir = path.join(root, 'run');
    mkdirSync(runDir);
    cpSync(path.join(EXAMPLE, 'train.py'), path.join(runDir, 'train.py'));
    cpSync(path.join(EXAMPLE, 'data'), path.join(runDir, 'data'), { recursive: true });
    const executor = new DroppingExecutor(local, 12);
    const bus = new EventBus();
    const published: TrainMetric[] = [];
    const latenciesMs: number[] = [];
    const warnings: string[] = [];
    bus.on((event) => {
      if (event.type === 'metric') {
        published.push(event.metric);
        // `time` is the trainer's clock just before its write (same machine).
        latenciesMs.push(Date.now() - event.metric.time * 1000);
      }
      if (event.type === 'log' && event.level === 'warn') warnings.push(event.message);
    });
    // 10 lines/s (and an evaluation every 5 steps), as the benchmark's target load.
    await startJob(local, {
      runDir,
      script: jobScript(
        { trainer: 'command', command: 'python3 train.py --steps 60 --step-seconds 0.1' },
        { runDir, jobEnvFile: null },
      ),
    });
    const follower = new MetricsFollower({
      executor,
      runId: 'r',
      runDir,
      bus,
      clock: systemClock,
      timing: scaleTiming(1), // production: status every 2 s
    });
    const result = await follower.follow();
    assert.deepEqual(result.status, { kind: 'exited', code: 0 });
    assert.ok(executor.dropped, 'the stream was dropped');
    assert.ok(executor.streams >= 2, 'and reconnected');
    assert.match(
      warnings.join('\n'),
      /metrics stream ended \(connection reset by the test\); resuming from byte \d+/,
    );
    const onDisk = metricsOf(path.join(runDir, 'metrics.jsonl'));
    assert.equal(onDisk.length, 60 + 12);
    assert.deepEqual(published, onDisk, 'none lost, none duplicated, same order');
    const sorted = [...latenciesMs].sort((a, b) => a - b);
    const p50 = percentile(sorted, 50);
    const p95 = percentile(sorted, 95);
    console.log(
      `      append-to-event latency over ${sorted.length} metrics: p50 ${p50.toFixed(1)} ms, p95 ${p95.toFixed(1)} ms, max ${(sorted[sorted.length - 1] ?? 0).toFixed(1)} ms`,
    );
    // Streaming, not polling: half the lines arrive far sooner than a 2 s poll would bring them.
    assert.ok(p50 < 500, `p50 ${p50} ms`);
    await waitFor('the stream to be gone', 5_000, async () =>
      liveProcessesIn(runDir).length === 0 ? true : null,
    );
  });

  it('aborting the follow stops the stream and leaves the job running', async () => {
    const runDir = path.join(root, 'abort');
    mkdirSync(runDir);
    const { pid } = await startJob(local, {
      runDir,
      script: jobScript({ trainer: 'command', command: 'sleep 300' }, { runDir, jobEnvFile: null }),
    });
    const controller = new AbortController();
    const follower = new MetricsFollower({
      executor: local,
      runId: 'r',
      runDir,
      bus: new EventBus(),
      clock: systemClock,
      timing: scaleTiming(4),
    });
    const done = follower.follow(controller.signal);
    await new Promise((resolve) => setTimeout(resolve, 700));
    controller.abort();
    await assert.rejects(done);
    assert.deepEqual(await jobStatus(local, runDir), { kind: 'running' });
    assert.ok(liveGroupMembers(pid).length > 0);
    await waitFor('the tail to be gone', 5_000, async () =>
      liveProcessesIn(runDir).every((p) => liveGroupMembers(pid).includes(p)) ? true : null,
    );
    assert.equal(await cancelJob(local, runDir, { termWaitS: 2 }), 'cancelled');
  });
});
