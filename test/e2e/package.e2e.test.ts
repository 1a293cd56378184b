import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import type { Browser } from 'playwright-core';
import { startEmulator, type Emulator } from '../emulator/emulator';
import {
  CodeServer,
  codeServerEnv,
  eventually,
  extensionFolderName,
  NODE24,
  REPO_ROOT,
  tempDir,
  Workbench,
} from './harness';
import { borrowChromium, returnChromium } from './sharedChromium';
import { lockTreeBuild } from './treeBuild';
import { prepareTrust, trustJourney } from './trustJourney';
import { E2E_WINDOW_SETTINGS } from './window';
import { zipEntryNames } from './zip';

const CODE_SERVER_ENTRY = path.join(
  REPO_ROOT,
  'test/e2e/vscode/node_modules/code-server/out/node/entry.js',
);

/** What a .vsix may hold: the manifest, README and CHANGELOG (with the README's screenshots), the bundles and what the build copies, media. */
const ALLOWED = [
  /^\[Content_Types\]\.xml$/,
  /^extension\.vsixmanifest$/,
  /^extension\/package\.json$/,
  /^extension\/(readme|changelog)\.md$/,
  /^extension\/LICENSE(\.txt|\.md)?$/,
  /^extension\/dist\/[a-z0-9-]+\.js$/,
  /^extension\/dist\/[A-Za-z.]+\.css$/,
  /^extension\/dist\/scripts\/[a-z_]+\.sh$/,
  /^extension\/dist\/python\/[a-z_]+\.py$/,
  /^extension\/media\/[a-z_-]+\.(svg|png)$/,
  /^extension\/media\/walkthrough\/[A-Za-z]+\.md$/,
  /^extension\/docs\/images\/[a-z-]+\.png$/,
];

/** Every media path the manifest refers to (icons, walkthrough pages) must ship. */
function manifestMediaPaths(): string[] {
  const text = readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8');
  return [...new Set([...text.matchAll(/"(media\/[^"]+)"/g)].map((match) => match[1] ?? ''))];
}

describe('npm run package: the .vsix', function () {
  const vsix = path.join(REPO_ROOT, 'overbrainer.vsix');
  let names: string[];

  before(async function () {
    // The build and packing (180 s at most), after the demo's build if it holds the lock.
    this.timeout(180_000 + 150_000);
    // Its build and packing read dist/: never while the demo journey builds it (./treeBuild.ts).
    const release = await lockTreeBuild('npm run package');
    try {
      const result = spawnSync('npm', ['run', 'package'], { cwd: REPO_ROOT, encoding: 'utf8' });
      assert.equal(result.status, 0, `npm run package failed:\n${result.stdout}\n${result.stderr}`);
      names = zipEntryNames(vsix);
    } finally {
      release();
    }
  });

  it('holds only the manifest, README, CHANGELOG, bundles and media', function () {
    // Named first so a failure says which rule broke: sources, tests, dependencies, source maps.
    const forbidden = names.filter((name) =>
      /^extension\/(src|test|node_modules|examples|scripts|bench|\.demo)\/|docs\/(?!images\/)|\.(map|ts|tsbuildinfo)$|(^|\/)\.(env|vscode)/.test(
        name,
      ),
    );
    assert.deepEqual(forbidden, [], 'sources, tests, dependencies or maps in the .vsix');
    const unexpected = names.filter((name) => !ALLOWED.some((pattern) => pattern.test(name)));
    assert.deepEqual(unexpected, [], 'files that must not ship');
    const required = [
      'extension/package.json',
      'extension/readme.md',
      'extension/changelog.md',
      'extension/dist/extension.js',
      // The core, which the thin first bundle requires on first use (esbuild.mjs).
      'extension/dist/extension-core.js',
      // ssh2 and undici, which the extension requires on first use (esbuild.mjs).
      'extension/dist/vendor-ssh2.js',
      'extension/dist/vendor-undici.js',
      'extension/dist/cli.js',
      'extension/dist/webview.js',
      'extension/dist/main.css',
      'extension/dist/uPlot.min.css',
      ...manifestMediaPaths().map((media) => `extension/${media}`),
    ];
    const scripts = path.join(REPO_ROOT, 'src/core/pod/scripts');
    if (existsSync(scripts)) {
      for (const name of readdirSync(scripts).filter((file) => file.endsWith('.sh'))) {
        required.push(`extension/dist/scripts/${name}`);
      }
    }
    if (existsSync(path.join(REPO_ROOT, 'python/overbrainer_metrics.py'))) {
      required.push('extension/dist/python/overbrainer_metrics.py');
    }
    assert.deepEqual(
      required.filter((name) => !names.includes(name)),
      [],
      'files the installed extension needs',
    );
    const sizeKiB = statSync(vsix).size / 1024;
    console.log(`      ${names.length} files, ${sizeKiB.toFixed(1)} KiB:`);
    for (const name of names) console.log(`        ${name}`);
    assert.ok(sizeKiB < 2048, `the .vsix is ${sizeKiB.toFixed(0)} KiB; expected < 2 MiB`);
  });

  /**
   * The installed .vsix's window is also the Workspace Trust journey's (./trustJourney.ts): a
   * window costs more than either journey. Its folder, a cloned repository's with a run recorded
   * running, opens in Restricted Mode; the extension activates there (what the install proves),
   * and once the folder is trusted it follows the run with the .vsix's API client.
   */
  describe('installed with code-server --install-extension, in a folder not trusted yet', function () {
    this.timeout(420_000);
    let home: ReturnType<typeof tempDir>;
    let workspace: ReturnType<typeof tempDir>;
    let emulator: Emulator;
    let runId: string;
    let server: CodeServer;
    let browser: Browser;
    let workbench: Workbench;

    before(async function () {
      home = tempDir('install');
      workspace = tempDir('install-workspace');
      emulator = await startEmulator({ bootDelaysMs: { provisioning: 100, starting: 100 } });
      runId = prepareTrust(workspace.dir);
    });

    afterEach(async function () {
      if (this.currentTest?.state !== 'failed' || !server) return;
      await workbench?.screenshot('failed').catch(() => undefined);
      console.log(server.diagnostics().replace(/^/gm, '      '));
    });

    after(async function () {
      await workbench?.close().catch(() => undefined);
      if (browser) await returnChromium(browser);
      await server?.close();
      const billing = emulator?.ledger().pods.filter((p) => p.billing) ?? [];
      await emulator?.close();
      workspace?.remove();
      home?.remove();
      assert.deepEqual(
        billing.map((p) => p.id),
        [],
        'a pod was left billing',
      );
    });

    it('installs into a fresh extensions dir and activates', async function () {
      const extensionsDir = path.join(home.dir, 'extensions');
      const result = spawnSync(
        NODE24,
        [
          CODE_SERVER_ENTRY,
          '--extensions-dir',
          extensionsDir,
          '--user-data-dir',
          path.join(home.dir, 'user-data'),
          '--config',
          path.join(home.dir, 'config.yaml'),
          '--install-extension',
          vsix,
        ],
        { encoding: 'utf8', env: codeServerEnv(home.dir), timeout: 120_000 },
      );
      assert.equal(result.status, 0, `install failed:\n${result.stdout}\n${result.stderr}`);
      assert.match(result.stdout, /successfully installed/i);
      assert.ok(
        readdirSync(extensionsDir).includes(extensionFolderName()),
        `${extensionFolderName()} in ${readdirSync(extensionsDir).join(', ')}`,
      );

      server = await CodeServer.start({
        workspace: workspace.dir,
        extensionsDir,
        workspaceTrust: true,
        settings: E2E_WINDOW_SETTINGS,
        // Where a user sets it (scope `machine`); the key as VS Code's environment gives it.
        machineSettings: { 'overbrainer.runpod.baseUrl': emulator.baseUrl },
        env: { OVERBRAINER_RUNPOD__API_KEY: emulator.apiKey },
      });
      browser = await borrowChromium();
      workbench = await Workbench.open(browser, server, this.test?.fullTitle() ?? 'install');
      await workbench.untilOverbrainerShown();
      await workbench.showOverbrainerOutput();
      const output = await eventually('the activation line in the log', async () => {
        const text = await workbench.outputText();
        return /Overbrainer \S+ activated/.test(text) ? text : undefined;
      });
      assert.match(output, /Overbrainer 0\.\d+\.\d+ activated/);
      await workbench.openViewContainer('Overbrainer');
      await workbench.screenshot('installed from vsix');
    });

    trustJourney(() => ({ workbench, server, emulator, runId }));
  });
});
