/**
 * A pruned trial's timeline, from the lab's events (each stamped as it was published) and the
 * emulator's ledger (its pod's creation and deletion, what it billed): where the seconds a pruned
 * trial is billed go, before its job and after the pruner's verdict. bench/sweepFigures.ts prints
 * the mean per seed, and every pruned trial's timeline with `--timeline`.
 */
import type { SweepRecord } from '../src/core/flow/sweep';
import type { Lab } from '../test/helpers/lifecycle';

/** The moments of one pruned trial, ms after its pod's creation (null: not seen). */
export interface PrunedTimeline {
  trial: number;
  runId: string;
  /** Pod ready (answers SSH, preflight done). */
  ready: number | null;
  /** The job started (the run `running`). */
  started: number | null;
  firstMetric: number | null;
  /** The sweep's log: the pruner stops it. */
  verdict: number | null;
  /** The step the pruner judged. */
  step: number | null;
  /** The client saw the job's end (cancelled). */
  jobEnded: number | null;
  /** The run recorded ended (its results home, or not). */
  recorded: number | null;
  /** The client announced the pod's delete. */
  deleting: number | null;
  /** The ledger: billing stopped. */
  deleted: number | null;
}

/** The phases a pruned trial's bill is made of, in ms, from its timeline. */
export interface PrunedPhases {
  /** Creation → the job started (boot, upload, job start). */
  beforeJob: number;
  /** The job's start → the verdict (the job up to its rung, and the study's answer). */
  toVerdict: number;
  /** The verdict → the client saw the job end (the cancel). */
  cancel: number;
  /** The job's end → the run recorded (the retrieval). */
  retrieve: number;
  /** Recorded → billing stopped (pod logs, the retrieved marker, the delete). */
  endPod: number;
  billed: number;
}

export function prunedTimelines(lab: Lab, record: SweepRecord): PrunedTimeline[] {
  const out: PrunedTimeline[] = [];
  for (const t of record.trials) {
    if (t.state !== 'pruned' || t.run_id === null) continue;
    const runId = t.run_id;
    const pod = lab.podsOfRun(runId)[0];
    if (pod === undefined) continue;
    const t0 = pod.createdAtMs;
    const at = (ms: number | undefined): number | null => (ms === undefined ? null : ms - t0);
    const first = (match: (e: Lab['events'][number]['event']) => boolean): number | null =>
      at(lab.events.find((r) => match(r.event))?.atMs);
    const verdictText = `trial ${t.number}: the pruner stops it at step `;
    const verdictEvent = lab.events.find(
      (r) => r.event.type === 'log' && r.event.message.includes(verdictText),
    );
    const stepText =
      verdictEvent?.event.type === 'log'
        ? verdictEvent.event.message.split(verdictText)[1]?.split(' ')[0]
        : undefined;
    out.push({
      trial: t.number,
      runId,
      ready: first((e) => e.type === 'pod' && e.runId === runId && e.status.kind === 'ready'),
      started: first((e) => e.type === 'runState' && e.runId === runId && e.state === 'running'),
      firstMetric: first((e) => e.type === 'metric' && e.runId === runId),
      verdict: at(verdictEvent?.atMs),
      step: stepText === undefined ? null : Number(stepText),
      jobEnded: first(
        (e) => e.type === 'jobStatus' && e.runId === runId && e.status.kind !== 'running',
      ),
      recorded: first(
        (e) =>
          e.type === 'runState' &&
          e.runId === runId &&
          e.state !== 'running' &&
          e.state !== 'preparing',
      ),
      deleting: first((e) => e.type === 'pod' && e.runId === runId && e.status.kind === 'deleting'),
      deleted: pod.deletedAtMs === null ? null : pod.deletedAtMs - t0,
    });
  }
  return out;
}

export function phasesOf(t: PrunedTimeline): PrunedPhases | null {
  const { started, verdict, jobEnded, recorded, deleted } = t;
  if (started === null || verdict === null || recorded === null || deleted === null) return null;
  const ended = jobEnded ?? recorded;
  return {
    beforeJob: started,
    toVerdict: verdict - started,
    cancel: ended - verdict,
    retrieve: recorded - ended,
    endPod: deleted - recorded,
    billed: deleted,
  };
}

const s = (ms: number | null): string => (ms === null ? '-' : `${(ms / 1000).toFixed(2)}`);

/** One line per pruned trial: its moments, s after its pod's creation. */
export function timelineLines(timelines: PrunedTimeline[]): string[] {
  return timelines.map(
    (t) =>
      `trial ${t.trial} (run ${t.runId}): ready ${s(t.ready)}, job started ${s(t.started)}, first metric ${s(t.firstMetric)}, verdict ${s(t.verdict)} (step ${t.step ?? '-'}), job end seen ${s(t.jobEnded)}, recorded ${s(t.recorded)}, delete announced ${s(t.deleting)}, billing stopped ${s(t.deleted)} s after its pod's creation`,
  );
}

/** The mean of each phase over the pruned trials, in words; null without a whole timeline. */
export function meanPhasesLine(timelines: PrunedTimeline[]): string | null {
  const phases = timelines.map(phasesOf).filter((p): p is PrunedPhases => p !== null);
  if (phases.length === 0) return null;
  const mean = (key: keyof PrunedPhases): string =>
    s(phases.reduce((sum, p) => sum + p[key], 0) / phases.length);
  return `a pruned trial billed ${mean('billed')} s (mean of ${phases.length}): before its job ${mean('beforeJob')} s, job to the verdict ${mean('toVerdict')} s, the cancel ${mean('cancel')} s, the retrieval ${mean('retrieve')} s, the pod's end ${mean('endPod')} s`;
}
