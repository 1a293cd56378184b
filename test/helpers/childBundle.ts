/**
 * The flow's child processes (./lifecycleChild.ts, ./sweepChild.ts) run from esbuild bundles made
 * once per test process, as `npm run build` bundles the CLI: through tsx a child took about
 * 1.4 s of CPU to start (its loader transforms and resolves each of a few hundred modules),
 * bundled about 0.3 s.
 */
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { buildSync } from 'esbuild';

const ROOT = path.join(__dirname, '..', '..');
let dir: string | null = null;
const bundles = new Map<string, string>();

/**
 * A temp dir of this process (removed when it exits) holding copies of what the core reads next
 * to its bundle at run time (dist/ has the same layout): the pod scripts under scripts/ and the
 * Python helpers (the metrics plugin, the study process, the YAML reader) under python/.
 */
function bundleDir(): string {
  if (dir !== null) return dir;
  const made = fs.mkdtempSync(path.join(tmpdir(), 'ob-flow-child-'));
  process.on('exit', () => fs.rmSync(made, { recursive: true, force: true }));
  fs.cpSync(path.join(ROOT, 'src', 'core', 'pod', 'scripts'), path.join(made, 'scripts'), {
    recursive: true,
  });
  fs.mkdirSync(path.join(made, 'python'));
  for (const name of fs.readdirSync(path.join(ROOT, 'python'))) {
    if (name.endsWith('.py')) {
      fs.copyFileSync(path.join(ROOT, 'python', name), path.join(made, 'python', name));
    }
  }
  dir = made;
  return made;
}

/** test/helpers/`name`.ts bundled into this process's bundle dir; the bundle's path. */
export function childBundle(name: 'lifecycleChild' | 'sweepChild'): string {
  const done = bundles.get(name);
  if (done !== undefined) return done;
  const out = path.join(bundleDir(), `${name}.js`);
  buildSync({
    entryPoints: [path.join(__dirname, `${name}.ts`)],
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
  bundles.set(name, out);
  return out;
}
