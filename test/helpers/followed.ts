/**
 * Following a job as the tests of following look at it: a bus that records what a follow
 * published (its metrics in order, how many came down a stream, their append-to-event latency,
 * its warnings), and the follower itself over the executor with its streams tapped
 * (test/helpers/streamTap.ts), so a test can act on a state (the stream delivered) and assert
 * counts and orders rather than wall time.
 */
import { systemClock } from '../../src/core/clock';
import { EventBus, type TrainMetric } from '../../src/core/events';
import type { Executor } from '../../src/core/exec/executor';
import type { Timing } from '../../src/core/timing';
import { MetricsFollower } from '../../src/core/train/follow';
import { tapStreams, type StreamTap } from './streamTap';

export interface Followed<E extends Executor> {
  readonly bus: EventBus;
  readonly tap: StreamTap<E>;
  /** Metric events, in the order published. */
  readonly published: TrainMetric[];
  /** How many of them were published from a stream's output (not a catch-up read or a poll). */
  readonly streamed: number;
  /** Each metric's append-to-event latency (the trainer's clock is this machine's): a figure. */
  readonly latenciesMs: number[];
  /** The warnings logged. */
  readonly warnings: string[];
  /** A follower of `runDir` (run id "r", the system clock) over the tapped executor. */
  follower(runDir: string, timing: Timing): MetricsFollower;
}

/** Records a follow over `executor`; `onMetric` runs after each metric is recorded. */
export function followed<E extends Executor>(
  executor: E,
  onMetric?: (metric: TrainMetric) => void,
): Followed<E> {
  const bus = new EventBus();
  const tap = tapStreams(executor);
  const published: TrainMetric[] = [];
  const latenciesMs: number[] = [];
  const warnings: string[] = [];
  let streamed = 0;
  bus.on((event) => {
    if (event.type === 'log' && event.level === 'warn') warnings.push(event.message);
    if (event.type !== 'metric') return;
    published.push(event.metric);
    if (tap.delivering) streamed++;
    latenciesMs.push(Date.now() - event.metric.time * 1000);
    onMetric?.(event.metric);
  });
  return {
    bus,
    tap,
    published,
    get streamed() {
      return streamed;
    },
    latenciesMs,
    warnings,
    follower: (runDir, timing) =>
      new MetricsFollower({
        executor: tap.executor,
        runId: 'r',
        runDir,
        bus,
        clock: systemClock,
        timing,
      }),
  };
}

/** The p-th percentile of ascending `sorted` (nearest rank). */
export function percentile(sorted: number[], p: number): number {
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? NaN;
}
