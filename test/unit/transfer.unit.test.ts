import assert from 'node:assert/strict';
import { EventBus, type CoreEvent, type TransferProgress } from '../../src/core/events';
import { TRANSFER_REPORT_MS } from '../../src/core/timing';
import {
  formatBytes,
  formatElapsed,
  formatTransferTime,
  percentDone,
  transferDoneLine,
  transferLiveLine,
} from '../../src/core/transferFormat';
import { splitSizes } from '../../src/core/train/retrievalScripts';
import { TransferReporter } from '../../src/core/transferProgress';
import { RateMeter } from '../../src/core/transferRate';
import { FakeClock } from '../helpers/fakeClock';
import { MIB, transferProgress } from '../helpers/transferFixture';

/** Feeds `meter` a steady `bytesPerS` every `stepMs` for `forMs`, on `clock`; the bytes reached. */
async function steady(
  meter: RateMeter,
  clock: FakeClock,
  fromBytes: number,
  bytesPerS: number,
  stepMs: number,
  forMs: number,
): Promise<number> {
  let bytes = fromBytes;
  for (let t = 0; t < forMs; t += stepMs) {
    await clock.advanceMs(stepMs);
    bytes += (bytesPerS * stepMs) / 1000;
    meter.sample(clock.nowMs(), bytes);
  }
  return bytes;
}

describe('transfer rate and time left (RateMeter)', () => {
  it('a steady rate is measured exactly, and the time left follows from it', async () => {
    const clock = new FakeClock();
    const meter = new RateMeter();
    assert.equal(meter.rateBytesPerS(), null, 'no rate before a first stretch');
    meter.sample(clock.nowMs(), 0);
    const bytes = await steady(meter, clock, 0, 48 * MIB, 250, 2_000);
    assert.equal(meter.rateBytesPerS(), 48 * MIB);
    assert.equal(meter.etaMs(bytes + 48 * MIB * 15), 15_000);
    assert.equal(meter.etaMs(null), null, 'no total: no time left');
    assert.equal(meter.averageBytesPerS(clock.nowMs(), bytes), 48 * MIB);
    assert.equal(meter.elapsedMs(clock.nowMs()), 2_000);
  });

  it('follows a change of pace within a few seconds, smoothed (no jump on one sample)', async () => {
    const clock = new FakeClock();
    const meter = new RateMeter();
    meter.sample(clock.nowMs(), 0);
    let bytes = await steady(meter, clock, 0, 100 * MIB, 250, 5_000);
    bytes = await steady(meter, clock, bytes, 10 * MIB, 250, 250);
    const afterOne = meter.rateBytesPerS()!;
    assert.ok(
      afterOne > 80 * MIB && afterOne < 100 * MIB,
      `one slow stretch swung it to ${afterOne}`,
    );
    await steady(meter, clock, bytes, 10 * MIB, 250, 15_000);
    const settled = meter.rateBytesPerS()!;
    assert.ok(Math.abs(settled - 10 * MIB) < 1 * MIB, `still at ${settled} after 15 s`);
  });

  it('samples closer than the least stretch are accumulated, not taken as a rate', () => {
    const meter = new RateMeter(3_000, 200);
    meter.sample(1_000, 0);
    meter.sample(1_001, 10 * MIB); // 1 ms later: 10 GiB/s would be noise
    assert.equal(meter.rateBytesPerS(), null);
    meter.sample(1_200, 20 * MIB);
    assert.equal(meter.rateBytesPerS(), 100 * MIB);
  });

  it('a stalled transfer has a rate of 0 and no time left', () => {
    const meter = new RateMeter(3_000, 200);
    meter.sample(0, 5);
    meter.sample(1_000, 5);
    assert.equal(meter.rateBytesPerS(), 0);
    assert.equal(meter.etaMs(100), null);
  });
});

describe('transfer events (TransferReporter)', () => {
  function collect(): { bus: EventBus; events: (CoreEvent & { type: 'transfer' })[] } {
    const bus = new EventBus();
    const events: (CoreEvent & { type: 'transfer' })[] = [];
    bus.on((e) => {
      if (e.type === 'transfer') events.push(e);
    });
    return { bus, events };
  }

  it('1 GiB in 64 KiB reports: the first, at most 4 a second, and the last, with the totals', async () => {
    // Time moves with each chunk: 16,384 chunks over 16 s.
    let nowMs = 0;
    const clock = { nowMs: () => nowMs, sleep: () => Promise.resolve() };
    const { bus, events } = collect();
    const reporter = new TransferReporter(bus, clock, 'r1', 'upload');
    const total = 1024 * MIB;
    const chunk = 64 * 1024;
    await reporter.around(async (report) => {
      for (let done = 0; done <= total; done += chunk) {
        nowMs = (done / total) * 16_000;
        const filesDone = done === total ? 1 : 0;
        report({ bytesDone: done, bytesTotal: total, filesDone, filesTotal: 1 });
      }
    });
    assert.equal(events[0]!.phase, 'start');
    assert.equal(events[0]!.bytesDone, 0);
    assert.equal(events[0]!.bytesTotal, total);
    assert.equal(events[0]!.runId, 'r1');
    assert.equal(events[0]!.direction, 'upload');
    const last = events.at(-1)!;
    assert.equal(last.phase, 'done');
    assert.equal(last.bytesDone, total);
    assert.equal(last.filesDone, 1);
    assert.equal(last.etaMs, 0);
    assert.equal(last.rateBytesPerS, total / 16);
    const progress = events.filter((e) => e.phase === 'progress');
    // 16,384 reports, 64 of them published: 4 a second.
    assert.equal(progress.length, 16_000 / TRANSFER_REPORT_MS);
    for (let i = 1; i < progress.length; i++) {
      assert.ok(progress[i]!.elapsedMs - progress[i - 1]!.elapsedMs >= TRANSFER_REPORT_MS);
    }
  });

  it('a failed transfer ends with `failed`; one never reported publishes nothing', async () => {
    const clock = new FakeClock();
    const { bus, events } = collect();
    await assert.rejects(
      new TransferReporter(bus, clock, 'r1', 'retrieve').around(async (report) => {
        report({ bytesDone: 0, bytesTotal: null, filesDone: 0, filesTotal: 3 });
        throw new Error('dropped');
      }),
      /dropped/,
    );
    assert.deepEqual(
      events.map((e) => [e.phase, e.bytesTotal]),
      [
        ['start', null],
        ['failed', null],
      ],
    );
    events.length = 0;
    await assert.rejects(
      new TransferReporter(bus, clock, 'r1', 'upload').around(() => Promise.reject(new Error('x'))),
    );
    assert.equal(events.length, 0);
  });

  it('once every byte went, `checking` at once (not throttled), and no progress after it', () => {
    const clock = { nowMs: () => 1_000, sleep: () => Promise.resolve() };
    const { bus, events } = collect();
    const reporter = new TransferReporter(bus, clock, 'r1', 'upload');
    reporter.report({ bytesDone: 0, bytesTotal: 10, filesDone: 0, filesTotal: 1 });
    reporter.report({ bytesDone: 10, bytesTotal: 10, filesDone: 1, filesTotal: 1, checking: true });
    reporter.report({ bytesDone: 10, bytesTotal: 10, filesDone: 1, filesTotal: 1, checking: true });
    reporter.end(true);
    assert.deepEqual(
      events.map((e) => [e.phase, e.bytesDone, e.etaMs]),
      [
        ['start', 0, null],
        ['checking', 10, null],
        ['done', 10, 0],
      ],
    );
    assert.ok(!('checking' in events[1]!), 'the flag is not an event field');
  });

  it('never shows more done than in all (a file grew since the sizes were taken)', () => {
    const { bus, events } = collect();
    const reporter = new TransferReporter(bus, new FakeClock(), 'r1', 'retrieve');
    reporter.report({ bytesDone: 120, bytesTotal: 100, filesDone: 1, filesTotal: 1 });
    assert.equal(events[0]!.bytesTotal, 120);
  });
});

describe('transfer figures as read', () => {
  const base: TransferProgress = transferProgress({ bytesDone: 312.4 * MIB });

  it('bytes in IEC units, two decimals under 10 and one from there', () => {
    assert.equal(formatBytes(0), '0 B');
    assert.equal(formatBytes(512), '512 B');
    assert.equal(formatBytes(1536), '1.50 KiB');
    assert.equal(formatBytes(312.4 * MIB), '312.4 MiB');
    assert.equal(formatBytes(1024 * MIB), '1.00 GiB');
    assert.equal(formatBytes(1024 * 1024 - 1), '1.00 MiB');
  });

  it('times in whole seconds rounded up, then minutes, then hours', () => {
    assert.equal(formatTransferTime(0), '0 s');
    assert.equal(formatTransferTime(14_200), '15 s');
    assert.equal(formatTransferTime(125_000), '2 min 05 s');
    assert.equal(formatTransferTime(72 * 60_000), '1 h 12 min');
    assert.equal(formatElapsed(240), '0.2 s', 'a short transfer is not said to take a second');
    assert.equal(formatElapsed(9_940), '9.9 s');
    assert.equal(formatElapsed(9_960), '10 s');
  });

  it('the live line and the final line', () => {
    assert.equal(transferLiveLine(base), 'upload: 312.4 MiB of 1.00 GiB, 48.2 MiB/s, 15 s left');
    assert.equal(
      transferLiveLine({ ...base, phase: 'checking', bytesDone: 1024 * MIB }),
      'upload: 1.00 GiB sent, the pod checks it',
    );
    assert.equal(
      transferLiveLine({ ...base, direction: 'retrieve', phase: 'checking', bytesDone: MIB }),
      "retrieve: 1.00 MiB received, checking it against the pod's hashes",
    );
    assert.equal(
      transferLiveLine({
        ...base,
        direction: 'retrieve',
        bytesTotal: null,
        etaMs: null,
        rateBytesPerS: null,
      }),
      'retrieve: 312.4 MiB',
    );
    assert.equal(
      transferDoneLine({
        ...base,
        phase: 'done',
        bytesDone: 1024 * MIB,
        filesDone: 12,
        elapsedMs: 21_000,
        rateBytesPerS: 48.7 * MIB,
      }),
      'upload: 1.00 GiB (12 files) in 21 s, 48.7 MiB/s',
    );
  });

  it('percent: never 100 before the end, unknown without a total', () => {
    assert.equal(percentDone(base), 30);
    assert.equal(percentDone({ ...base, bytesDone: base.bytesTotal! }), 99);
    assert.equal(percentDone({ ...base, phase: 'done' }), 100);
    assert.equal(percentDone({ ...base, bytesTotal: null }), null);
  });
});

describe("a retrieval's total from its listing (splitSizes)", () => {
  const nul = (...records: string[]): Buffer => Buffer.from(records.map((r) => `${r}\0`).join(''));

  it('takes the size records out of the listing and sums them', () => {
    const { listing, sizes } = splitSizes(
      nul('./output/a', './output/new\nline', '=5', '=2', './m', '=3'),
    );
    assert.deepEqual(listing, nul('./output/a', './output/new\nline', './m'));
    assert.deepEqual(sizes, { bytes: 10, files: 3 });
  });

  it('no size for listed files (no `stat -c` on the pod): the total is unknown', () => {
    assert.deepEqual(splitSizes(nul('./a')), { listing: nul('./a'), sizes: null });
    assert.deepEqual(splitSizes(Buffer.alloc(0)).sizes, { bytes: 0, files: 0 });
  });

  it('a listing cut short stays cut short (the listing refuses it, not this)', () => {
    const cut = Buffer.from('./a\0./b');
    assert.deepEqual(splitSizes(cut).listing, cut);
    assert.deepEqual(splitSizes(Buffer.from('./a\0=12')).listing, Buffer.from('./a\0=12'));
  });
});
