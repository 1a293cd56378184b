/**
 * `train()` of a lab in a child process (./lifecycleChild.ts), so a test can SIGKILL the process
 * running the lifecycle at any step (re-exported by ./lifecycle.ts).
 *
 * The child runs from a bundle of lifecycleChild.ts (esbuild, as `npm run build` bundles the
 * CLI), made once per test process: through tsx each child took about 1.4 s of CPU to start
 * (its loader transforms and resolves each of a few hundred modules), bundled about 0.3 s, and
 * the integration tier starts about 40 of them.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { buildSync } from 'esbuild';
import type { CoreEvent } from '../../src/core/events';
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
let bundled: string | null = null;

/**
 * lifecycleChild.ts bundled into a temp dir of this process (removed when it exits), beside
 * copies of what the core reads next to its bundle at run time (dist/ has the same layout): the
 * pod scripts under scripts/ and the metrics plugin under python/.
 */
function lifecycleChildBundle(): string {
  if (bundled !== null) return bundled;
  const dir = fs.mkdtempSync(path.join(tmpdir(), 'ob-lifecycle-child-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'lifecycleChild.js');
  buildSync({
    entryPoints: [path.join(__dirname, 'lifecycleChild.ts')],
    outfile: out,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    // As esbuild.mjs: ssh2 loads both inside try/catch and falls back to pure JS without them.
    external: ['vscode', 'cpu-features', '*.node'],
    mainFields: ['module', 'main'],
    logLevel: 'error',
  });
  fs.cpSync(path.join(ROOT, 'src', 'core', 'pod', 'scripts'), path.join(dir, 'scripts'), {
    recursive: true,
  });
  fs.mkdirSync(path.join(dir, 'python'));
  fs.copyFileSync(
    path.join(ROOT, 'python', 'overbrainer_metrics.py'),
    path.join(dir, 'python', 'overbrainer_metrics.py'),
  );
  bundled = out;
  return out;
}

/**
 * Starts `train()` of the lab's workspace in a child process (its own FlowDeps, the lab's
 * timing), so a test can SIGKILL the process running the lifecycle at any step. The API key
 * reaches it through the environment only.
 */
export function spawnLifecycleChild(lab: Lab): LifecycleChild {
  const child = spawn(process.execPath, [lifecycleChildBundle()], {
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
