import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import * as esbuild from 'esbuild';

const ROOT = path.resolve(__dirname, '..', '..');

/**
 * Activation loads dist/extension.js only (esbuild.mjs): it must stay the thin first bundle —
 * the commands, the views, the log channel — and reach the core (config codecs, zod, the
 * lifecycle, the controller) only by loading dist/extension-core.js by its path, on first use. An import that pulls the core into it makes every window pay for
 * loading it at activation again.
 */
describe('the thin first bundle (src/extension.ts)', function () {
  it('bundles no core module and no dependency: the core is one lazy require away', async function () {
    const result = await esbuild.build({
      entryPoints: [path.join(ROOT, 'src/extension.ts')],
      bundle: true,
      write: false,
      metafile: true,
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      logLevel: 'silent',
      external: ['vscode'],
    });
    const inputs = Object.keys(result.metafile.inputs).map((file) =>
      path.relative(ROOT, path.resolve(file)),
    );
    const allowed =
      /^src\/(extension\.ts|boot\/[^/]+\.ts|core\/redact\.ts|ui\/(commands\/commandIds|log|runs\/runsFolderName)\.ts)$/;
    assert.deepEqual(
      inputs.filter((file) => !allowed.test(file)),
      [],
      'modules the thin bundle must not load at activation',
    );
    const output = result.outputFiles[0]!.text;
    assert.match(output, /"extension-core\.js"/);
  });
});
