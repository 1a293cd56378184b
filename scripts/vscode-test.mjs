// "Extension Tests" with @vscode/test-electron: bundles the in-host suite (test/e2e/host) into
// out/host-tests/index.js, builds the extension, downloads a desktop VS Code (needs internet; the
// machines that run `npm test` use code-server instead) and runs the suite inside its extension
// host with examples/tiny opened. `--build-only` stops after bundling (used by .vscode/launch.json).
import * as esbuild from 'esbuild';
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outFile = path.join(root, 'out', 'host-tests', 'index.js');

await esbuild.build({
  entryPoints: [path.join(root, 'test/e2e/host/index.ts')],
  outfile: outFile,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  sourcemap: 'linked',
  // vscode comes from the host; mocha is loaded from node_modules (it reads its own files).
  external: ['vscode', 'mocha'],
  logLevel: 'warning',
});
execFileSync(process.execPath, [path.join(root, 'esbuild.mjs')], { stdio: 'inherit' });
if (process.argv.includes('--build-only')) process.exit(0);

const { runTests } = await import('@vscode/test-electron');
try {
  await runTests({
    extensionDevelopmentPath: root,
    extensionTestsPath: outFile,
    launchArgs: [path.join(root, 'examples', 'tiny'), '--disable-extensions'],
  });
} catch (error) {
  console.error(`Extension Tests failed: ${error instanceof Error ? error.message : error}`);
  process.exit(1);
}
