/**
 * What following a job gives back: its result, how the follow ended as a value, the error of a
 * target that stopped answering, and the pace of the pod's signs of life on the stream.
 */
import { HintedError } from '../errors';
import type { Timing } from '../timing';
import type { EndedJobStatus } from './podWatcher';

export interface FollowResult {
  /** How the job ended. */
  status: EndedJobStatus;
  /** Metric events published by this follow (from `fromOffset`, the whole file by default). */
  metrics: number;
  /** Bytes of metrics.jsonl read: its size once drained. */
  offset: number;
}

export type FollowErrorKind =
  /** Too many status polls or reads failed in a row; the job keeps running. */
  'unreachable';

export class FollowError extends HintedError<FollowErrorKind> {
  constructor(
    kind: FollowErrorKind,
    readonly runId: string,
    readonly failures: number,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(
      kind,
      message,
      `Follow it again with \`overbrainer train attach ${runId}\` once its target answers.`,
      options,
    );
    this.name = 'FollowError';
  }
}

/**
 * How a follow ended, as a value: the job ended (its file drained), the target stopped answering
 * (too many failed attempts in a row: the job keeps running), or the follow was stopped (its
 * signal). `offset` is where a later follow goes on from.
 */
export type FollowOutcome =
  | { kind: 'ended'; result: FollowResult }
  | { kind: 'unreachable'; error: FollowError; offset: number }
  | { kind: 'stopped'; error: unknown; offset: number };

/** The pod's sign of life on the stream, in whole seconds: ten status polls' worth. */
export function heartbeatSeconds(timing: Pick<Timing, 'statusPollMs'>): number {
  return Math.max(1, Math.round((timing.statusPollMs * 10) / 1000));
}

/** A stream silent this long (three signs of life missed) is taken for a dead channel. */
export function silenceLimitMs(timing: Pick<Timing, 'statusPollMs'>): number {
  return 3 * heartbeatSeconds(timing) * 1000;
}
