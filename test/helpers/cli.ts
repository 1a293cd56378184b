/**
 * Runs the `overbrainer` CLI as a user does: a child process with a cleared environment (only
 * HOME, PATH, NO_COLOR and what the test adds), its stdout and stderr collected, its exit
 * awaited. From source (`node --import tsx src/cli.ts`) by default, or the built bundle
 * (`dist/cli.js`, what `npm run build` makes and package.json's `bin` names) with `built`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';

export const ROOT = path.join(__dirname, '..', '..');
export const CLI_SOURCE = path.join(ROOT, 'src', 'cli.ts');
export const CLI_BUILT = path.join(ROOT, 'dist', 'cli.js');

export interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A running CLI: its output so far, and its end. */
export interface Running {
  child: ChildProcess;
  /** Whether waiting may go on after the CLI exited. */
  exitOk?: boolean;
  out: { stdout: string; stderr: string };
  done: Promise<Ran>;
}

export interface StartOptions {
  /** The environment beside HOME=/nonexistent, PATH and NO_COLOR=1. */
  env?: Record<string, string>;
  /** Spawn dist/cli.js instead of the source. */
  built?: boolean;
  /** Collects the children so a test's cleanup can kill what is left. */
  children?: Set<ChildProcess>;
  /** How stdout and stderr are decoded (default utf8; latin1 keeps every byte as a character). */
  encoding?: BufferEncoding;
}

/** Starts `overbrainer ARGS…`. */
export function startCli(args: readonly string[], options: StartOptions = {}): Running {
  const argv = options.built ? [CLI_BUILT, ...args] : ['--import', 'tsx', CLI_SOURCE, ...args];
  const child = spawn(process.execPath, argv, {
    cwd: ROOT,
    env: {
      HOME: '/nonexistent',
      NO_COLOR: '1',
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  options.children?.add(child);
  const out = { stdout: '', stderr: '' };
  const encoding = options.encoding ?? 'utf8';
  child.stdout?.on('data', (chunk: Buffer) => (out.stdout += chunk.toString(encoding)));
  child.stderr?.on('data', (chunk: Buffer) => (out.stderr += chunk.toString(encoding)));
  const done = new Promise<Ran>((resolve) => {
    child.on('close', (code, signal) => {
      options.children?.delete(child);
      resolve({ code, signal, ...out });
    });
  });
  return { child, out, done };
}

/** Runs `overbrainer ARGS…` to its end. */
export function runCliProcess(args: readonly string[], options: StartOptions = {}): Promise<Ran> {
  return startCli(args, options).done;
}
