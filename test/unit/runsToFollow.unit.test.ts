import * as assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { RunState } from '../../src/core/events';
import { RUN_STATES } from '../../src/core/runs/runRecord';
import { RunStore } from '../../src/core/runs/store';
import { anyRunToFollow } from '../../src/boot/runsToFollow';
import { FakeClock } from '../helpers/fakeClock';

/**
 * The thin first bundle's look for runs to follow again (src/boot/runsToFollow.ts): on records
 * the core's RunStore writes, it must say yes for exactly the states resumeFollowing takes up.
 */
describe('anyRunToFollow (the cheap look before loading the core)', function () {
  let root: string;
  let folders = 0;
  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'ob-follow-look-'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  async function runsWith(states: readonly RunState[]): Promise<string> {
    const dir = path.join(root, `runs-${++folders}`);
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const store = new RunStore(dir, clock);
    for (const state of states) {
      await clock.advanceMs(1000); // One run per second: IDs without collision suffixes.
      const run = store.create({ project: 'look', target: 'runpod', remoteDir: (id) => id });
      run.state = state;
      store.saveRun(run);
    }
    return dir;
  }

  it('finds a run recorded running or preparing, and only those, among many', async function () {
    // One record per state as the core writes it, each copied to make 60 ended runs (a second
    // batch), then one live run last: every run.json is looked at.
    const ends = RUN_STATES.filter((s) => s !== 'running' && s !== 'preparing');
    const source = await runsWith(ends);
    const many = path.join(root, 'many');
    const records = readdirSync(source);
    for (let i = 0; i < 60; i++) {
      const from = path.join(source, records[i % records.length]!);
      cpSync(from, path.join(many, `copy${String(i).padStart(2, '0')}_${path.basename(from)}`), {
        recursive: true,
      });
    }
    assert.equal(await anyRunToFollow([many]), false);
    for (const live of ['running', 'preparing'] as const) {
      const one = await runsWith([live]);
      const id = readdirSync(one).find((name) => !name.startsWith('.'))!;
      cpSync(path.join(one, id), path.join(many, `zz_${live}`), { recursive: true });
      assert.equal(await anyRunToFollow([many]), true, live);
      rmSync(path.join(many, `zz_${live}`), { recursive: true });
    }
  });

  it('passes over a missing runs folder, stray entries and damaged records', async function () {
    const dir = path.join(root, 'runs');
    mkdirSync(path.join(dir, 'no-record'), { recursive: true });
    mkdirSync(path.join(dir, 'damaged'));
    writeFileSync(path.join(dir, 'damaged', 'run.json'), '{"state": ');
    writeFileSync(path.join(dir, 'a-file'), 'x');
    assert.equal(await anyRunToFollow([path.join(root, 'missing'), dir]), false);
    assert.equal(await anyRunToFollow([dir, await runsWith(['running'])]), true);
  });
});
