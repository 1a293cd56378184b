/* global require, __dirname, process, setTimeout */
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS preload (`node -r`): an ES
   module preload (`--import`) starts Node's ES module loader, which cost about 0.45 CPU-s more
   per CLI than the cache saves. */
'use strict';
/**
 * Preloaded (`node -r`) into the processes the tests start from a bundle: the CLI (dist/cli.js,
 * ./cli.ts) and the flow's child processes (./childBundle.ts). The bundle is compiled with V8's
 * code cache kept on this machine instead of from its 3-4 MB of source in every process. The
 * process is otherwise the one it was (`node BUNDLE ARGS`: the same main module, argv,
 * environment and exit), and its code is the bundle's: V8 takes from the cache only the compiled
 * form of that very source (keyed below by its SHA-1 and Node's version; V8 refuses a cache of
 * another V8, or a damaged one, and then compiles as usual). src/boot/codeCache.ts does the same
 * for the extension's core bundle.
 *
 * The integration tier starts the CLI about 220 times and the flow's children about 50; compiling
 * the bundle was about a third of a CLI start's CPU. A process without a full cache of its bundle
 * writes one once it has run 3 s (a train, whose functions a later one then need not compile;
 * also when it is killed later, as the crash tests kill theirs), or at its exit a `.start` one
 * when it ended sooner and none was kept; once a `.full` one is kept, the processes only read it.
 */
const crypto = require('node:crypto');
const fs = require('node:fs');
const Module = require('node:module');
const os = require('node:os');
const path = require('node:path');
const vm = require('node:vm');

/** The bundles: dist/cli.js, and those under the flow children's cache (./childBundle.ts). */
function isBundle(filename) {
  return (
    filename === CLI || (filename.startsWith(CHILD_BUNDLES + path.sep) && filename.endsWith('.js'))
  );
}
const CLI = (() => {
  const built = path.join(__dirname, '..', '..', 'dist', 'cli.js');
  try {
    return fs.realpathSync(built);
  } catch {
    return built; // not built: the CLI's own start says so
  }
})();
const CHILD_BUNDLES = (() => {
  const dir = path.join(os.tmpdir(), 'ob-flow-child-bundles');
  try {
    return fs.realpathSync(dir);
  } catch {
    return dir;
  }
})();
const DIR = path.join(os.tmpdir(), 'ob-cli-code-cache');
const DAY_MS = 24 * 60 * 60 * 1000;
/** A process that ran this long writes the `.full` cache. */
const FULL_AFTER_MS = 3_000;
const compile = Module.prototype._compile;

/** Caches of other builds written over a day ago: no CLI still reads them. */
function prune() {
  for (const name of fs.readdirSync(DIR)) {
    const file = path.join(DIR, name);
    try {
      if (Date.now() - fs.statSync(file).mtimeMs > DAY_MS) fs.rmSync(file);
    } catch {
      // another process pruned it
    }
  }
}

function save(script, file) {
  try {
    fs.mkdirSync(DIR, { recursive: true });
    prune();
    const temporary = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(temporary, script.createCachedData());
    fs.renameSync(temporary, file);
  } catch {
    // Not written: the next CLI compiles the bundle again and tries.
  }
}

/** The first of `files` that can be read, and its content. */
function firstKept(files) {
  for (const file of files) {
    try {
      return { file, data: fs.readFileSync(file) };
    } catch {
      // not kept
    }
  }
  return undefined;
}

Module.prototype._compile = function (content, filename) {
  if (this.id !== '.' || !isBundle(filename)) return compile.call(this, content, filename);
  const key = crypto.createHash('sha1').update(process.version).update(content).digest('hex');
  const name = path.basename(filename, '.js');
  const base = path.join(DIR, `${name}.${process.arch}.${key}`);
  // `.full`: written by a process that ran a while (a train, a listing), so it holds the code of
  // more than the start; `.start`: by one that ended sooner (--version, a usage error).
  const full = `${base}.full.v8cache`;
  const start = `${base}.start.v8cache`;
  const kept = firstKept([full, start]);
  // As Node's own loader: the module wrapper around the source (its `#!` line left blank).
  const source = content.startsWith('#!') ? content.replace(/^#!.*/, '') : content;
  const script = new vm.Script(Module.wrap(source), {
    filename,
    ...(kept ? { cachedData: kept.data } : {}),
  });
  const served = kept !== undefined && !script.cachedDataRejected ? kept.file : undefined;
  if (served !== full) {
    const timer = setTimeout(() => save(script, full), FULL_AFTER_MS);
    timer.unref();
    if (served === undefined) {
      process.once('exit', () => {
        if (process.uptime() * 1000 < FULL_AFTER_MS) save(script, start);
      });
    }
  }
  const require = Module.createRequire(filename);
  require.main = this;
  return script
    .runInThisContext({ displayErrors: true })
    .call(this.exports, this.exports, require, this, filename, path.dirname(filename));
};
