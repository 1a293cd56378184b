/**
 * A CPU profile of VS Code's extension host, for the activation bench (issue 39): VS Code strips
 * NODE_OPTIONS from the extension host (`--cpu-prof` there profiled code-server alone), and
 * `--inspect-extensions` would be an argument of the e2e harness's code-server command line. So
 * the profile is taken from inside: an extension installed beside ours (activated at startup, `*`)
 * opens an inspector session on its own process, which is the extension host every extension
 * shares, and samples its main thread from activation on. Its command `bench.profiler.save`
 * (run through the palette once the rows are seen) stops the sampling and writes the profile to
 * the folder in OVERBRAINER_BENCH_PROFILE_DIR, one `exthost-<n>.cpuprofile` per extension host,
 * with the time of the click (the page's `performance.timeOrigin + __obClickAt`, passed by the
 * bench as `bench.profiler.mark`) kept beside it so the summary can start there.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';

/** The extension's folder name under the extensions dir. */
const FOLDER = 'bench.profiler-0.0.1';
export const PROFILER_SAVE_COMMAND = 'Bench: Save Extension Host Profile';

/**
 * The extension's code. In the extension host: `vscode` and `inspector` resolve there. The
 * sampling interval is 100 µs (V8's default is 1 ms: too coarse for a 200 ms span).
 */
const EXTENSION_SOURCE = `
const vscode = require('vscode');
const inspector = require('node:inspector');
const fs = require('node:fs');
const path = require('node:path');
let session = null;
exports.activate = (context) => {
  const dir = process.env.OVERBRAINER_BENCH_PROFILE_DIR;
  if (!dir) return;
  session = new inspector.Session();
  session.connect();
  const post = (method, params) => new Promise((resolve, reject) =>
    session.post(method, params || {}, (error, result) => (error ? reject(error) : resolve(result))));
  const started = post('Profiler.enable')
    .then(() => post('Profiler.setSamplingInterval', { interval: 100 }))
    .then(() => post('Profiler.start'));
  const saveNow = async () => {
    await started;
    const { profile } = await post('Profiler.stop');
    fs.mkdirSync(dir, { recursive: true });
    const name = 'exthost-' + process.pid + '-' + Date.now() + '.cpuprofile';
    // The profile's clock (µs) against the wall clock, taken together: the summary maps the
    // page's click (wall) onto the samples.
    const clocks = { profileNowUs: Number(process.hrtime.bigint() / 1000n), wallNowMs: Date.now() };
    fs.writeFileSync(path.join(dir, name), JSON.stringify(profile));
    fs.writeFileSync(path.join(dir, name + '.clocks.json'), JSON.stringify(clocks));
    await post('Profiler.start');
  };
  context.subscriptions.push(
    vscode.commands.registerCommand('bench.profiler.save', () => saveNow()),
    { dispose: () => session && session.disconnect() },
  );
};
exports.deactivate = () => {};
`;

/** Installs the profiler extension in `extensionsDir`. */
export function writeProfilerExtension(extensionsDir: string): void {
  const dir = join(extensionsDir, FOLDER);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({
      name: 'profiler',
      displayName: 'Bench Profiler',
      publisher: 'bench',
      version: '0.0.1',
      engines: { vscode: '^1.90.0' },
      main: './extension.js',
      activationEvents: ['*'],
      contributes: {
        commands: [{ command: 'bench.profiler.save', title: PROFILER_SAVE_COMMAND }],
      },
    }),
  );
  writeFileSync(join(dir, 'extension.js'), EXTENSION_SOURCE);
}

/**
 * The build the profile is taken of: esbuild.mjs without `--production` (not minified, so the
 * profile names the functions; source maps beside it) in a temp copy of its inputs, as
 * test/helpers/productionBuild.ts makes the production one. The caller removes the dir.
 */
export function unminifiedBuild(root: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'ob-bench-dev-'));
  cpSync(join(root, 'esbuild.mjs'), join(dir, 'esbuild.mjs'));
  cpSync(join(root, 'package.json'), join(dir, 'package.json'));
  for (const name of ['src', 'media', 'python', 'node_modules', 'tsconfig.json']) {
    if (existsSync(join(root, name))) symlinkSync(join(root, name), join(dir, name));
  }
  execFileSync(process.execPath, [join(dir, 'esbuild.mjs')], {
    cwd: dir,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return dir;
}

/**
 * The page's own profile (the workbench's renderer, through the DevTools protocol) from now until
 * `stop()`: whether the time from the click to the first row is the page working or waiting.
 */
export async function startPageProfile(page: Page): Promise<{ stop(): Promise<unknown> }> {
  const session = await page.context().newCDPSession(page);
  await session.send('Profiler.enable');
  await session.send('Profiler.setSamplingInterval', { interval: 100 });
  await session.send('Profiler.start');
  return {
    stop: async () => {
      const { profile } = await session.send('Profiler.stop');
      await session.detach();
      return profile;
    },
  };
}
