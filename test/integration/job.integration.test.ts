/**
 * The job's launcher, status and cancel scripts run for real under sh (the
 * system's /bin/sh), dash and busybox sh (busybox's own applets only: no
 * nohup, busybox tail), with the example trainer (examples/tiny/train.py) as
 * the job; and the metrics follower streaming a live job through the real
 * LocalExecutor, across a forced stream drop, with its latency measured.
 *
 * This file: the job scripts on real shells (the shells and waits: test/helpers/jobShells.ts).
 */
import assert from 'node:assert/strict';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { systemClock } from '../../src/core/clock';
import { EventBus, type CoreEvent, type TrainMetric } from '../../src/core/events';
import type { Executor } from '../../src/core/exec/executor';
import { LocalExecutor } from '../../src/core/exec/local';
import { scaleTiming } from '../../src/core/timing';
import { MetricsFollower, PollingMetricsReader } from '../../src/core/train/follow';
import { cancelJob, JobError, jobScript, jobStatus, startJob } from '../../src/core/train/job';
import { jobOutcome } from '../../src/core/train/outcome';
import {
  EXAMPLE,
  liveGroupMembers,
  liveProcessesIn,
  waitFor,
  waitForStatus,
  metricsOf,
  python,
  variants,
} from '../helpers/jobShells';

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
