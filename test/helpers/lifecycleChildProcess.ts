/**
 * `train()` of a lab in a child process (./lifecycleChild.ts), so a test can SIGKILL the process
 * running the lifecycle at any step (re-exported by ./lifecycle.ts). The child runs from a bundle
 * made once per test process (./childBundle.ts); the integration tier starts about 40 of them.
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import type { CoreEvent } from '../../src/core/events';
import { childBundle } from './childBundle';
import { BUNDLE_NODE_ARGS } from './cli';
import type { Lab } from './lifecycle';

/** A child process running `train()` on a lab (lifecycleChild.ts), its events as they come. */
export interface LifecycleChild {
  pid: number;
  events: CoreEvent[];
  stderr: () => string;
  /** Resolves with the signal that ended it (null on a normal exit). */
  exited: Promise<NodeJS.Signals | null>;
  /** SIGKILL now; resolves once it is dead. Returns the time of the kill (ms). */
  kill(): Promise<number>;
}

const ROOT = path.join(__dirname, '..', '..');

/**
 * Starts `train()` of the lab's workspace in a child process (its own FlowDeps, the lab's
 * timing), so a test can SIGKILL the process running the lifecycle at any step. The API key
 * reaches it through the environment only.
 */
export function spawnLifecycleChild(lab: Lab): LifecycleChild {
  const child = spawn(process.execPath, [...BUNDLE_NODE_ARGS, childBundle('lifecycleChild')], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/root',
      LIFECYCLE_CHILD: JSON.stringify(lab.childSetup()),
      LIFECYCLE_API_KEY: lab.emulator.apiKey,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const events: CoreEvent[] = [];
  let stderr = '';
  let buffered = '';
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim() === '') continue;
      try {
        events.push(JSON.parse(line) as CoreEvent);
      } catch {
        stderr += `(unparsed stdout) ${line}\n`;
      }
    }
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.on('close', (_code, signal) => resolve(signal)),
  );
  return {
    pid: child.pid ?? -1,
    events,
    stderr: () => stderr,
    exited,
    async kill(): Promise<number> {
      const atMs = Date.now();
      child.kill('SIGKILL');
      await exited;
      return atMs;
    },
  };
}
