/**
 * A job that trains a few steps, then waits until the test lets it end: a `go` file in its run
 * directory on the pod. A test that acts while the job runs (keeps, releases, attaches) gates
 * the job's end on that act, a state, instead of sizing the job in seconds long enough for the
 * act on a loaded machine, and waiting out those seconds after it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Emulator } from '../emulator/emulator';

/** examples/tiny's train.py for `steps` steps, then a wait for the gate (the job's cwd is its run dir). */
export function gatedCommand(steps = 20, stepSeconds = 0.05): string {
  return `python3 train.py --steps ${steps} --step-seconds ${stepSeconds} && while [ ! -e go ]; do sleep 0.5; done`;
}

/** Lets the gated job of run `runId` on pod `podId` end. */
export function openGate(emulator: Pick<Emulator, 'pod'>, podId: string, runId: string): void {
  const pod = emulator.pod(podId);
  if (!pod) throw new Error(`pod ${podId} is gone: its gated job cannot be let end`);
  fs.writeFileSync(path.join(pod.dirs.workspace, 'overbrainer', runId, 'go'), '');
}
