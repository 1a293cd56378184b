/**
 * The flow's child processes (./lifecycleChild.ts, ./sweepChild.ts) run from esbuild bundles, as
 * `npm run build` bundles the CLI: through tsx a child took about 1.6 CPU-s to start (its loader
 * transforms and resolves each of a few hundred modules), bundled about 0.7.
 *
 * A bundle costs about 0.85 CPU-s to build, and each of the integration tier's workers (eight)
 * would build its own: so a bundle is kept on this machine (under the temp dir), beside copies of
 * what the core reads next to its bundle at run time (dist/ has the same layout: the pod scripts
 * under scripts/, the Python helpers under python/), with the SHA-1 of every file that went into
 * it. It is used only while every one of those files is byte for byte the same: a change to any
 * of them (the source, node_modules, a script) builds a new one. A bundle's directory is never
 * changed once published (a child may be reading its scripts), only replaced by a new directory.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { buildSync } from 'esbuild';

const ROOT = path.join(__dirname, '..', '..');
const CACHE = path.join(tmpdir(), 'ob-flow-child-bundles');
const SCRIPTS = path.join('src', 'core', 'pod', 'scripts');
type Name = 'lifecycleChild' | 'sweepChild';
const DAY_MS = 24 * 60 * 60 * 1000;
/** What a bundle was made of: each input (relative to the repository) and its SHA-1. */
type Inputs = Record<string, string>;
const bundles = new Map<Name, string>();

function sha1(file: string): string {
  return createHash('sha1').update(fs.readFileSync(file)).digest('hex');
}

/** The files copied beside a bundle, relative to the repository. */
function besideFiles(): string[] {
  const scripts = fs.readdirSync(path.join(ROOT, SCRIPTS)).map((n) => path.join(SCRIPTS, n));
  const python = fs
    .readdirSync(path.join(ROOT, 'python'))
    .filter((n) => n.endsWith('.py'))
    .map((n) => path.join('python', n));
  return [...scripts, ...python];
}

/** Whether every input of a kept bundle (and every file to copy beside it) is unchanged. */
function current(dir: string): boolean {
  try {
    const inputs = JSON.parse(fs.readFileSync(path.join(dir, 'inputs.json'), 'utf8')) as Inputs;
    if (besideFiles().some((f) => !(f in inputs))) return false;
    return Object.entries(inputs).every(([f, hash]) => sha1(path.resolve(ROOT, f)) === hash);
  } catch {
    return false;
  }
}

/** Bundles of `name` built over a day ago: no test process still runs from them. */
function prune(name: Name): void {
  for (const entry of fs.readdirSync(CACHE)) {
    const dir = path.join(CACHE, entry);
    try {
      if (entry.startsWith(`${name}-`) && Date.now() - fs.statSync(dir).mtimeMs > DAY_MS) {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    } catch {
      // another process pruned it
    }
  }
}

/** Builds the bundle into a new directory under the cache; returns that directory. */
function build(name: Name): string {
  fs.mkdirSync(CACHE, { recursive: true });
  prune(name);
  const dir = fs.mkdtempSync(path.join(CACHE, `${name}-`));
  const result = buildSync({
    entryPoints: [path.join(__dirname, `${name}.ts`)],
    outfile: path.join(dir, `${name}.js`),
    absWorkingDir: ROOT,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    // As esbuild.mjs: ssh2 loads both inside try/catch and falls back to pure JS without them.
    external: ['vscode', 'cpu-features', '*.node'],
    mainFields: ['module', 'main'],
    logLevel: 'error',
    metafile: true,
  });
  const inputs: Inputs = {};
  for (const f of Object.keys(result.metafile.inputs)) inputs[f] = sha1(path.resolve(ROOT, f));
  for (const f of besideFiles()) {
    const to = path.join(dir, f.startsWith(SCRIPTS) ? 'scripts' : 'python', path.basename(f));
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.copyFileSync(path.join(ROOT, f), to);
    inputs[f] = sha1(path.join(ROOT, f));
  }
  fs.writeFileSync(path.join(dir, 'inputs.json'), JSON.stringify(inputs));
  return dir;
}

/**
 * test/helpers/`name`.ts as a bundle whose inputs are those of this checkout now (built when
 * the one kept is not); the bundle's path.
 */
export function childBundle(name: Name): string {
  const known = bundles.get(name);
  if (known !== undefined) return known;
  const pointer = path.join(CACHE, `${name}.current`);
  let dir: string | undefined;
  try {
    dir = path.join(CACHE, fs.readFileSync(pointer, 'utf8').trim());
  } catch {
    // none kept yet
  }
  if (dir === undefined || !current(dir)) {
    dir = build(name);
    const next = `${pointer}.${process.pid}`;
    fs.writeFileSync(next, path.basename(dir));
    fs.renameSync(next, pointer);
  }
  const out = path.join(dir, `${name}.js`);
  bundles.set(name, out);
  return out;
}
