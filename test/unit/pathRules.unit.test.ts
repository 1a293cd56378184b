/**
 * The one set of rules for a name the pod gave (a result, a checkpoint, a snapshot's path): what
 * another platform would read differently is refused on every platform, and a resolved path must
 * stay under its base. Run with Windows' path rules (path.win32) and POSIX ones (path.posix)
 * whatever this machine is: Linux CI proves what a Windows user's machine would do.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import {
  isInside,
  nameProblem,
  PathEscapeError,
  resolveInside,
  unsafeRelativePath,
} from '../../src/core/exec/pathRules';

const FLAVORS = [
  ['win32', path.win32, 'C:\\Users\\me\\proj\\runs\\r1\\.retrieving\\files'],
  ['posix', path.posix, '/home/me/proj/runs/r1/.retrieving/files'],
] as const;

/** Names a hostile pod could send, each with the words of its reason. */
const HOSTILE: [string, RegExp][] = [
  ['output/..\\..\\escape.txt', /backslash/],
  ['output\\..\\..\\escape.txt', /backslash/],
  ['output/C:\\Windows\\evil.dll', /backslash|colon/],
  ['output/C:evil.txt', /colon/],
  ['output/model.bin:hidden', /colon/],
  ['output/new\nline', /control character \(U\+000A\)/],
  ['output/tab\there', /control character \(U\+0009\)/],
  ['output/esc\x1b[31m', /control character \(U\+001B\)/],
  ['output/del\x7f', /control character \(U\+007F\)/],
  ['output/c1\u009b', /control character \(U\+009B\)/],
  ['output/CON', /device name on Windows/],
  ['output/con.txt', /device name on Windows/],
  ['output/Nul.tar.gz', /device name on Windows/],
  ['output/aux', /device name on Windows/],
  ['output/PRN.log', /device name on Windows/],
  ['output/com1', /device name on Windows/],
  ['output/COM9.bin', /device name on Windows/],
  ['output/lpt3.txt', /device name on Windows/],
  ['output/LPT¹', /device name on Windows/],
  ['output/CON .txt', /device name on Windows/],
  ['output/sub/CONOUT$', /device name on Windows/],
  ['output/trailing.', /ends with a dot or a space/],
  ['output/trailing ', /ends with a dot or a space/],
  ['output/dir./x', /ends with a dot or a space/],
  ['output/a?b', /Windows does not allow/],
  ['output/a*b', /Windows does not allow/],
  ['output/a|b', /Windows does not allow/],
  ['output/a<b>', /Windows does not allow/],
  ['output/a"b', /Windows does not allow/],
  ['output/../escape.txt', /"\.\." segment/],
  ['/etc/passwd', /absolute/],
  ['output//x', /empty segment/],
  ['output/./x', /"\." segment/],
  ['output/nul\0byte', /NUL byte|control character/],
  ['', /empty/],
];

/** Odd but portable names: the same file on every platform. */
const PORTABLE = [
  'output/adapter_model.safetensors',
  'output/with space.txt',
  'output/ünïcødé/模型.bin',
  'output/-leading-dash',
  "output/quote'single",
  'output/.hidden',
  'output/..double-dot-prefix',
  'output/a.b.c',
  'output/CONSOLE.txt',
  'output/com10',
  'output/lpt',
  'output/nul_result',
  'output/checkpoint-20/model.safetensors',
];

describe('path rules for names the pod gives', () => {
  for (const [name, why] of HOSTILE) {
    it(`refuses ${JSON.stringify(name)} on every platform`, () => {
      const reason = unsafeRelativePath(name);
      assert.ok(reason !== undefined, `${JSON.stringify(name)} was accepted`);
      assert.match(reason, why);
      assert.ok(nameProblem(name) !== undefined);
    });
  }

  it('takes odd names that every platform reads the same', () => {
    for (const name of PORTABLE) {
      assert.equal(unsafeRelativePath(name), undefined, JSON.stringify(name));
    }
  });

  it('sorts the reasons into kinds the manifest reports', () => {
    assert.equal(nameProblem('output/../x')?.kind, 'traversal');
    assert.equal(nameProblem('/x')?.kind, 'absolute');
    assert.equal(nameProblem('output//x')?.kind, 'malformed');
    assert.equal(nameProblem('output/a\\b')?.kind, 'unportable');
    assert.equal(nameProblem('output/NUL')?.kind, 'unportable');
  });

  for (const [label, flavor, base] of FLAVORS) {
    describe(`resolveInside with path.${label}`, () => {
      it('gives the path of a portable name under the base', () => {
        for (const name of PORTABLE) {
          const full = resolveInside(base, name, flavor);
          assert.equal(full, flavor.join(base, ...name.split('/')));
          const back = flavor.relative(base, full);
          assert.ok(!back.startsWith('..') && !flavor.isAbsolute(back), back);
        }
      });

      it('refuses every hostile name before it resolves, naming the file and why', () => {
        for (const [name, why] of HOSTILE) {
          assert.throws(
            () => resolveInside(base, name, flavor),
            (error: unknown) =>
              error instanceof PathEscapeError &&
              error.message.includes(JSON.stringify(name)) &&
              why.test(error.message),
            JSON.stringify(name),
          );
        }
      });

      it('refuses a path that resolves outside the base even when the rules were skipped', () => {
        // `..\..\escape.txt` is one harmless name on POSIX and two levels up on Windows: the
        // containment check alone (the last guard) catches it with Windows' rules.
        const escape = flavor.resolve(base, 'output/..\\..\\..\\escape.txt');
        const outside = flavor.relative(base, escape).startsWith('..');
        assert.equal(outside, label === 'win32');
        assert.throws(
          () => resolveInside(base, '../escape.txt', flavor, { rules: false }),
          PathEscapeError,
        );
        if (label === 'win32') {
          assert.throws(
            () => resolveInside(base, 'output/..\\..\\..\\escape.txt', flavor, { rules: false }),
            /outside/,
          );
          assert.throws(
            () => resolveInside(base, 'C:\\Windows\\evil.dll', flavor, { rules: false }),
            /outside/,
          );
          assert.equal(isInside(base, 'C:\\Windows\\evil.dll', flavor), false);
          assert.equal(isInside(base, 'D:\\proj\\runs', flavor), false);
        }
        assert.equal(isInside(base, flavor.join(base, 'output', 'x'), flavor), true);
        assert.equal(isInside(base, flavor.join(base, '..', 'files2'), flavor), false);
      });
    });
  }
});
