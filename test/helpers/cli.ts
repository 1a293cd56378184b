/**
 * Runs the `overbrainer` CLI as a user does: a child process with a cleared environment (only
 * HOME, PATH, NO_COLOR and what the test adds), its stdout and stderr collected, its exit
 * awaited. From the built bundle (`dist/cli.js`, what `npm run build` makes and package.json's
 * `bin` names) by default, rebuilt first when any file under src/ is newer than it; from source
 * (`node --import tsx src/cli.ts`) with `source`. The bundle starts in a quarter of the CPU
 * (0.19 s of user time against 0.75 s through tsx, which loads each module through its loader)
 * and several seconds sooner on a loaded machine (2 s against 6–8 s at a load of 20): the CLI
 * files start it about a hundred times.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export const ROOT = path.join(__dirname, '..', '..');
export const CLI_SOURCE = path.join(ROOT, 'src', 'cli.ts');
export const CLI_BUILT = path.join(ROOT, 'dist', 'cli.js');

/** The newest modification time (ms) of the files under `dir`. */
function newestUnder(dir: string): number {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    const ms = entry.isDirectory() ? newestUnder(file) : fs.statSync(file).mtimeMs;
    if (ms > newest) newest = ms;
  }
  return newest;
}

let builtChecked = false;

/**
 * dist/cli.js, built again (`node esbuild.mjs`) when it is missing or older than a file of src/
 * or the build script: a test never runs a stale bundle. The build publishes each file with a
 * rename, so workers that build at once, or a CLI that starts meanwhile, see whole files.
 */
export function builtCli(): string {
  if (builtChecked) return CLI_BUILT;
  const inputs = Math.max(
    newestUnder(path.join(ROOT, 'src')),
    fs.statSync(path.join(ROOT, 'esbuild.mjs')).mtimeMs,
  );
  const builtMs = fs.existsSync(CLI_BUILT) ? fs.statSync(CLI_BUILT).mtimeMs : 0;
  if (builtMs < inputs) {
    execFileSync(process.execPath, [path.join(ROOT, 'esbuild.mjs')], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }
  builtChecked = true;
  return CLI_BUILT;
}

/** Preloaded into a CLI started from the bundle: the bundle compiled with V8's code cache. */
export const CODE_CACHE_PRELOAD = path.join(__dirname, 'bundleCodeCache.cjs');

/**
 * Node's arguments before a bundle the tests start (the CLI, the flow's children): the code
 * cache's preload, and WebAssembly compiled by V8's baseline compiler only (`--liftoff-only`).
 * undici parses HTTP with llhttp's WebAssembly, whose one large function V8 tiers up with its
 * optimizing compiler once a few replies have run through it: about 0.2 CPU-s in every process
 * that makes API calls (a quarter of a CLI train's CPU; 17 % of the cli file's), for replies of a
 * few kilobytes that the baseline code parses as well. The same code runs, compiled once.
 */
export const BUNDLE_NODE_ARGS: readonly string[] = ['--liftoff-only', '-r', CODE_CACHE_PRELOAD];

/**
 * The command line (after `node`) that starts the CLI: the fresh bundle (with ./bundleCodeCache.cjs
 * preloaded: the same process, compiled from the code cache kept on this machine; see
 * {@link BUNDLE_NODE_ARGS}), or the source.
 */
export function cliArgv(source = false): string[] {
  return source ? ['--import', 'tsx', CLI_SOURCE] : [...BUNDLE_NODE_ARGS, builtCli()];
}

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
  /** Spawn the source through tsx instead of the bundle (dist/cli.js). */
  source?: boolean;
  /** Collects the children so a test's cleanup can kill what is left. */
  children?: Set<ChildProcess>;
  /** How stdout and stderr are decoded (default utf8; latin1 keeps every byte as a character). */
  encoding?: BufferEncoding;
}

/** Starts `overbrainer ARGS…`. */
export function startCli(args: readonly string[], options: StartOptions = {}): Running {
  const argv = [...cliArgv(options.source), ...args];
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
