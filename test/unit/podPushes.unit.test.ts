/**
 * How the checkpoint stream and the disk watch wait on the pod's pushes: a push at once, the
 * newest when several came, nothing asked while the channel is up, a look of their own only
 * once it was down for the fallback interval.
 */
import assert from 'node:assert/strict';
import { PodPushes } from '../../src/core/pod/podPushes';
import { FakeClock } from '../helpers/fakeClock';

describe('the pod pushes as the side tasks take them', () => {
  it('gives the newest push with the one before it; waits while the channel is up', async () => {
    const clock = new FakeClock();
    const pushes = new PodPushes(clock);
    const sink = pushes.sink({ lookMs: 5_000, diskMs: 60_000, volumeDir: null });
    const stop = new AbortController();
    sink.live(true);
    let got: unknown = null;
    const next = pushes.look.next(60_000, stop.signal).then((value) => (got = value));
    // Up and silent for ten fallback intervals: still waiting, no look of its own.
    await clock.advanceMs(600_000);
    assert.equal(got, null);
    sink.look('A');
    await next;
    assert.deepEqual(got, { value: 'A', previous: null });
    sink.look('B');
    sink.look('B');
    assert.deepEqual(await pushes.look.next(60_000, stop.signal), { value: 'B', previous: 'B' });
    sink.disk('used 1 avail 2 checkpoint 0');
    assert.deepEqual(await pushes.disk.next(60_000, stop.signal), {
      value: 'used 1 avail 2 checkpoint 0',
      previous: null,
    });
  });

  it('says "down" once the channel was down for the fallback interval, and "waited" past atMostMs', async () => {
    const clock = new FakeClock();
    const pushes = new PodPushes(clock);
    const sink = pushes.sink({ lookMs: 5_000, diskMs: 60_000, volumeDir: null });
    const stop = new AbortController();
    let got: unknown = null;
    const down = pushes.look.next(60_000, stop.signal).then((value) => (got = value));
    await clock.advanceMs(59_000);
    assert.equal(got, null);
    // Up again before the interval passed: the wait goes on, and the interval starts over.
    sink.live(true);
    await clock.advanceMs(30_000);
    sink.live(false);
    await clock.advanceMs(59_000);
    assert.equal(got, null);
    await clock.advanceMs(1_000);
    await down;
    assert.equal(got, 'down');

    sink.live(true);
    got = null;
    const waited = pushes.look.next(60_000, stop.signal, 5_000).then((value) => (got = value));
    await clock.advanceMs(5_000);
    await waited;
    assert.equal(got, 'waited');

    const aborted = pushes.look.next(60_000, stop.signal);
    stop.abort();
    await assert.rejects(aborted, { name: 'AbortError' });
  });
});
