import assert from 'node:assert/strict';
import { isAbortError } from '../../src/core/clock';
import { EventBus, type CoreEvent, type JobStatus, type TrainMetric } from '../../src/core/events';
import {
  ExecError,
  type ExecOptions,
  type ExecResult,
  type Executor,
  type StreamOptions,
} from '../../src/core/exec/executor';
import { scaleTiming } from '../../src/core/timing';
import { FollowError, MetricsFollower, PollingMetricsReader } from '../../src/core/train/follow';
import { statusScript } from '../../src/core/train/job';
import { FakeClock, settle } from '../helpers/fakeClock';

const RUN_DIR = '/workspace/overbrainer/r1';
const METRICS = `${RUN_DIR}/metrics.jsonl`;

interface ActiveStream {
  offset: number;
  options: StreamOptions;
  settle: (outcome: { code: number } | { error: Error }) => void;
}

/**
 * A target held in memory: a metrics file that grows, a status word, streams
 * that behave like `tail -c +N -F` (deliver from N, then each append), and
 * faults (failed status polls, dropped streams). The real shells and files
 * are exercised by test/integration/job.integration.test.ts; this one pins
 * the follower's rules under a fake clock.
 */
class MemoryTarget implements Executor {
  readonly kind = 'ssh' as const;
  file: Buffer | null = null;
  status = 'running';
  failStatus = 0;
  failStreams = false;
  streams = new Set<ActiveStream>();
  streamStarts: number[] = [];
  commands: string[] = [];
  reads: { offset: number; maxBytes: number }[] = [];

  append(text: string): void {
    const bytes = Buffer.from(text, 'utf8');
    this.file = this.file === null ? bytes : Buffer.concat([this.file, bytes]);
    for (const stream of this.streams) stream.options.onStdout(bytes);
  }

  /** Drops every stream as a lost connection would. */
  drop(): void {
    for (const stream of [...this.streams])
      stream.settle({ error: new ExecError('connection', 'connection reset') });
  }

  /** The job ends: every stream pushes its status and ends, as the pod's watcher does. */
  finish(status: string): void {
    this.status = status;
    for (const stream of this.streams)
      stream.options.onStderr?.(Buffer.from(`@ob status ${status}\n`));
    this.endStreams();
  }

  /** Ends every stream as the stream command does once the job ended. */
  endStreams(): void {
    for (const stream of [...this.streams]) stream.settle({ code: 0 });
  }

  async exec(command: string, _options?: ExecOptions): Promise<ExecResult> {
    this.commands.push(command);
    if (command !== statusScript(RUN_DIR))
      throw new Error(`unexpected command: ${command.slice(0, 60)}`);
    if (this.failStatus > 0) {
      this.failStatus--;
      throw new ExecError('connection', 'no route to host');
    }
    return {
      code: 0,
      signal: null,
      stdout: Buffer.from(`${this.status}\n`),
      stderr: Buffer.alloc(0),
    };
  }

  stream(command: string, options: StreamOptions): Promise<ExecResult> {
    const match = /tail -c \+(\d+) /.exec(command);
    assert.ok(match?.[1], 'the stream is a tail -c +N');
    const offset = Number(match[1]) - 1;
    this.streamStarts.push(offset);
    return new Promise<ExecResult>((resolve, reject) => {
      if (this.failStreams) {
        reject(new ExecError('io', 'tail: not found'));
        return;
      }
      const stream: ActiveStream = {
        offset,
        options,
        settle: (outcome) => {
          if (!this.streams.delete(stream)) return;
          if ('error' in outcome) reject(outcome.error);
          else
            resolve({
              code: outcome.code,
              signal: null,
              stdout: Buffer.alloc(0),
              stderr: Buffer.alloc(0),
            });
        },
      };
      this.streams.add(stream);
      options.signal?.addEventListener(
        'abort',
        () => stream.settle({ error: new ExecError('aborted', 'aborted') }),
        {
          once: true,
        },
      );
      const existing = this.file?.subarray(offset);
      if (existing && existing.length > 0) options.onStdout(Buffer.from(existing));
    });
  }

  async readRange(path: string, offset: number, maxBytes: number): Promise<Buffer> {
    assert.equal(path, METRICS);
    this.reads.push({ offset, maxBytes });
    if (this.file === null) throw new ExecError('not_found', `${path} does not exist`);
    return Buffer.from(this.file.subarray(offset, offset + maxBytes));
  }

  writeFileAtomic(): Promise<void> {
    throw new Error('not used');
  }
  upload(): Promise<void> {
    throw new Error('not used');
  }
  download(): Promise<void> {
    throw new Error('not used');
  }
  dispose(): void {}
}

function logLine(step: number, extra: Record<string, unknown> = {}): string {
  return `${JSON.stringify({ event: 'log', time: 1000 + step, step, epoch: step / 10, max_steps: 40, loss: 2 / step, ...extra })}\n`;
}

function setup(options: { stream?: boolean; fromOffset?: number } = {}) {
  const clock = new FakeClock();
  const bus = new EventBus();
  const events: CoreEvent[] = [];
  bus.on((event) => events.push(event));
  const target = new MemoryTarget();
  const timing = scaleTiming(1); // production: status every 2 s, 5 failures tolerated
  const follower = new MetricsFollower({
    executor: target,
    runId: 'r1',
    runDir: RUN_DIR,
    bus,
    clock,
    timing,
    ...options,
  });
  const metrics = (): TrainMetric[] =>
    events.flatMap((event) => (event.type === 'metric' ? [event.metric] : []));
  const statuses = (): JobStatus[] =>
    events.flatMap((event) => (event.type === 'jobStatus' ? [event.status] : []));
  const warnings = (): string[] =>
    events.flatMap((event) =>
      event.type === 'log' && event.level === 'warn' ? [event.message] : [],
    );
  return { clock, bus, events, target, follower, metrics, statuses, warnings };
}

const steps = (metrics: TrainMetric[]): number[] => metrics.map((metric) => metric.step);

describe('MetricsFollower', () => {
  it('publishes each appended line at once, in order, without waiting for a poll', async () => {
    const { target, follower, metrics, statuses } = setup();
    target.append(logLine(1));
    const done = follower.follow();
    await settle();
    assert.deepEqual(steps(metrics()), [1]);
    assert.deepEqual(statuses(), [{ kind: 'running' }]);
    target.append(logLine(2));
    assert.deepEqual(steps(metrics()), [1, 2], 'published synchronously on arrival');
    target.append('{"event":"log","time":1003,"st');
    assert.deepEqual(steps(metrics()), [1, 2], 'an incomplete line waits');
    target.append('ep":3,"loss":0.5}\n');
    assert.deepEqual(steps(metrics()), [1, 2, 3]);
    target.finish('exited 0');
    const result = await done; // no poll: the end was pushed
    assert.equal(
      target.commands.length,
      1,
      'one status look at the start, none while the stream speaks',
    );
    assert.deepEqual(result, {
      status: { kind: 'exited', code: 0 },
      metrics: 3,
      offset: target.file?.length,
    });
    assert.deepEqual(statuses(), [{ kind: 'running' }, { kind: 'exited', code: 0 }]);
    assert.equal(target.streams.size, 0, 'the stream is stopped');
  });

  it('drains lines written after the stream stopped, and a last line without a newline', async () => {
    const { target, follower, metrics, clock } = setup();
    const done = follower.follow();
    await settle();
    target.append(logLine(1));
    target.status = 'exited 0';
    target.endStreams(); // the stream command ends when the job does...
    // ...and the job's last lines land after the tail was gone.
    target.file = Buffer.concat([
      target.file ?? Buffer.alloc(0),
      Buffer.from(logLine(2) + logLine(3).trimEnd()),
    ]);
    await clock.advanceMs(0);
    const result = await done;
    assert.deepEqual(steps(metrics()), [1, 2, 3]);
    assert.equal(result.metrics, 3);
    assert.equal(result.offset, target.file.length);
  });

  it('reconnects after a dropped stream at the exact byte offset: no line lost or repeated', async () => {
    const { target, follower, metrics, warnings } = setup();
    const done = follower.follow();
    await settle();
    for (let step = 1; step <= 3; step++) target.append(logLine(step));
    target.append(logLine(4).slice(0, 20)); // half a line, then the connection drops
    const offsetAtDrop = follower.offset;
    target.drop();
    // Written while disconnected, ending in half a line again.
    target.append(logLine(4).slice(20) + logLine(5) + logLine(6).slice(0, 7));
    await settle();
    // A stream that delivered is restarted at once, from the last complete line.
    assert.deepEqual(target.streamStarts, [
      0,
      offsetAtDrop + Buffer.byteLength(logLine(4) + logLine(5)),
    ]);
    assert.deepEqual(steps(metrics()), [1, 2, 3, 4, 5]);
    target.append(logLine(6).slice(7));
    assert.deepEqual(steps(metrics()), [1, 2, 3, 4, 5, 6]);
    assert.equal(warnings().length, 1);
    assert.match(
      warnings()[0] ?? '',
      /metrics stream ended \(connection reset\); resuming from byte/,
    );
    target.finish('exited 0');
    assert.equal((await done).metrics, 6);
  });

  it('tolerates 5 failed polls in a row, gives up on the 6th with FollowError, and never touches the job', async () => {
    const { target, follower, clock } = setup();
    target.failStatus = 5;
    const done = follower.follow();
    done.catch(() => undefined); // asserted below, once it failed
    for (let i = 0; i < 5; i++) await clock.advanceMs(2_000);
    assert.equal(target.failStatus, 0);
    await clock.advanceMs(2_000); // a success resets the count, and the stream starts
    assert.equal(target.streams.size, 1);
    // The target goes: the stream drops, no new one starts, every look fails: 5, then the 6th.
    target.failStatus = 6;
    target.failStreams = true;
    target.drop();
    for (let i = 0; i < 6; i++) await clock.advanceMs(2_000);
    await assert.rejects(done, (error: unknown) => {
      assert.ok(error instanceof FollowError);
      assert.equal(error.kind, 'unreachable');
      assert.equal(error.failures, 6);
      assert.match(error.message, /the job keeps running on its target — attach to the run again/);
      return true;
    });
    assert.ok(
      target.commands.every((command) => command === statusScript(RUN_DIR)),
      'only status was asked',
    );
    assert.equal(target.streams.size, 0);
  });

  it('stops on abort without touching the job', async () => {
    const { target, follower, clock } = setup();
    const controller = new AbortController();
    const done = follower.follow(controller.signal);
    await clock.advanceMs(2_000);
    assert.equal(target.streams.size, 1);
    controller.abort();
    await assert.rejects(done, (error: unknown) => isAbortError(error));
    assert.equal(target.streams.size, 0);
    const asked = target.commands.length;
    await clock.advanceMs(10_000);
    assert.equal(target.commands.length, asked, 'nothing runs after the abort');
    assert.ok(target.commands.every((command) => command === statusScript(RUN_DIR)));
  });

  it('attaching to an ended job reads the whole file in bounded reads, without a stream', async () => {
    const { target, follower, metrics } = setup();
    const lines: string[] = [];
    for (let step = 1; step <= 10_000; step++) lines.push(logLine(step, { pad: 'x'.repeat(250) }));
    target.file = Buffer.from(lines.join(''));
    assert.ok(target.file.length > 3 * 1024 * 1024);
    target.status = 'exited 0';
    const result = await follower.follow();
    assert.equal(result.metrics, 10_000);
    assert.deepEqual(steps(metrics()).slice(0, 3), [1, 2, 3]);
    assert.equal(new Set(steps(metrics())).size, 10_000);
    assert.deepEqual(target.streamStarts, []);
    assert.ok(target.reads.every((read) => read.maxBytes === 1024 * 1024));
    assert.equal(target.reads.length, Math.ceil(target.file.length / (1024 * 1024)) + 1);
  });

  it('resolves with no metrics when the job never wrote the file', async () => {
    const { target, follower } = setup();
    target.status = 'exited 0';
    assert.deepEqual(await follower.follow(), {
      status: { kind: 'exited', code: 0 },
      metrics: 0,
      offset: 0,
    });
  });

  it('replays from a given offset only', async () => {
    const { target, follower, metrics } = setup({
      fromOffset: Buffer.byteLength(logLine(1) + logLine(2)),
    });
    target.file = Buffer.from(logLine(1) + logLine(2) + logLine(3));
    target.status = 'cancelled';
    const result = await follower.follow();
    assert.deepEqual(steps(metrics()), [3]);
    assert.deepEqual(result.status, { kind: 'cancelled' });
  });

  it('skips bad lines with one warning each kind, and fills max_steps from begin', async () => {
    const { target, follower, metrics, warnings } = setup();
    target.file = Buffer.from(
      '{"event":"begin","time":1,"max_steps":99}\n' +
        'garbage\n' +
        'more garbage\n' +
        '{"event":"surprise"}\n' +
        '\r\n' +
        '{"event":"log","time":2,"step":1,"loss":1}\n' +
        '{"event":"log","time":3,"step":-2,"loss":1}\n',
    );
    target.status = 'exited 0';
    const seen: string[] = [];
    const result = await new MetricsFollower({
      executor: target,
      runId: 'r1',
      runDir: RUN_DIR,
      bus: (follower as unknown as { options: { bus: EventBus } }).options.bus,
      clock: new FakeClock(),
      timing: scaleTiming(1),
      onLine: (line) => seen.push(line.kind),
    }).follow();
    assert.equal(result.metrics, 1);
    assert.equal(metrics()[0]?.maxSteps, 99);
    assert.equal(warnings().length, 3, warnings().join('\n'));
    assert.match(
      warnings()[0] ?? '',
      /not valid JSON \(truncated\?\) in runs\/r1\/metrics\.jsonl at byte 42;/,
    );
    assert.deepEqual(seen, ['begin', 'skip', 'skip', 'skip', 'skip', 'skip', 'skip']);
  });

  it('keeps reading every poll when streaming does not work on the target, without hammering it', async () => {
    const { target, follower, metrics, clock, warnings } = setup();
    target.failStreams = true;
    const done = follower.follow();
    await settle();
    target.append(logLine(1));
    await clock.advanceMs(2_000);
    assert.deepEqual(steps(metrics()), [1]);
    target.append(logLine(2));
    await clock.advanceMs(2_000);
    assert.deepEqual(steps(metrics()), [1, 2]);
    assert.ok(target.streamStarts.length <= 3, `stream starts: ${target.streamStarts.length}`);
    assert.equal(warnings().length, 1);
    target.status = 'exited 0';
    await clock.advanceMs(2_000);
    assert.equal((await done).metrics, 2);
  });

  it('with stream: false reads with bounded reads on each poll', async () => {
    const { target, follower, metrics, clock } = setup({ stream: false });
    const done = follower.follow();
    await settle();
    target.append(logLine(1));
    assert.deepEqual(steps(metrics()), []);
    await clock.advanceMs(2_000);
    assert.deepEqual(steps(metrics()), [1]);
    assert.deepEqual(target.streamStarts, []);
    target.status = 'lost';
    await clock.advanceMs(2_000);
    assert.deepEqual((await done).status, { kind: 'lost' });
  });

  it('looks at the status as soon as the stream ends by itself (the job ended)', async () => {
    const { target, follower } = setup();
    const done = follower.follow();
    await settle();
    target.append(logLine(1));
    target.status = 'exited 2';
    target.endStreams();
    await settle();
    const result = await done; // no clock advance needed
    assert.deepEqual(result.status, { kind: 'exited', code: 2 });
  });

  it('sleeps until the silence limit while the stream speaks, not a wake-up per status poll', async () => {
    const { target, follower, clock, warnings } = setup();
    let naps = 0;
    const sleep = clock.sleep.bind(clock);
    clock.sleep = (ms, signal) => {
      naps++;
      return sleep(ms, signal);
    };
    const done = follower.follow();
    await settle();
    for (let step = 1; step <= 300; step++) {
      await clock.advanceMs(200);
      target.append(logLine(step));
    }
    assert.ok(naps <= 3, `${naps} naps in 60 s of a speaking stream (a poll's worth: 30)`);
    assert.equal(target.commands.length, 1, 'no status asked while it speaks');
    await clock.advanceMs(60_000); // silent for the limit (3 signs of life missed): dropped
    assert.match(warnings().join('\n'), /silent for 60 s/);
    target.finish('exited 0');
    await clock.advanceMs(2_000);
    assert.deepEqual((await done).status, { kind: 'exited', code: 0 });
  });
});

describe("PollingMetricsReader (a poll every 2 s, the benchmarks' baseline)", () => {
  it('reads complete lines from the last complete offset on each poll', async () => {
    const bus = new EventBus();
    const seen: number[] = [];
    bus.on((event) => {
      if (event.type === 'metric') seen.push(event.metric.step);
    });
    let file = '';
    const commands: string[] = [];
    const executor = {
      exec: async (command: string) => {
        commands.push(command);
        const match = /tail -c \+(\d+) '([^']+)' 2>\/dev\/null \| head -c (\d+)/.exec(command);
        assert.ok(match);
        const out = Buffer.from(file).subarray(
          Number(match[1]) - 1,
          Number(match[1]) - 1 + Number(match[3]),
        );
        return { code: 0, signal: null, stdout: out, stderr: Buffer.alloc(0) };
      },
    } as unknown as Executor;
    const reader = new PollingMetricsReader({
      executor,
      runId: 'r1',
      runDir: RUN_DIR,
      bus,
      clock: new FakeClock(),
      timing: scaleTiming(1),
    });
    file = logLine(1) + logLine(2).slice(0, 10);
    assert.equal(await reader.pollOnce(), 1);
    file += logLine(2).slice(10) + logLine(3);
    assert.equal(await reader.pollOnce(), 2);
    assert.deepEqual(seen, [1, 2, 3]);
    assert.match(commands[1] ?? '', new RegExp(`tail -c \\+${Buffer.byteLength(logLine(1)) + 1} `));
  });
});
