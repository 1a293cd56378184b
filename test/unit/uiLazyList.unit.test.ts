import * as assert from 'node:assert/strict';
import { LazyList, RootFetch } from '../../src/ui/lazyList';

/** A loader whose loads end when the test says so, counting its calls. */
function gatedLoader(): {
  loader: () => Promise<readonly number[]>;
  calls: () => number;
  finish: (items: number[]) => void;
} {
  let calls = 0;
  const pending: ((items: number[]) => void)[] = [];
  return {
    loader: () => {
      calls += 1;
      return new Promise((resolve) => pending.push(resolve));
    },
    calls: () => calls,
    finish: (items) => pending.shift()!(items),
  };
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('ui lazy list', function () {
  describe('latest', function () {
    it('waits for the load in flight and returns its items without loading again', async function () {
      const source = gatedLoader();
      const list = new LazyList(source.loader);
      const first = list.refresh();
      const latest = list.latest();
      source.finish([1, 2]);
      await first;
      assert.deepEqual(await latest, [1, 2]);
      assert.equal(source.calls(), 1);
    });

    it('loads once when never loaded, then answers from the list', async function () {
      const source = gatedLoader();
      const list = new LazyList(source.loader);
      const latest = list.latest();
      await tick();
      source.finish([3]);
      assert.deepEqual(await latest, [3]);
      assert.deepEqual(await list.latest(), [3]);
      assert.equal(source.calls(), 1);
    });
  });

  describe('RootFetch', function () {
    it('does not pass on the change of a load its pending fetch returns; passes on later ones', async function () {
      const source = gatedLoader();
      const list = new LazyList(source.loader);
      const fetch = new RootFetch();
      let fired = 0;
      list.onDidChange(fetch.forward(() => (fired += 1)));

      // The view's first fetch starts the first load: its change is in the rows it returns.
      const rows = fetch.run(async () => {
        await list.ensureLoaded();
        return [...list.all];
      });
      assert.equal(fetch.pending, true);
      await tick();
      source.finish([1, 2, 3]);
      assert.deepEqual(await rows, [1, 2, 3]);
      assert.equal(fetch.pending, false);
      assert.equal(fired, 0, 'VS Code would drop the rows it is waiting for and ask again');

      // A refresh with no fetch pending (a file changed): the view must ask again.
      const refreshed = list.refresh();
      source.finish([1, 2, 3, 4]);
      await refreshed;
      assert.equal(fired, 1);
    });

    it('stays pending until every overlapping fetch has returned, and after a failed one', async function () {
      const fetch = new RootFetch();
      let release!: () => void;
      const slow = fetch.run(() => new Promise<void>((resolve) => (release = resolve)));
      await assert.rejects(
        fetch.run(() => Promise.reject(new Error('unreadable'))),
        /unreadable/,
      );
      assert.equal(fetch.pending, true);
      release();
      await slow;
      assert.equal(fetch.pending, false);
    });
  });
});
