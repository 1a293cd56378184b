/**
 * A lab (./lifecycle.ts) for sweeps: examples/sweep/train.py as the job, its params as `{name}`
 * placeholders, a `[sweep]` named lr-rank on the real Optuna (/usr/bin/python3, Debian's
 * python3-optuna); its trials' runs and sweep.json as written; and a client process running the
 * sweep (./sweepChild.ts), to be killed or stopped from the test's own client; each test's lab
 * closed after it with no pod left billing, and a trial's job result checked against its record.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { SweepRecord, TrialRecord } from '../../src/core/flow/sweep';
import { childBundle } from './childBundle';
import { openGate } from './gatedJob';
import { BUNDLE_NODE_ARGS, ROOT } from './cli';
import { Lab } from './lifecycle';

export const PYTHON = '/usr/bin/python3';
export const SWEEP = 'lr-rank';

export function sweepToml(extra: string): string {
  return `max_cost_usd = 0.5

[sweep]
name = "${SWEEP}"
metric = "eval_loss"
direction = "minimize"
sampler = "random"
sampler_seed = 3
pruner = "none"
${extra}

[sweep.params]
learning_rate = { low = 1e-5, high = 1e-2, log = true }
lora_r = [4, 8, 16, 32]
`;
}

/**
 * One lab per test (a describe's): `use` hands over the test's lab, closed after the test, which
 * fails when the emulator's ledger still has a pod of it billing.
 */
export function sweepLabPerTest(): { use(lab: Lab): Lab } {
  let current: Lab | null = null;
  afterEach(async function () {
    const billing = (await current?.close()) ?? [];
    current = null;
    assert.deepEqual(billing, [], 'a pod was left billing');
  });
  return { use: (lab) => (current = lab) };
}

/** What examples/sweep/train.py wrote to output/result.json. */
export interface TrialResult {
  learning_rate: number;
  lora_r: number;
  eval_loss: number;
}

/**
 * The trial's job ran with its own params and its result is what the sweep recorded: its
 * output/result.json (examples/sweep/train.py's) holds the trial's rank (the param `rank`) and,
 * unless `objective` is false, the trial's objective as its eval_loss.
 */
export function assertTrialResult(
  lab: Lab,
  t: TrialRecord,
  { rank = 'lora_r', objective = true }: { rank?: string; objective?: boolean } = {},
): TrialResult {
  const out = JSON.parse(
    fs.readFileSync(path.join(lab.runDir(t.run_id!), 'output', 'result.json'), 'utf8'),
  ) as TrialResult;
  assert.equal(out.lora_r, t.params[rank], `trial ${t.number}'s job ran with its ${rank}`);
  if (objective) assert.equal(out.eval_loss, t.objective, `trial ${t.number}'s objective`);
  return out;
}

/**
 * A lab whose trials run `steps` steps of `stepSeconds`, an eval_loss every 5; `gated`: each job
 * then waits for the test to let it end (./gatedJob.ts's `go` file in its run dir on its pod).
 */
export async function sweepLab(
  extra: string,
  stepSeconds = 0.05,
  steps = 20,
  { gated = false }: { gated?: boolean } = {},
): Promise<Lab> {
  const gate = gated ? ' && while [ ! -e go ]; do sleep 0.5; done' : '';
  const lab = await Lab.start({
    command: `python3 train.py --steps ${steps} --step-seconds ${stepSeconds} --eval-every 5 --learning-rate {learning_rate} --lora-r {lora_r}${gate}`,
    targetExtra: sweepToml(extra),
  });
  fs.copyFileSync(
    path.join(ROOT, 'examples', 'sweep', 'train.py'),
    path.join(lab.workspace, 'train.py'),
  );
  return lab;
}

/** Each trial's run.json as written: the run's ID, state and sweep link. */
export function trialRuns(lab: Lab): { id: string; state: string; trial: number }[] {
  return lab.store
    .list()
    .runs.filter((r) => r.sweep?.name === SWEEP)
    .map((r) => ({ id: r.id, state: r.state, trial: r.sweep!.trial }))
    .sort((a, b) => a.trial - b.trial);
}

export function sweepJson(lab: Lab): SweepRecord {
  return JSON.parse(
    fs.readFileSync(path.join(lab.store.runsDir, 'sweeps', SWEEP, 'sweep.json'), 'utf8'),
  ) as SweepRecord;
}

/**
 * Another client process running the lab's sweep (./sweepChild.ts from its bundle: ./childBundle.ts);
 * its stderr kept, its exit awaited.
 */
export function sweepChild(lab: Lab): {
  child: ChildProcess;
  exited: Promise<number | null>;
  stderr: () => string;
} {
  const child = spawn(process.execPath, [...BUNDLE_NODE_ARGS, childBundle('sweepChild')], {
    cwd: ROOT,
    env: {
      ...process.env,
      SWEEP_CHILD: JSON.stringify({
        workspace: lab.workspace,
        baseUrl: lab.emulator.baseUrl,
        timing: lab.timing,
        python: PYTHON,
      }),
      SWEEP_API_KEY: lab.emulator.apiKey,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  return { child, exited, stderr: () => stderr };
}

/** Waits until `n` trials of the sweep run their jobs (and no more were asked). */
export function trialsRunning(lab: Lab, n: number): Promise<void> {
  return lab.waitFor(
    `${n} trials running their jobs`,
    () => {
      try {
        const running = trialRuns(lab).filter((r) => r.state === 'running');
        return running.length === n && sweepJson(lab).trials.length === n;
      } catch {
        return false;
      }
    },
    240_000,
  );
}

/**
 * Lets every gated trial job of the lab (sweepLab's `gated`) end once its run is recorded
 * running on a pod, until `stop()`: a test that needs trials seen running at once (before a kill)
 * holds them at their gates instead of sizing their jobs in seconds, then lets them all end.
 */
export function openTrialGates(lab: Lab): { stop(): void } {
  const opened = new Set<string>();
  const timer = setInterval(() => {
    for (const r of trialRuns(lab)) {
      if (r.state !== 'running') continue;
      try {
        const podId = String(lab.podJson(r.id).pod_id);
        const key = `${podId} ${r.id}`;
        if (opened.has(key)) continue;
        openGate(lab.emulator, podId, r.id);
        opened.add(key);
      } catch {
        // pod.json or the run's directory on its pod not there yet: the next look.
      }
    }
  }, 200);
  return { stop: () => clearInterval(timer) };
}
