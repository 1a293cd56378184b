// Builds everything the extension ships into dist/:
//   dist/extension.js  the extension host's thin first bundle (CommonJS, Node 20, `vscode` left
//                      to the host): commands, views, the log channel
//   dist/extension-core.js  the rest of the extension, loaded by the first on first use
//   dist/vendor-*.js   ssh2 and undici, required by the extension on first use
//   dist/cli.js        the CLI on the same core (`#!/usr/bin/env node`)
//   dist/webview.js    the run page (browser IIFE; cannot reach `vscode` or Node)
//   dist/*.css         the page's styles and uPlot's
//   dist/scripts/*.sh  the pod's bootstrap and watchdog, read at run time next to the bundle
//   dist/python/       the metrics plugin shipped to pods, the sweep's study process (run locally)
// Flags: --watch rebuilds on change; --production minifies, drops source maps, writes
// dist/meta.json (esbuild metafile, for bundle-size tracking) and prints each bundle's size.
// A build (not --watch) writes into a stage beside dist/ and then moves each file into place
// with a rename, so whoever reads dist/ meanwhile (a CLI started by a test, an extension host)
// sees each file whole, old or new, never missing or half written; files the build no longer
// makes are removed after.
import * as esbuild from 'esbuild';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(root, 'dist');
const args = new Set(process.argv.slice(2));
const production = args.has('--production');
const watch = args.has('--watch');
/**
 * Where this build writes: dist/ itself in --watch, else a stage of its own, published at the
 * end. Beside dist/ (the same depth), so the source maps' relative paths hold once moved.
 */
const STAGE_PREFIX = '.dist-stage-';
const out = watch ? dist : path.join(root, `${STAGE_PREFIX}${process.pid}`);

for (const arg of args) {
  if (!['--production', '--watch'].includes(arg)) {
    console.error(`esbuild.mjs: unknown option ${arg} (use --watch or --production)`);
    process.exit(2);
  }
}

/** Copies the files esbuild does not bundle. Missing sources are skipped: their owners add them. */
function copyAssets() {
  const copies = [
    ['media/main.css', 'main.css'],
    ['node_modules/uplot/dist/uPlot.min.css', 'uPlot.min.css'],
    ['python/overbrainer_metrics.py', 'python/overbrainer_metrics.py'],
    ['python/overbrainer_study.py', 'python/overbrainer_study.py'],
    ['python/overbrainer_yaml.py', 'python/overbrainer_yaml.py'],
    ['python/overbrainer_hub.py', 'python/overbrainer_hub.py'],
  ];
  const scriptsDir = path.join(root, 'src/core/pod/scripts');
  if (existsSync(scriptsDir)) {
    for (const name of readdirSync(scriptsDir)) {
      if (name.endsWith('.sh')) copies.push([`src/core/pod/scripts/${name}`, `scripts/${name}`]);
    }
  }
  for (const [from, to] of copies) {
    const source = path.join(root, from);
    if (!existsSync(source)) continue;
    const target = path.join(out, to);
    mkdirSync(path.dirname(target), { recursive: true });
    copyFileSync(source, target);
  }
}

/** Re-copies the assets after every (re)build, so --watch picks up script and css edits too. */
const assetsPlugin = {
  name: 'assets',
  setup(build) {
    build.onEnd((result) => {
      if (result.errors.length === 0) copyAssets();
    });
  },
};

/**
 * In --watch mode, prints the lines the "watch" task's background problem matcher waits for
 * (.vscode/tasks.json) — once per rebuild of all bundles, not per bundle — and each error as
 * `file:line:column: error: text` for its pattern.
 */
let activeBuilds = 0;
const watchReportPlugin = {
  name: 'watch-report',
  setup(build) {
    build.onStart(() => {
      if (activeBuilds === 0) console.log('[watch] build started');
      activeBuilds += 1;
    });
    build.onEnd((result) => {
      for (const { text, location } of result.errors) {
        if (location) {
          console.error(`${location.file}:${location.line}:${location.column}: error: ${text}`);
        } else {
          console.error(`error: ${text}`);
        }
      }
      activeBuilds -= 1;
      if (activeBuilds === 0) console.log('[watch] build finished');
    });
  },
};

const common = {
  bundle: true,
  minify: production,
  sourcemap: production ? false : 'linked',
  sourcesContent: false,
  metafile: true,
  logLevel: 'warning',
  legalComments: production ? 'none' : 'inline',
};

/**
 * zod re-exports its translations of error messages (`z.locales`, `z.core.locales`: 65 files,
 * 258 KiB of the minified core bundle's 812) from its entry points; nothing here uses any but
 * English, which zod configures itself. Those two re-exports get a module holding English only,
 * so V8 does not compile the rest each time the extension's core or the CLI loads (the
 * `moment` locales trick, for zod).
 */
const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(build) {
    build.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      /[\\/]zod[\\/]v4[\\/](core[\\/]index|classic[\\/]external)\.js$/.test(args.importer)
        ? { path: path.join(path.dirname(args.importer), '..', 'locales'), namespace: 'zod-en' }
        : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'zod-en' }, (args) => ({
      contents: 'export { default as en } from "./en.js";',
      resolveDir: args.path,
      loader: 'js',
    }));
  },
};

const nodeBundle = {
  ...common,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  // `vscode` is provided by the extension host. ssh2 loads `cpu-features` and its optional
  // `sshcrypto.node` binding inside try/catch and falls back to pure JS, so leaving them
  // external keeps the bundle loadable where neither exists (a .vsix has no node_modules).
  external: ['vscode', 'cpu-features', '*.node'],
  mainFields: ['module', 'main'],
  plugins: [zodEnglishOnly],
};

/**
 * ssh2 and undici (more than half of the extension's code) are bundled on their own, into
 * dist/vendor-ssh2.js and dist/vendor-undici.js, which the extension requires on its first SSH
 * connection or API request (src/core/exec/ssh.ts, src/core/runpod/client.ts): VS Code then
 * compiles and runs neither while the extension activates. The CLI keeps one bundle.
 */
const VENDORED = ['ssh2', 'undici'];
const vendorPlugin = {
  name: 'vendor',
  setup(build) {
    build.onResolve({ filter: /^(ssh2|undici)$/ }, (args) => ({
      path: `./vendor-${args.path}.js`,
      external: true,
    }));
  },
};

/*
 * The extension is two bundles: dist/extension.js, the thin first one VS Code loads at
 * activation (commands, views, the log channel; src/extension.ts), and dist/extension-core.js
 * (src/ui/composition.ts: the config codecs, zod, the lifecycle, the command handlers), which the first
 * loads by its path (with V8's code cache) when a command runs, a view is first shown or a run
 * must be followed again.
 */
const builds = [
  {
    ...nodeBundle,
    entryPoints: { extension: path.join(root, 'src/extension.ts') },
    outdir: out,
    plugins: [zodEnglishOnly, assetsPlugin],
  },
  {
    ...nodeBundle,
    entryPoints: { 'extension-core': path.join(root, 'src/ui/composition.ts') },
    outdir: out,
    plugins: [zodEnglishOnly, vendorPlugin],
  },
  ...VENDORED.map((name) => ({
    ...nodeBundle,
    stdin: { contents: `module.exports = require(${JSON.stringify(name)});`, resolveDir: root },
    outfile: path.join(out, `vendor-${name}.js`),
  })),
  {
    ...nodeBundle,
    entryPoints: { cli: path.join(root, 'src/cli.ts') },
    outdir: out,
    banner: { js: '#!/usr/bin/env node' },
  },
  {
    ...common,
    entryPoints: { webview: path.join(root, 'media/main.ts') },
    outdir: out,
    platform: 'browser',
    format: 'iife',
    target: 'es2022',
    tsconfig: path.join(root, 'media/tsconfig.json'),
  },
];

function printSizes(metafiles) {
  const rows = [];
  for (const meta of metafiles) {
    for (const [file, output] of Object.entries(meta.outputs)) {
      if (!file.endsWith('.map'))
        rows.push([path.relative(root, path.join(root, file)), output.bytes]);
    }
  }
  for (const [file, bytes] of rows.sort()) {
    console.log(`${file.padEnd(28)} ${(bytes / 1024).toFixed(1).padStart(8)} KiB`);
  }
}

/** Merges the bundles' metafiles into one (inputs and outputs are disjoint path maps). */
function mergeMetafiles(metafiles) {
  const merged = { inputs: {}, outputs: {} };
  for (const meta of metafiles) {
    Object.assign(merged.inputs, meta.inputs);
    Object.assign(merged.outputs, meta.outputs);
  }
  return merged;
}

/** Relative paths of the files under `dir`. */
function filesUnder(dir, prefix = '') {
  const files = [];
  for (const entry of readdirSync(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = path.join(prefix, entry.name);
    if (entry.isDirectory()) files.push(...filesUnder(dir, rel));
    else files.push(rel);
  }
  return files;
}

/** Whether process `pid` is alive (the stage of a build that died is removed). */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

/**
 * Moves every file of the stage into dist/ (a rename each: atomic), then removes from dist/ what
 * this build did not make (a stale file from an older layout must not ship in the .vsix), empty
 * directories, and the stages of builds that died.
 */
function publish() {
  const made = new Set(filesUnder(out));
  mkdirSync(dist, { recursive: true });
  for (const rel of made) {
    mkdirSync(path.dirname(path.join(dist, rel)), { recursive: true });
    renameSync(path.join(out, rel), path.join(dist, rel));
  }
  rmSync(out, { recursive: true, force: true });
  for (const rel of filesUnder(dist)) if (!made.has(rel)) rmSync(path.join(dist, rel));
  for (const entry of readdirSync(dist, { withFileTypes: true })) {
    const dir = path.join(dist, entry.name);
    if (entry.isDirectory() && filesUnder(dir).length === 0) rmSync(dir, { recursive: true });
  }
  for (const entry of readdirSync(root)) {
    if (entry.startsWith(STAGE_PREFIX) && !alive(Number(entry.slice(STAGE_PREFIX.length)))) {
      rmSync(path.join(root, entry), { recursive: true, force: true });
    }
  }
}

/** A metafile's output paths as published (dist/…, not the stage's). */
function published(metafile) {
  const stage = `${path.relative(root, out)}/`; // outputs are named relative to the root
  const outputs = {};
  for (const [file, output] of Object.entries(metafile.outputs)) {
    outputs[file.startsWith(stage) ? `dist/${file.slice(stage.length)}` : file] = output;
  }
  return { ...metafile, outputs };
}

async function main() {
  mkdirSync(out, { recursive: true });
  if (watch) {
    const contexts = await Promise.all(
      builds.map((options) =>
        esbuild.context({ ...options, plugins: [...(options.plugins ?? []), watchReportPlugin] }),
      ),
    );
    await Promise.all(contexts.map((context) => context.watch()));
    console.log('esbuild: watching for changes (Ctrl-C to stop)');
    return;
  }
  let results;
  try {
    results = await Promise.all(builds.map((options) => esbuild.build(options)));
  } catch (error) {
    rmSync(out, { recursive: true, force: true });
    throw error;
  }
  // The CLI is run directly (`bin` in package.json).
  const cli = path.join(out, 'cli.js');
  chmodSync(cli, statSync(cli).mode | 0o111);
  const metafiles = results.map((result) => published(result.metafile));
  if (production) {
    writeFileSync(path.join(out, 'meta.json'), JSON.stringify(mergeMetafiles(metafiles)));
  }
  publish();
  if (production) printSizes(metafiles);
}

main().catch((error) => {
  // esbuild has already printed the diagnostics; the exit code fails the caller.
  if (!(error && Array.isArray(error.errors))) console.error(error);
  process.exit(1);
});
