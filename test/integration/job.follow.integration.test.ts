/**
 * The job's launcher, status and cancel scripts run for real under sh (the
 * system's /bin/sh), dash and busybox sh (busybox's own applets only: no
 * nohup, busybox tail), with the example trainer (examples/tiny/train.py) as
 * the job; and the metrics follower streaming a live job through the real
 * LocalExecutor, across a forced stream drop, with its latency measured.
 *
 * This file: following a live job through the LocalExecutor (the shells and waits: test/helpers/jobShells.ts).
 */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { systemClock } from '../../src/core/clock';
import { EventBus } from '../../src/core/events';
import { ExecError, type ExecResult, type StreamOptions } from '../../src/core/exec/executor';
import { LocalExecutor } from '../../src/core/exec/local';
import { scaleTiming } from '../../src/core/timing';
import { MetricsFollower } from '../../src/core/train/follow';
import { cancelJob, jobScript, jobStatus, startJob } from '../../src/core/train/job';
import {
  EXAMPLE,
  ShellExecutor,
  liveGroupMembers,
  liveProcessesIn,
  waitFor,
  metricsOf,
  python,
} from '../helpers/jobShells';
import { followed, percentile } from '../helpers/followed';

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
    // Latency: `time` is the trainer's clock just before its write (same machine).
    const f = followed(executor);
    const { published, latenciesMs, warnings } = f;
    // 10 lines/s (and an evaluation every 5 steps), as the benchmark's target load.
    await startJob(local, {
      runDir,
      script: jobScript(
        { trainer: 'command', command: 'python3 train.py --steps 60 --step-seconds 0.1' },
        { runDir, jobEnvFile: null },
      ),
    });
    const result = await f.follower(runDir, scaleTiming(1)).follow(); // status every 2 s
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
    // Streaming, not polling: most lines came down a stream as they were written (the latency
    // above is a figure of this machine's load, not asserted); only the catch-ups read the rest.
    assert.ok(f.streamed * 2 > published.length, `${f.streamed} of ${published.length} streamed`);
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
