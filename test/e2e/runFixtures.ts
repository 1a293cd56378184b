/**
 * Runs written into a journey's workspace as other clients leave them on disk, for the windows
 * that read them without training: a finished run with its loss curve (what a retrieved run
 * holds: run.json and metrics.jsonl), and run records seeded through the real RunStore and
 * PodRecord (what the CLI or another window writes), at a clock the journey chooses.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { systemClock } from '../../src/core/clock';
import { newPodRecord } from '../../src/core/runs/podRecord';
import { encodeRunRecord, type RunRecord } from '../../src/core/runs/runRecord';
import { RunStore } from '../../src/core/runs/store';

/** A workspace's overbrainer.toml with a pod target and no [training]: nothing trains from it. */
export const POD_TARGET_TOML =
  '[project]\nname = "tiny"\n\n[targets.pod]\nkind = "runpod"\ngpu_types = ["NVIDIA GeForce RTX 4090"]\nmax_hours = 1\n';

/** A pod's public host key, as a record keeps it (nothing connects to it). */
const HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl';

/** A finished run's curve: a `log` line per step, the trainer's clock `stepSeconds` apart. */
export interface FinishedRun {
  id: string;
  /** run.json's `created` (RFC 3339). */
  created: string;
  remoteDir: string;
  steps: number;
  /** The trainer's clock at the `begin` line (unix s); step N is at start + N × stepSeconds. */
  startS: number;
  stepSeconds: number;
  loss: (step: number) => number;
  learningRate: (step: number) => number;
  /** Lines after the last step's (a line the metrics reader skips). */
  trailer?: string[];
}

/** Writes `runs/<id>/run.json` (succeeded) and its metrics.jsonl; returns the run's folder. */
export function writeFinishedRun(ws: string, run: FinishedRun): string {
  const dir = path.join(ws, 'runs', run.id);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(
    path.join(dir, 'run.json'),
    encodeRunRecord({
      id: run.id,
      target: 'pod',
      created: run.created,
      remoteDir: run.remoteDir,
      job: null,
      state: 'succeeded',
      message: null,
    }),
  );
  const lines = [JSON.stringify({ event: 'begin', time: run.startS, max_steps: run.steps })];
  for (let step = 1; step <= run.steps; step++) {
    lines.push(
      JSON.stringify({
        event: 'log',
        time: run.startS + run.stepSeconds * step,
        step,
        max_steps: run.steps,
        loss: run.loss(step),
        learning_rate: run.learningRate(step),
      }),
    );
  }
  lines.push(...(run.trailer ?? []));
  fs.writeFileSync(path.join(dir, 'metrics.jsonl'), `${lines.join('\n')}\n`);
  return dir;
}

/** A RunStore whose clock stands at `ms`, so a run's ID and creation time are what the test says. */
export function runStoreAt(runsDir: string, ms: number): RunStore {
  return new RunStore(runsDir, { nowMs: () => ms, sleep: systemClock.sleep });
}

/** The pod a seeded run's pod.json records, created at the run's time. */
export interface SeededPod {
  id: string;
  gpuType: string;
  /** The attempt's limit, from which its deadline is set. */
  maxHours: number;
  costPerHourUsd: number;
  /** Deleted by the client this long after its creation; absent: still running. */
  deletedAfterMs?: number;
}

/** A run of project "tiny" as the CLI records it. */
export interface SeededRun {
  atMs: number;
  target: 'pod' | 'local';
  state: RunRecord['state'];
  message?: string;
  pod?: SeededPod;
}

/** Creates the run in `runsDir` through the RunStore (and its pod.json); returns its record. */
export function seedRun(runsDir: string, seed: SeededRun): RunRecord {
  const store = runStoreAt(runsDir, seed.atMs);
  const run = store.create({ project: 'tiny', target: seed.target, remoteDir: (id) => id });
  run.state = seed.state;
  if (seed.message !== undefined) run.message = seed.message;
  store.saveRun(run);
  if (seed.pod !== undefined) {
    const { id, gpuType, maxHours, costPerHourUsd, deletedAfterMs } = seed.pod;
    const pod = newPodRecord(run.id, false, 1, HOST_KEY);
    pod.beginAttempt(gpuType, seed.atMs, maxHours);
    pod.created({ id, costPerHourUsd }, 'created', seed.atMs);
    if (deletedAfterMs === undefined) pod.state = 'running';
    else pod.deleted('client', seed.atMs + deletedAfterMs);
    store.savePod(pod);
  }
  return run;
}
