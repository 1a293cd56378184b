/**
 * The recovery figure (issue 19): at least 100 pod deaths injected at random moments of the job
 * (a seeded PRNG; the seed is printed, OVERBRAINER_RECOVERY_SEED replays it), into 10 runs
 * (five followed at once) in one lab against the emulator's real pods, each run dying ten times: Runpod
 * deletes the pod (404), the pod dies (EXITED), or its host stops answering (SSH silent, then
 * EXITED). Some deaths come with the newest checkpoint home damaged first (a byte appended), so
 * the recovery must skip it for the one before. Checked and printed: runs completed with verified
 * output (≥ 99 %), training lost per death (against one checkpoint interval + 60 s scaled:
 * 90 % of the deaths within it, and never behind what an earlier pod brought home), every
 * resumed checkpoint hash-verified (a damaged one never used), 0 leaked pods, every pod's spend
 * in run.json's attempts. Timings: production / 60; tiny trainer, a checkpoint every 5 steps.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { train } from '../../src/core/flow';
import { GPU, matrixLabs, type Lab } from '../helpers/lifecycle';
import { recordFault, recordFigure, recordResult, seededRandom } from '../helpers/reliability';

/**
 * Ten runs, each killed ten times. OVERBRAINER_RECOVERY_RUNS shrinks it to look at one case (the
 * figure needs the 10).
 */
const RUNS = Number(process.env.OVERBRAINER_RECOVERY_RUNS ?? 10);
/**
 * Runs followed at once. This machine plays the pods too: each pod's watchdog, watcher and
 * trainer tick 60 times faster than in production, on the client's 2 cores. Ten at once saturated
 * them (load average 11; seed 1090515392): the copies home starved, a pod got about one
 * checkpoint home in its life, and a death lost a mean of 19.9 steps, max 40, 45 of 85 within the
 * bound. Five at once (two batches, no slower in all: 263 s against 279 s): mean 11.6, max 22,
 * 82 of 84 within, 251 checkpoints home against 115.
 */
const AT_ONCE = Number(process.env.OVERBRAINER_RECOVERY_AT_ONCE ?? 5);
const DEATHS_PER_RUN = 10;
const STEP_S = 0.2;
const EVERY = 5;
/** A death comes 1..MAX_AHEAD steps after the step the attempt resumed from. */
const MAX_AHEAD = 40;
/**
 * Room for every planned death even when a recovery loses nothing: a job that reached its last
 * step before its next death is not killed again. With 150 steps the job ended first as soon as
 * the recoveries lost little (mean 2.9 steps: seed 1180941470 injected 81 deaths, not 100).
 */
const STEPS = DEATHS_PER_RUN * MAX_AHEAD + 2 * EVERY;
/**
 * One checkpoint interval plus 60 s scaled, in steps at the nominal pace: the figure the issue
 * asks for. The 60 s is the stream's lag (the pod's watcher pushes a checkpoint as soon as it is
 * saved, then the verified copy over SSH: listing, manifest, download, changed-since check,
 * beside the metrics mirror), scaled by 20 rather than the lab's 60: a copy's round trips and the
 * pod's own processes do not run 60 times faster. Asserted: at least WITHIN_SHARE of the deaths
 * within it (a stream that stops copying after a recovery, or copies that starve, fall far
 * below), and a recovery never behind what an earlier pod had brought home.
 */
const LAG_S = 60 / 20;
const LOST_BOUND_STEPS = EVERY + Math.ceil(LAG_S / STEP_S);
const WITHIN_SHARE = 0.9;

type Kind = 'vanish' | 'dies' | 'hostLost';

interface Death {
  kind: Kind;
  podId: string;
  /** The newest step the client had seen when the pod was killed. */
  lastStep: number;
  /** The newest checkpoint home was damaged just before (its step), or null. */
  damaged: number | null;
}

interface AttemptJson {
  pod_id: string | null;
  reason: string | null;
  resumed_from_step: number | null;
  resumed_from_checkpoint: string | null;
  cost_usd: number | null;
}

describe('recovery figure: 100 pod deaths at random moments of the job', function () {
  this.timeout(900_000);
  const lab = matrixLabs();

  it('≥ 99 % of runs complete with verified output; training lost per death ≤ one checkpoint interval + 60 s scaled; every resumed checkpoint hash-verified; 0 leaked pods; every attempt’s spend counted', async function () {
    const seed = Number(process.env.OVERBRAINER_RECOVERY_SEED ?? Date.now() % 2 ** 31);
    console.log(`      seed ${seed} (OVERBRAINER_RECOVERY_SEED=${seed} replays it)`);
    const rng = seededRandom(seed);
    const l = await lab({
      command: `python3 train.py --steps ${STEPS} --step-seconds ${STEP_S} --save-every ${EVERY}`,
      targetExtra: `max_recoveries = ${DEATHS_PER_RUN}`,
      timing: { checkpointPollMs: 200, requestTimeoutMs: 3_000, connectTimeoutMs: 3_000 },
    });
    // Room for every run's pod at once (the catalog's stock is a few per data center).
    await l.emulator.faults.setStock(GPU.rtx4090, RUNS * 2);
    const startedMs = Date.now();
    // Each run's plan is drawn up front, so the seed alone decides it (not the runs' interleaving).
    const plans = Array.from({ length: RUNS }, () =>
      Array.from({ length: DEATHS_PER_RUN }, () => {
        const draw = rng();
        const kind: Kind = draw < 0.45 ? 'vanish' : draw < 0.85 ? 'dies' : 'hostLost';
        return { ahead: 1 + Math.floor(rng() * MAX_AHEAD), kind, damage: rng() < 0.15 };
      }),
    );
    const figures: RunFigure[] = [];
    for (let first = 0; first < plans.length; first += AT_ONCE) {
      const batch = plans.slice(first, first + AT_ONCE);
      figures.push(...(await Promise.all(batch.map((plan, j) => driveRun(l, first + j, plan)))));
    }
    const elapsedS = (Date.now() - startedMs) / 1000;

    const deaths = figures.flatMap((f) => f.deaths);
    const completed = figures.filter((f) => f.ok).length;
    const lost: number[] = [];
    let resumedVerified = 0;
    let damagedSkipped = 0;
    let withinBound = 0;
    const problems: string[] = [];
    for (const f of figures) {
      if (!f.ok) {
        problems.unshift(`run ${f.runId}: ${f.why}`);
        continue;
      }
      const attempts = f.attempts;
      if (attempts.length !== f.deaths.length + 1) {
        problems.push(`run ${f.runId}: ${attempts.length} attempts for ${f.deaths.length} deaths`);
        continue;
      }
      f.deaths.forEach((death, k) => {
        const next = attempts[k + 1]!;
        const from = next.resumed_from_step ?? 0;
        // A death whose newest checkpoint was damaged first loses one interval more, by design.
        if (death.damaged === null) {
          lost.push(death.lastStep - from);
          if (death.lastStep - from <= LOST_BOUND_STEPS) withinBound++;
          // Never behind what an earlier pod had brought home: a recovery only loses what the
          // dead pod trained since its checkpoint came home.
          const before = attempts[k]!.resumed_from_step ?? 0;
          if (from < before) {
            problems.push(
              `run ${f.runId}: death ${k + 1} resumed from ${from}, behind the ${before} its pod started at`,
            );
          }
        }
        if (attempts[k]!.pod_id !== death.podId) {
          problems.push(`run ${f.runId}: attempt ${k + 1} names pod ${attempts[k]!.pod_id}`);
        }
        if (next.resumed_from_checkpoint !== null) {
          resumedVerified++;
          if (death.damaged !== null && from === death.damaged) {
            problems.push(`run ${f.runId}: resumed from the damaged checkpoint-${from}`);
          }
          if (death.damaged !== null && from < death.damaged) damagedSkipped++;
        }
      });
      for (const a of attempts) {
        if (typeof a.cost_usd !== 'number') problems.push(`run ${f.runId}: an attempt has no cost`);
      }
      const ledgerPods = l
        .podsOfRun(f.runId)
        .map((p) => p.id)
        .sort();
      const attemptPods = attempts.map((a) => String(a.pod_id)).sort();
      if (JSON.stringify(ledgerPods) !== JSON.stringify(attemptPods)) {
        problems.push(
          `run ${f.runId}: pods ${ledgerPods.join(',')} vs attempts ${attemptPods.join(',')}`,
        );
      }
    }
    const leaked = l.billing().map((p) => p.id);
    const rate = completed / RUNS;
    const maxLost = Math.max(0, ...lost);
    const meanLost = lost.reduce((a, b) => a + b, 0) / Math.max(1, lost.length);
    const fetched = l
      .logs()
      .map((m) => /(\d+) bytes fetched after the job ended \((\d+) reused/.exec(m))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]));
    const printed = [
      `seed ${seed}: ${deaths.length} pod deaths injected (${countKinds(deaths)}) into ${RUNS} runs, ${AT_ONCE} at once, in ${elapsedS.toFixed(0)} s`,
      `${completed}/${RUNS} runs completed with verified output (${(rate * 100).toFixed(1)} %)`,
      `training lost per death: max ${maxLost} steps, mean ${meanLost.toFixed(1)}; ${withinBound} of ${lost.length} within one interval of ${EVERY} + 60 s scaled /20 (${LOST_BOUND_STEPS} steps at ${STEP_S} s/step; at least ${WITHIN_SHARE * 100} % asserted)${withinBound < lost.length ? ', the rest lost more while the stream lagged' : ''}`,
      `${resumedVerified} resumes from a checkpoint hash-verified, ${deaths.filter((d) => d.damaged !== null).length} with the newest copy damaged first, ${damagedSkipped} of them skipped for an older one`,
      `${l.emulator.ledger().totals.podsCreated} pods created, ${leaked.length} leaked; ${l.logs().filter((m) => / is home, verified /.test(m)).length} checkpoints streamed home`,
      `bytes fetched after the job ended (tiny example, checkpoints streamed): ${fetched.length > 0 ? `max ${Math.max(...fetched)}` : 'none logged'}`,
    ];
    for (const line of printed) {
      console.log(`      ${line}`);
      recordFigure(this, 'Recovery: pod deaths at random moments of the job (issue 19)', line);
    }
    recordFault(this, 'recovery.pod-vanishes', deaths.filter((d) => d.kind === 'vanish').length);
    recordFault(this, 'recovery.pod-dies', deaths.filter((d) => d.kind === 'dies').length);
    recordFault(this, 'recovery.host-lost', deaths.filter((d) => d.kind === 'hostLost').length);
    recordResult(this, { verified: completed, lost: RUNS - completed });
    for (const problem of problems.slice(0, 20)) console.log(`      problem: ${problem}`);
    if (problems.length > 0 || process.env.OVERBRAINER_RECOVERY_RUNS !== undefined) {
      for (const w of l.warnings().filter((w) => /recovering|checkpoint_skipped/.test(w.code)))
        console.log(`      ${w.code}: ${w.message}`);
    }
    assert.ok(deaths.length >= 100, `only ${deaths.length} deaths were injected`);
    assert.deepEqual(problems, []);
    assert.ok(rate >= 0.99, `${completed}/${RUNS} completed`);
    assert.ok(
      withinBound >= WITHIN_SHARE * lost.length,
      `${withinBound} of ${lost.length} deaths lost at most ${LOST_BOUND_STEPS} steps (wanted ${WITHIN_SHARE * 100} %)`,
    );
    assert.deepEqual(leaked, []);
  });

  interface RunFigure {
    runId: string;
    ok: boolean;
    why: string;
    deaths: Death[];
    attempts: AttemptJson[];
  }

  async function driveRun(
    l: Lab,
    index: number,
    plan: { ahead: number; kind: Kind; damage: boolean }[],
  ): Promise<RunFigure> {
    let id: string | null = null;
    const flow = l.track(train(l.deps, l.config, l.workspace, { onRun: (r) => (id = r.id) })).then(
      () => null,
      (error: unknown) => String(error),
    );
    let ended = false;
    void flow.then(() => (ended = true));
    const deaths: Death[] = [];
    const killed = new Set<string>();
    /** Only metrics that came after the last kill count as the next attempt's. */
    let sinceMs = 0;
    for (const [k, step] of plan.entries()) {
      // The attempt's own pod runs its job and has gone `ahead` steps past where it started.
      await l.waitFor(
        `run ${index}: attempt ${k + 1} ${step.ahead} steps in`,
        () => {
          if (ended) return true;
          if (id === null) return false;
          try {
            const pod = l.podJson(id);
            const current = String(pod.pod_id);
            return (
              pod.state === 'running' &&
              !killed.has(current) &&
              (attemptsOf(l, id).length || 1) === k + 1 &&
              lastStepSince(l, id, sinceMs) >= attemptFrom(l, id, k) + step.ahead
            );
          } catch {
            return false;
          }
        },
        300_000,
      );
      if (ended) break;
      const runId = id!;
      const podId = String(l.podJson(runId).pod_id);
      let damaged: number | null = null;
      if (step.damage) damaged = damageNewest(l, runId);
      const seen = lastStepSince(l, runId, sinceMs);
      killed.add(podId);
      sinceMs = Date.now();
      if (step.kind === 'vanish') await l.emulator.faults.podVanishes(podId);
      else if (step.kind === 'dies') await l.emulator.faults.podDies(podId);
      else await l.emulator.faults.hostLost(podId, 500);
      deaths.push({ kind: step.kind, podId, lastStep: seen, damaged });
    }
    const error = await flow;
    const runId = id ?? '(none)';
    if (error !== null) return { runId, ok: false, why: error, deaths, attempts: [] };
    const why = verifiedOutput(l, runId);
    return { runId, ok: why === null, why: why ?? '', deaths, attempts: attemptsOf(l, runId) };
  }

  function attemptsOf(l: Lab, id: string): AttemptJson[] {
    try {
      return (l.runJson(id).attempts as AttemptJson[] | undefined) ?? [];
    } catch {
      return [];
    }
  }

  /** The step attempt `k` (0-based) started from. */
  function attemptFrom(l: Lab, id: string, k: number): number {
    return k === 0 ? 0 : (attemptsOf(l, id)[k]?.resumed_from_step ?? 0);
  }

  /** The step of the run's newest metric received after `sinceMs` (0: none yet). */
  function lastStepSince(l: Lab, id: string, sinceMs: number): number {
    let last = 0;
    for (let i = l.events.length - 1; i >= 0; i--) {
      const { atMs, event: e } = l.events[i]!;
      if (atMs <= sinceMs) break;
      if (e.type === 'metric' && e.runId === id) {
        last = e.metric.step;
        break;
      }
    }
    return last;
  }

  /** Appends a byte to a file of the newest checkpoint home; returns its step (null: none). */
  function damageNewest(l: Lab, id: string): number | null {
    try {
      const latest = JSON.parse(
        fs.readFileSync(path.join(l.runDir(id), 'checkpoints', 'latest.json'), 'utf8'),
      ) as { path: string; step: number };
      fs.appendFileSync(path.join(l.runDir(id), latest.path, 'model.json'), ' ');
      return latest.step;
    } catch {
      return null;
    }
  }

  /** Null when the run succeeded with its model at the last step and one continuous curve. */
  function verifiedOutput(l: Lab, id: string): string | null {
    const saved = l.runJson(id);
    if (saved.state !== 'succeeded')
      return `ended ${String(saved.state)}: ${String(saved.message)}`;
    const model = JSON.parse(
      fs.readFileSync(path.join(l.runDir(id), 'output', 'model.json'), 'utf8'),
    ) as { step: number };
    if (model.step !== STEPS) return `the model is at step ${model.step}`;
    const steps = fs
      .readFileSync(path.join(l.runDir(id), 'metrics.jsonl'), 'utf8')
      .split('\n')
      .filter((line) => line.includes('"loss"'))
      .map((line) => (JSON.parse(line) as { step: number }).step);
    const whole = steps.length === STEPS && steps.every((s, i) => s === i + 1);
    return whole ? null : `the curve is not 1..${STEPS} once: ${steps.length} loss lines`;
  }

  function countKinds(deaths: Death[]): string {
    const kinds: Kind[] = ['vanish', 'dies', 'hostLost'];
    return kinds.map((k) => `${k} ${deaths.filter((d) => d.kind === k).length}`).join(', ');
  }
});
