import * as assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { productionBuild } from '../helpers/productionBuild';

/**
 * The bundles that parse with zod (the extension's core, the CLI) carry its English messages
 * only: zod's entry points re-export all 65 of its translations, 258 KiB of the core's 812 that
 * V8 would compile at every load for nothing (esbuild.mjs, zodEnglishOnly). The messages users
 * see are overbrainer's own (config/report.ts); the integration and e2e tiers parse through
 * these bundles.
 */
describe('the production bundles and zod', function () {
  this.timeout(120_000);
  let dir: string;
  before(function () {
    dir = productionBuild('ob-unit-prod-');
  });
  after(function () {
    rmSync(dir, { recursive: true, force: true });
  });

  it('hold zod’s English messages and no other translation', function () {
    const meta = JSON.parse(readFileSync(path.join(dir, 'dist', 'meta.json'), 'utf8')) as {
      outputs: Record<string, { inputs: Record<string, unknown> }>;
    };
    for (const bundle of ['dist/extension-core.js', 'dist/cli.js']) {
      const output = Object.entries(meta.outputs).find(([file]) => file.endsWith(bundle));
      assert.ok(output, `${bundle} in meta.json`);
      const locales = Object.keys(output[1].inputs)
        .filter((file) => file.includes('zod/v4/locales/'))
        .map((file) => path.basename(file));
      assert.deepEqual(locales, ['en.js'], bundle);
    }
  });
});
