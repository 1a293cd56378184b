import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

interface Probe {
  answer: number;
  dir: string;
  file: string;
  helper: string;
  thisIsExports: boolean;
}

/** A bundle-like CommonJS file: a relative require, a builtin, its own module and paths. */
function writeModule(dir: string, answer: number): string {
  writeFileSync(join(dir, 'helper.js'), 'module.exports = { name: "helper" };\n');
  const file = join(dir, 'core.js');
  writeFileSync(
    file,
    [
      `const path = require('node:path');`,
      `const helper = require('./helper.js');`,
      `function answer() { return ${answer}; }`,
      `module.exports = { answer: answer(), dir: __dirname, file: path.basename(__filename),`,
      `  helper: helper.name, thisIsExports: this === exports };`,
    ].join('\n'),
  );
  return file;
}

describe('requireWithCodeCache (the core bundle with V8 code cache)', function () {
  let dir: string;
  let cacheDir: string;
  let notes: string[];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ob-cache-'));
    cacheDir = join(dir, 'storage', 'code-cache');
    notes = [];
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  /**
   * Loads `file` in a new process, as a new extension host would (in one process V8 reuses what
   * it compiled before and ignores the cache), then saves its cache when `save`.
   */
  const load = (file: string, save = false): { exports: Probe; cached: boolean } => {
    const loader = resolve(__dirname, '../../src/boot/codeCache.ts');
    const script = `
      const imported = await import(${JSON.stringify(loader)});
      const { requireWithCodeCache } = imported.default ?? imported;
      const notes = [];
      const loaded = requireWithCodeCache(${JSON.stringify(file)}, ${JSON.stringify(cacheDir)}, (m) => notes.push(m));
      if (${save}) loaded.saveCache();
      console.log(JSON.stringify({ exports: loaded.exports, cached: loaded.cached, notes }));
    `;
    const child = spawnSync(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      { encoding: 'utf8' },
    );
    assert.equal(child.status, 0, child.stderr);
    const out = JSON.parse(child.stdout) as { exports: Probe; cached: boolean; notes: string[] };
    notes.push(...out.notes);
    return out;
  };

  it('loads as require would, compiles the first time and serves from the saved cache after', () => {
    const file = writeModule(dir, 42);
    const first = load(file, true);
    assert.deepEqual(first.exports, {
      answer: 42,
      dir,
      file: 'core.js',
      helper: 'helper',
      thisIsExports: true,
    });
    assert.equal(first.cached, false);
    assert.equal(readdirSync(cacheDir).length, 1);

    const second = load(file);
    assert.equal(second.cached, true);
    assert.equal(second.exports.answer, 42);
    assert.equal(notes.length, 1);
    assert.match(notes[0]!, /^saved .*core\.js\.[0-9a-f]{16}\.v8cache \(\d+ KiB\)$/);
  });

  it('a changed build gets its own cache, and the earlier one is removed when it is saved', () => {
    const file = writeModule(dir, 1);
    load(file, true);
    const [old] = readdirSync(cacheDir);
    writeModule(dir, 2); // the same length: V8 itself would take the other code's cache
    const changed = load(file, true);
    assert.equal(changed.cached, false, 'a cache of other code served');
    assert.equal(changed.exports.answer, 2);
    const now = readdirSync(cacheDir);
    assert.equal(now.length, 1);
    assert.notEqual(now[0], old);
  });

  it('a damaged cache is refused (and said), the module loads all the same', () => {
    const file = writeModule(dir, 7);
    load(file, true);
    const [name] = readdirSync(cacheDir);
    writeFileSync(join(cacheDir, name!), 'not a V8 code cache');
    const loaded = load(file, true);
    assert.equal(loaded.cached, false);
    assert.equal(loaded.exports.answer, 7);
    assert.match(notes.join('\n'), /was refused; compiled instead/);
    assert.equal(load(file).cached, true, 'the refused cache was not replaced');
  });

  it('a cache that cannot be written is said, never thrown', () => {
    const file = writeModule(dir, 3);
    mkdirSync(join(dir, 'storage'));
    writeFileSync(cacheDir, 'a file where the cache directory goes');
    assert.equal(load(file, true).exports.answer, 3);
    assert.match(notes.join('\n'), /could not be written/);
  });
});
