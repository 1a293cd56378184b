import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { LazyList } from '../../src/ui/lazyList';

interface Welcome {
  view: string;
  contents: string;
  when?: string;
}

const manifest = JSON.parse(
  fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'),
) as { contributes: { viewsWelcome: Welcome[] } };

type Context = Record<string, boolean | number | undefined>;

/** The `when` clauses the welcome uses: `a && !b && c == 0 && d > 0`. */
function holds(when: string | undefined, context: Context): boolean {
  if (when === undefined) return true;
  return when.split('&&').every((part) => {
    const term = part.trim();
    const compare = /^([\w.]+)\s*(==|>)\s*(\d+)$/.exec(term);
    if (compare) {
      const value = Number(context[compare[1]!] ?? 0);
      return compare[2] === '==' ? value === Number(compare[3]) : value > Number(compare[3]);
    }
    if (term.startsWith('!')) return !context[term.slice(1)];
    assert.match(term, /^[\w.]+$/, `an unexpected when clause: ${term}`);
    return Boolean(context[term]);
  });
}

/** The welcome contents a view shows in `context` (VS Code shows every matching one). */
function shown(view: string, context: Context): string[] {
  return manifest.contributes.viewsWelcome
    .filter((w) => w.view === view && holds(w.when, context))
    .map((w) => w.contents);
}

function buttons(contents: string[]): string[] {
  return contents.flatMap((c) => [...c.matchAll(/\[([^\]]+)\]\(command:/g)].map((m) => m[1]!));
}

describe('ui welcome views (package.json viewsWelcome with the extension context keys)', function () {
  const folder = { workspaceFolderCount: 1 };

  it('says Loading… before the extension set its keys (never the no-data-provider text)', function () {
    assert.deepEqual(shown('overbrainer.runs', folder), ['Loading runs…']);
    assert.deepEqual(shown('overbrainer.pods', {}), ['Loading pods…']);
    assert.equal(shown('overbrainer.pods', { 'overbrainer.podsLoaded': true }).length, 1);
    assert.match(
      shown('overbrainer.pods', { 'overbrainer.podsLoaded': true })[0]!,
      /^No overbrainer pod/,
    );
  });

  it('offers Create overbrainer.toml only without a config; with one, Train and the key step still missing', function () {
    const loaded = { ...folder, 'overbrainer.runsLoaded': true };
    assert.deepEqual(buttons(shown('overbrainer.runs', loaded)), ['Create overbrainer.toml']);
    assert.deepEqual(
      buttons(shown('overbrainer.runs', { ...loaded, 'overbrainer.hasConfig': true })),
      ['Set Runpod API Key', 'Train'],
    );
    assert.deepEqual(
      buttons(
        shown('overbrainer.runs', {
          ...loaded,
          'overbrainer.hasConfig': true,
          'overbrainer.hasApiKey': true,
        }),
      ),
      ['Train'],
    );
    assert.deepEqual(buttons(shown('overbrainer.runs', { workspaceFolderCount: 0 })), [
      'Open Folder',
    ]);
  });

  it('a list settles after a failed load too (the view leaves Loading… and says why)', async function () {
    let fail = true;
    const list = new LazyList<number>(() =>
      fail ? Promise.reject(new Error('unreadable')) : Promise.resolve([1]),
    );
    let settled = 0;
    list.onDidSettle(() => settled++);
    assert.equal(list.hasSettled, false);
    await assert.rejects(list.refresh(), /unreadable/);
    assert.equal(list.hasSettled, true);
    assert.equal(list.isLoaded, false);
    fail = false;
    await list.refresh();
    assert.equal(settled, 2);
    assert.deepEqual(list.all, [1]);
  });
});
