import * as assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { systemClock } from '../../src/core/clock';
import { RunStore } from '../../src/core/runs/store';
import {
  compareRunsNewestFirst,
  isOlderRuns,
  RunsModel,
  TOP_LEVEL_RUNS,
  topLevelNodes,
  type NewestRuns,
  type RunSummary,
} from '../../src/ui/runs/runsModel';
import { groupThousands, presentOlderRuns } from '../../src/ui/runs/runsView';
import { createdFromId, idStamp, readNewestRuns, readRuns } from '../../src/ui/runs/runsSource';

/**
 * The Runs view's first rows with many runs: the newest runs are read alone (not every record
 * before the first row), the older ones sit under one row.
 */
describe('ui runs: the newest runs first', function () {
  let root: string;

  beforeEach(function () {
    root = mkdtempSync(path.join(tmpdir(), 'overbrainer-ui-newest-'));
  });

  afterEach(function () {
    rmSync(root, { recursive: true, force: true });
  });

  /** `count` runs an hour apart from `startIso`, as the store writes them; their IDs. */
  function makeRuns(runsDir: string, count: number, startIso: string): string[] {
    let nowMs = Date.parse(startIso);
    const store = new RunStore(runsDir, { nowMs: () => nowMs, sleep: systemClock.sleep });
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const run = store.create({ project: 'tiny', target: 'pod', remoteDir: (id) => id });
      run.state = 'succeeded';
      store.saveRun(run);
      ids.push(run.id);
      nowMs += 3_600_000;
    }
    return ids;
  }

  it('reads the newest runs of the folders alone, as the whole list has them', async function () {
    const a = { dir: path.join(root, 'a', 'runs'), workspaceName: 'a' };
    const b = { dir: path.join(root, 'b', 'runs'), workspaceName: 'b' };
    makeRuns(a.dir, 4, '2026-12-01T00:00:00Z');
    const newestOfB = makeRuns(b.dir, 3, '2026-12-01T00:30:00Z');
    // The oldest record is damaged: the newest runs are read without it.
    writeFileSync(
      path.join(a.dir, makeRuns(a.dir, 1, '2026-11-01T00:00:00Z')[0]!, 'run.json'),
      '{',
    );
    const all = [...(await readRuns([a, b]))].sort(compareRunsNewestFirst);
    assert.equal(all.length, 8);
    assert.match(all.at(-1)!.problem ?? '', /not valid JSON/);

    const newest = await readNewestRuns([a, b], 3);
    assert.equal(newest.total, 8);
    assert.deepEqual(newest.runs, all.slice(0, 3));
    // Merged across the folders: a's 03:00, b's 02:30, a's 02:00.
    assert.equal(newest.runs[1]!.id, newestOfB[2]);
    assert.deepEqual(await readNewestRuns([a, b], 20), { runs: all, total: 8 });
  });

  it('skips a directory without run.json among the newest and reads one more', async function () {
    const folder = { dir: path.join(root, 'runs'), workspaceName: 'w' };
    const ids = makeRuns(folder.dir, 4, '2026-12-01T00:00:00Z');
    // A run being created (its folder made, its record not yet): the newest name, no record.
    mkdirSync(path.join(folder.dir, 'tiny_20261205-000000'));
    const newest = await readNewestRuns([folder], 2);
    assert.deepEqual(
      newest.runs.map((run) => run.id),
      [ids[3], ids[2]],
    );
    assert.equal(newest.total, 4);
    assert.deepEqual(
      await readNewestRuns([{ dir: path.join(root, 'none'), workspaceName: 'x' }], 2),
      {
        runs: [],
        total: 0,
      },
    );
  });

  function summary(id: string, createdUnixS: number): RunSummary {
    return {
      id,
      dir: `/w/runs/${id}`,
      workspaceName: 'w',
      target: 'pod',
      createdUnixS,
      state: 'succeeded',
      message: null,
      pod: null,
      problem: null,
    };
  }

  it('answers the newest runs from one read before the load, then from the loaded list', async function () {
    const list = [summary('r_20261201-000000', 1), summary('r_20261201-000002', 3)];
    const calls = { newest: 0, load: 0 };
    let failNext = true;
    const model = new RunsModel(
      async () => {
        calls.load += 1;
        return list;
      },
      {
        newest: async (count): Promise<NewestRuns> => {
          calls.newest += 1;
          if (failNext) {
            failNext = false;
            throw new Error('EACCES');
          }
          return { runs: [list[1]!].slice(0, count), total: 2 };
        },
      },
    );
    await assert.rejects(model.newest(1), /EACCES/);
    // A failed read is not kept: the next caller reads again, and callers meanwhile share it.
    const [first, second] = await Promise.all([model.newest(1), model.newest(1)]);
    assert.deepEqual(first, { runs: [list[1]], total: 2 });
    assert.deepEqual(second, first);
    assert.deepEqual(calls, { newest: 2, load: 0 });
    await model.ensureLoaded();
    assert.deepEqual(await model.newest(1), { runs: [list[1]], total: 2 });
    assert.deepEqual(calls, { newest: 2, load: 1 });
    model.dispose();
  });

  it('answers the newest runs from the whole list when no reader of them is given', async function () {
    const model = new RunsModel(async () => [
      summary('a_20261201-000000', 1),
      summary('b_20261201-000001', 2),
    ]);
    const newest = await model.newest(1);
    assert.deepEqual(
      newest.runs.map((run) => run.id),
      ['b_20261201-000001'],
    );
    assert.equal(newest.total, 2);
    assert.equal(model.isLoaded, true);
    model.dispose();
  });

  it('lists the first TOP_LEVEL_RUNS at the top level and one row for the older ones', function () {
    const runs = Array.from({ length: TOP_LEVEL_RUNS + 1 }, (_, i) =>
      summary(`r_20261201-${String(i).padStart(6, '0')}`, i),
    );
    assert.deepEqual(
      topLevelNodes(runs.slice(0, TOP_LEVEL_RUNS), TOP_LEVEL_RUNS),
      runs.slice(0, TOP_LEVEL_RUNS),
    );
    const top = topLevelNodes(runs.slice(0, TOP_LEVEL_RUNS), 10_000);
    assert.equal(top.length, TOP_LEVEL_RUNS + 1);
    const older = top.at(-1)!;
    assert.ok(isOlderRuns(older));
    assert.equal(older.count, 10_000 - TOP_LEVEL_RUNS);
    const view = presentOlderRuns(older);
    assert.equal(view.label, '9,900 older runs');
    assert.equal(view.contextValue, 'runs.older');
    assert.deepEqual(topLevelNodes(runs, runs.length).at(-1), { kind: 'older', count: 1 });
  });

  it('orders run IDs by the time their text carries as by the time parsed from it', function () {
    const ids = [
      'tiny_20261201-090000',
      'tiny_20261201-090000_2',
      'tiny_20261201-090000_10',
      'other_20261201-090000',
      'tiny_20261130-235959',
      'tiny_20270101-000000',
      'tiny_19991231-235959',
      'not-a-run-id',
      'tiny_2026121-090000',
    ];
    const byStamp = [...ids].sort((a, b) => {
      if (idStamp(a) !== idStamp(b)) return idStamp(a) < idStamp(b) ? 1 : -1;
      return a < b ? 1 : a > b ? -1 : 0;
    });
    const byTime = [...ids].sort((a, b) => {
      const ta = createdFromId(a) ?? -Infinity;
      const tb = createdFromId(b) ?? -Infinity;
      if (ta !== tb) return tb - ta;
      return a < b ? 1 : a > b ? -1 : 0;
    });
    assert.deepEqual(byStamp, byTime);
    assert.equal(idStamp('tiny_20261201-090000_2'), '20261201-090000');
    assert.equal(idStamp('not-a-run-id'), '');
  });

  it('writes the older runs count as English does, without Intl (its first use loads ICU)', function () {
    for (const count of [1, 12, 999, 1_000, 9_900, 12_345, 999_999, 1_234_567]) {
      assert.equal(groupThousands(count), count.toLocaleString('en'));
    }
    const toLocaleString = Object.getOwnPropertyDescriptor(Number.prototype, 'toLocaleString')!;
    Object.defineProperty(Number.prototype, 'toLocaleString', {
      ...toLocaleString,
      value: () => {
        throw new Error('Intl on the first answer');
      },
    });
    try {
      assert.equal(presentOlderRuns({ kind: 'older', count: 9_900 }).label, '9,900 older runs');
    } finally {
      Object.defineProperty(Number.prototype, 'toLocaleString', toLocaleString);
    }
  });
});
