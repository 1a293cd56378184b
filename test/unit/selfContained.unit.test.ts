import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

/** The folders whose comments and texts must stand on their own in a clone of the repository. */
const SCANNED = ['src', 'media', 'scripts'];
const SKIPPED_DIRS = new Set(['node_modules', 'dist', 'out', '.git']);
const BINARY = /\.(png|jpe?g|gif|ico|svg|woff2?|ttf|vsix|gz|zip|tgz)$/i;

/**
 * Pointers at documents a clone does not have: the Rust source this project reproduces ("the
 * seed"), the behaviour notes written from it ("spec §N"), the design folder beside the
 * repository. A comment states the rule itself instead: the constant, the message, the behaviour
 * and why. The product may still be named as "the original overbrainer CLI" or "the overbrainer
 * CLI" where comparing with it is the point.
 */
const POINTERS: readonly { what: string; pattern: RegExp }[] = [
  { what: '"the seed"', pattern: /\bthe seed\b/i },
  { what: '"seed\'s"', pattern: /\bseed's\b/i },
  { what: '"(seed …" or "seed: …"', pattern: /\(seed\b|\bseed:\s/i },
  { what: 'a seed name ("seed LEASE_TTL", "seed `x`")', pattern: /\bseed [A-Z_`]/ },
  { what: '"the original"', pattern: /\bthe original\b(?!\s+overbrainer\b)/i },
  { what: '"original\'s"', pattern: /\boriginal's\b/i },
  { what: 'a section sign ("§8")', pattern: /§\s*\d/ },
  { what: '"spec §"', pattern: /\bspec\s*§/i },
  { what: '"the behaviour spec"', pattern: /\bbehaviou?r spec\b|\bthe spec (says|§)/i },
  {
    what: 'a path beside the repository',
    pattern: /\.\.\/shared\b|\bshared\/(seed|spec|design|runpod)\//,
  },
  {
    what: 'a design document outside the repository',
    pattern: /overbrainer-behaviour\.md|\b(PRODUCT|STYLE|NOTES)\.md\b/,
  },
];

function files(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRS.has(entry.name)) out.push(...files(full));
    } else if (entry.isFile() && !BINARY.test(entry.name)) out.push(full);
  }
  return out;
}

/** A line without its comment lead (`*`, `//`, `#`), so a phrase cut by a line break is found. */
function lead(line: string): string {
  return line.replace(/^\s*(\*|\/\/|#)?\s*/, '');
}

/** Each `file:line: phrase` in `text` that points at a document outside the repository. */
export function pointersIn(file: string, text: string): string[] {
  const lines = text.split('\n');
  const found: string[] = [];
  lines.forEach((line, i) => {
    const next = i + 1 < lines.length ? ` ${lead(lines[i + 1]!)}` : '';
    const joined = line + next;
    for (const { what, pattern } of POINTERS) {
      const global = new RegExp(
        pattern.source,
        pattern.flags.includes('g') ? pattern.flags : `${pattern.flags}g`,
      );
      for (const match of joined.matchAll(global)) {
        // On this line, or cut by the line break (a match wholly on the next line is its own).
        if (match.index < line.length) {
          found.push(`${file}:${i + 1}: ${what} in ${JSON.stringify(line.trim())}`);
          break;
        }
      }
    }
  });
  return found;
}

describe('comments stand on their own (no pointer at a document a clone does not have)', function () {
  it(`finds no "the seed", "the original", "spec §N" or outside path in ${SCANNED.join(', ')}`, function () {
    const found: string[] = [];
    for (const root of SCANNED) {
      for (const file of files(path.join(ROOT, root))) {
        const text = fs.readFileSync(file, 'utf8');
        if (text.includes('\0')) continue;
        found.push(...pointersIn(path.relative(ROOT, file), text));
      }
    }
    assert.deepEqual(found, [], `state the rule itself instead:\n${found.join('\n')}`);
  });

  it('finds each kind of pointer, also when a line break cuts it, and not the product named', function () {
    const text = [
      '/** As the seed counts (seed LEASE_TTL, spec §8). */',
      "// the original's bound, as the behaviour spec says",
      ' * kept as the',
      // Built from parts, so this file does not itself hold the path it probes for.
      ` * seed does, see ${['..', 'shared', 'spec', 'overbrainer-behaviour.md'].join('/')}`,
      '// Like the original overbrainer CLI, with a random seed.',
    ].join('\n');
    const perLine = new Map<string, number>();
    for (const f of pointersIn('probe.ts', text)) {
      const line = f.split(':')[1]!;
      perLine.set(line, (perLine.get(line) ?? 0) + 1);
    }
    assert.deepEqual(
      Object.fromEntries(perLine),
      { '1': 5, '2': 3, '3': 1, '4': 2 },
      pointersIn('probe.ts', text).join('\n'),
    );
  });
});
