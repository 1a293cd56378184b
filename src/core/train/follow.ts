/**
 * Following a job: its metrics as they are written, its status until it ends.
 *
 * Polling `tail -c +N | head -c LIMIT` every 2 s (the overbrainer CLI's way) brings a metric
 * to the screen up to 2 s late. Here the metrics file is STREAMED (one
 * long-lived `tail -F` on the target) and every complete line becomes a
 * `metric` event the moment its bytes arrive. The pod pushes what changes on
 * the same channel (stderr): signs of life, and the job's status once it
 * ended, when the stream ends by itself. So while the stream speaks nothing is
 * asked; the status script is asked at the start, after a stream dropped or
 * fell silent (a dead channel), and on `statusPollMs` while streaming does not
 * work. The byte offset of the last complete line is kept, so a dropped
 * stream resumes exactly there: no line lost, none published twice. Once the
 * job ended the file is drained to its end with bounded reads.
 *
 * Following never touches the job: aborting it stops the stream only, and a
 * target that stops answering ends the follow with {@link FollowError} while
 * the job keeps running (attach again later).
 */
import { abortError, isAbortError, type Clock } from '../clock';
import { describeError } from '../errors';
import type { EventBus, JobStatus } from '../events';
import { ExecError, type Executor } from '../exec/executor';
import type { Timing } from '../timing';
import { jobStatus, METRICS_FILE, remotePath } from './job';
import { READ_LIMIT_BYTES, type ParsedLine } from './metrics';
import { MetricLines } from './metricLines';
import { PushReader, streamCommand, type EndedJobStatus, type PodPushSink } from './podWatcher';
import {
  FollowError,
  heartbeatSeconds,
  silenceLimitMs,
  type FollowOutcome,
  type FollowResult,
} from './followOutcome';

export {
  FollowError,
  heartbeatSeconds,
  silenceLimitMs,
  type FollowErrorKind,
  type FollowOutcome,
  type FollowResult,
} from './followOutcome';
export {
  pollCommand,
  PollingMetricsReader,
  type PollingMetricsReaderOptions,
} from './pollingReader';
export {
  PUSH_ALIVE,
  PUSH_STATUS,
  streamCommand,
  type EndedJobStatus,
  type PodPushSink,
} from './podWatcher';

export type FollowTiming = Pick<
  Timing,
  'statusPollMs' | 'watchFailuresTolerated' | 'requestTimeoutMs'
>;

export interface MetricsFollowerOptions {
  executor: Executor;
  runId: string;
  /** The run directory on the target (absolute). */
  runDir: string;
  bus: EventBus;
  clock: Clock;
  timing: FollowTiming;
  /** Where to start in metrics.jsonl; 0 (the default) replays the whole file, as attach needs. */
  fromOffset?: number;
  /**
   * Stream the file (default). False reads it with bounded reads at each
   * status poll only (for targets without a working `tail -F`).
   */
  stream?: boolean;
  /** Every parsed line that is not a metric (begin, end, stage, eval progress, skips). */
  onLine?: (line: ParsedLine) => void;
  /** Have the pod push its checkpoints and disk samples on the stream too, to this sink. */
  pushes?: PodPushSink;
}

interface StreamState {
  generation: number;
  controller: AbortController;
  startedMs: number;
  bytes: number;
  /** When the channel last carried anything (metrics, a sign of life). */
  heardMs: number;
}

export class MetricsFollower {
  private readonly lines: MetricLines;
  private readonly metricsPath: string;
  private lastStatus: JobStatus | null = null;
  private stream: StreamState | null = null;
  private generation = 0;
  private wakePending = false;
  private wakeNap: (() => void) | null = null;
  private streamTrouble = false;
  private following = false;
  /** The job's end as the pod pushed it on the stream, not yet acted on. */
  private pushed: EndedJobStatus | null = null;
  /** Whether the pushes' sink was last told the channel is up. */
  private live = false;

  constructor(private readonly options: MetricsFollowerOptions) {
    this.lines = new MetricLines(options);
    this.metricsPath = remotePath(options.runDir, METRICS_FILE);
  }

  /** Byte offset just after the last complete line published. */
  get offset(): number {
    return this.lines.framer.offset;
  }

  /** Metric events published so far. */
  get metricCount(): number {
    return this.lines.published;
  }

  /** The latest status seen. */
  get status(): JobStatus | null {
    return this.lastStatus;
  }

  /**
   * Resolves at the first failed attempt to reach the job (before the failure budget is spent),
   * so the one following may look whether the target itself is gone meanwhile.
   */
  private failedOnce: () => void = () => undefined;
  readonly firstFailure = new Promise<void>((resolve) => (this.failedOnce = resolve));

  /**
   * Follows until the job ends (resolves with its status once the file is drained), `signal`
   * aborts (rejects with an AbortError; the job is not touched), or the target stops answering
   * (rejects with FollowError): {@link outcome}, with its failures thrown.
   */
  async follow(signal?: AbortSignal): Promise<FollowResult> {
    const outcome = await this.outcome(signal);
    if (outcome.kind === 'ended') return outcome.result;
    throw outcome.error;
  }

  /** Follows until the job ends, `signal` aborts or the target stops answering: how, as a value. */
  async outcome(signal?: AbortSignal): Promise<FollowOutcome> {
    if (this.following) throw new Error('this follower is already following');
    this.following = true;
    try {
      return { kind: 'ended', result: await this.loop(signal) };
    } catch (error) {
      if (error instanceof FollowError) return { kind: 'unreachable', error, offset: this.offset };
      if (signal?.aborted || isAbortError(error)) {
        return { kind: 'stopped', error, offset: this.offset };
      }
      throw error;
    } finally {
      this.stopStream();
      this.following = false;
    }
  }

  private async loop(signal: AbortSignal | undefined): Promise<FollowResult> {
    const { timing } = this.options;
    const budget = { failures: 0 };
    for (;;) {
      if (signal?.aborted) throw abortError(signal);
      const live = this.stream;
      if (live !== null) {
        // The pod pushes the job's end and signs of life on the stream: nothing to ask while
        // it speaks. A silent one is a dead channel (a half-open connection): dropped, and the
        // status is asked as after any dropped stream. The nap lasts until the silence would
        // be too long, not a status poll: a wake-up every 2 s that found the stream speaking
        // cost the client about 30 timers, AbortControllers and listeners a minute (issue 39);
        // the stream's end wakes it at once.
        const silentForMs = this.options.clock.nowMs() - live.heardMs;
        if (silentForMs < silenceLimitMs(timing)) {
          await this.nap(silenceLimitMs(timing) - silentForMs, signal);
          continue;
        }
        this.stopStream();
        this.troubled(`silent for ${Math.round(silenceLimitMs(timing) / 1000)} s`);
      }
      let status: JobStatus | null = this.pushed;
      this.pushed = null;
      if (status === null) {
        try {
          status = await jobStatus(this.options.executor, this.options.runDir, {
            signal,
            timeoutMs: timing.requestTimeoutMs,
          });
          budget.failures = 0;
        } catch (error) {
          this.failed(error, budget, signal, 'status');
        }
      }
      if (status !== null) {
        this.noteStatus(status);
        if (status.kind !== 'running') {
          this.stopStream();
          const offset = await this.drain(signal, budget);
          return { status, metrics: this.lines.published, offset };
        }
        if (this.stream === null) {
          // Catch up with bounded reads before (re)starting the stream: this
          // replays a long file fast on attach, and keeps metrics coming
          // every poll even when streaming does not work on the target.
          try {
            await this.catchUp(signal);
          } catch (error) {
            this.failed(error, budget, signal, 'read');
          }
          if (this.options.stream !== false) this.startStream(signal);
        }
      }
      await this.nap(timing.statusPollMs, signal);
    }
  }

  /** Counts a failure; throws the abort, or FollowError once the budget is spent. */
  private failed(
    error: unknown,
    budget: { failures: number },
    signal: AbortSignal | undefined,
    what: string,
  ): void {
    if (signal?.aborted || isAbortError(error)) throw signal ? abortError(signal) : error;
    budget.failures++;
    this.failedOnce();
    const reason = describeError(error);
    this.options.bus.publish({
      type: 'log',
      level: 'debug',
      message: `run ${this.options.runId}: ${what} failed (${budget.failures} in a row): ${reason}`,
    });
    const tolerated = this.options.timing.watchFailuresTolerated;
    if (budget.failures > tolerated) {
      throw new FollowError(
        'unreachable',
        this.options.runId,
        budget.failures,
        `stopped following run ${this.options.runId} after ${budget.failures} failed attempts in a row ` +
          `(last: ${reason}); the job keeps running on its target — attach to the run again to follow it`,
        { cause: error },
      );
    }
  }

  private noteStatus(status: JobStatus): void {
    const previous = this.lastStatus;
    this.lastStatus = status;
    const same =
      previous !== null &&
      previous.kind === status.kind &&
      (previous.kind !== 'exited' || status.kind !== 'exited' || previous.code === status.code);
    if (!same) this.options.bus.publish({ type: 'jobStatus', runId: this.options.runId, status });
  }

  /** Reads from the framer's position with bounded reads until a short one. */
  private async catchUp(signal: AbortSignal | undefined): Promise<void> {
    this.lines.framer.dropPending();
    for (;;) {
      if (signal?.aborted) throw abortError(signal);
      const chunk = await this.readAt(this.lines.framer.offset + this.lines.framer.pendingBytes);
      this.consume(chunk);
      if (chunk.length < READ_LIMIT_BYTES) return;
    }
  }

  /**
   * Reads the rest of the finished file (1 MiB at a time) and publishes it;
   * its last line counts even without a terminator, since nothing can follow.
   * Failed reads are retried on the poll interval within the failure budget.
   */
  private async drain(
    signal: AbortSignal | undefined,
    budget: { failures: number },
  ): Promise<number> {
    this.lines.framer.dropPending();
    for (;;) {
      if (signal?.aborted) throw abortError(signal);
      let chunk: Buffer;
      try {
        chunk = await this.readAt(this.lines.framer.offset + this.lines.framer.pendingBytes);
        budget.failures = 0;
      } catch (error) {
        this.failed(error, budget, signal, 'reading the metrics');
        await this.nap(this.options.timing.statusPollMs, signal);
        continue;
      }
      if (chunk.length === 0) break;
      this.consume(chunk);
    }
    this.lines.finish();
    return this.lines.framer.offset;
  }

  private async readAt(position: number): Promise<Buffer> {
    try {
      return await this.options.executor.readRange(this.metricsPath, position, READ_LIMIT_BYTES);
    } catch (error) {
      // No metrics file yet: the job has not written a line.
      if (error instanceof ExecError && error.kind === 'not_found') return Buffer.alloc(0);
      throw error;
    }
  }

  private startStream(signal: AbortSignal | undefined): void {
    const generation = ++this.generation;
    const controller = new AbortController();
    const onAbort = (): void => controller.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    // The stream starts at the offset of the last complete line.
    this.lines.framer.dropPending();
    const state: StreamState = {
      generation,
      controller,
      startedMs: this.options.clock.nowMs(),
      bytes: 0,
      heardMs: this.options.clock.nowMs(),
    };
    this.stream = state;
    let stderrTail = '';
    let stderrLine = '';
    const reader = new PushReader(this.options.pushes);
    const command = streamCommand(
      this.options.runDir,
      this.lines.framer.offset,
      heartbeatSeconds(this.options.timing),
      this.options.pushes ?? null,
    );
    this.options.executor
      .stream(command, {
        signal: controller.signal,
        onStdout: (chunk) => {
          // A stream replaced or stopped may still deliver: its bytes are not ours.
          if (this.stream?.generation !== generation) return;
          state.bytes += chunk.length;
          state.heardMs = this.options.clock.nowMs();
          this.setLive(true);
          this.consume(chunk);
        },
        onStderr: (chunk) => {
          if (this.stream?.generation !== generation) return;
          state.heardMs = this.options.clock.nowMs();
          this.setLive(true);
          // A look's lines can be long (a checkpoint's files): kept whole up to 1 MiB.
          const lines = (stderrLine + chunk.toString('utf8')).split('\n');
          stderrLine = lines.pop()!.slice(-(1 << 20));
          for (const line of lines) {
            if (reader.line(line)) continue;
            stderrTail = `${stderrTail}${line}\n`.slice(-500);
          }
        },
      })
      .then(
        (result) => ({ code: result.code, error: null as unknown }),
        (error: unknown) => ({ code: null, error }),
      )
      .then(({ code, error }) => {
        signal?.removeEventListener('abort', onAbort);
        if (this.stream?.generation !== generation || controller.signal.aborted) return;
        this.stream = null;
        this.setLive(false);
        if (code === 0) {
          // The job ended: its status as pushed (else asked now), not at the next poll.
          this.pushed = reader.ended;
          this.wake();
          return;
        }
        const tail = (stderrTail + stderrLine.slice(-500)).trim();
        this.troubled(
          error instanceof Error ? error.message : `exit ${code}${tail ? `: ${tail}` : ''}`,
        );
        // A stream that lived or delivered is restarted at once; one that
        // failed right away waits for the next poll, so a target without a
        // working tail is read every poll instead of hammered.
        const livedMs = this.options.clock.nowMs() - state.startedMs;
        if (state.bytes > 0 || livedMs >= this.options.timing.statusPollMs) this.wake();
      })
      .catch(() => {
        // Only a listener could throw here, and the bus isolates listeners.
      });
  }

  /** Says once per follow that the stream had to be resumed, and why. */
  private troubled(why: string): void {
    if (this.streamTrouble) return;
    this.streamTrouble = true;
    this.options.bus.publish({
      type: 'log',
      level: 'warn',
      message: `run ${this.options.runId}: the metrics stream ended (${why}); resuming from byte ${this.lines.framer.offset}`,
    });
  }

  private stopStream(): void {
    const stream = this.stream;
    this.stream = null;
    this.setLive(false);
    stream?.controller.abort();
  }

  /** Tells the pushes' sink when the channel comes up or goes down (once per change). */
  private setLive(live: boolean): void {
    if (this.live === live) return;
    this.live = live;
    this.options.pushes?.live(live);
  }

  private consume(chunk: Buffer): void {
    this.lines.push(chunk);
  }

  /** Sleeps `ms`, or less when {@link wake} is called (the stream ended). */
  private async nap(ms: number, signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) throw abortError(signal);
    if (this.wakePending) {
      this.wakePending = false;
      return;
    }
    const controller = new AbortController();
    const onAbort = (): void => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    this.wakeNap = () => controller.abort();
    try {
      await this.options.clock.sleep(ms, controller.signal);
    } catch (error) {
      if (!isAbortError(error)) throw error;
    } finally {
      this.wakeNap = null;
      signal?.removeEventListener('abort', onAbort);
    }
    this.wakePending = false;
    if (signal?.aborted) throw abortError(signal);
  }

  private wake(): void {
    if (this.wakeNap !== null) this.wakeNap();
    else this.wakePending = true;
  }
}
