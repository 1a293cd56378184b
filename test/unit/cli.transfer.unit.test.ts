import assert from 'node:assert/strict';
import { EventBus, type TransferProgress } from '../../src/core/events';
import { TRANSFER_LIVE_AFTER_MS } from '../../src/core/timing';
import { renderer } from '../helpers/cliRenderer';

const MIB = 1024 * 1024;

function transfer(bus: EventBus, over: Partial<TransferProgress>): void {
  bus.publish({
    type: 'transfer',
    runId: 'r1',
    direction: 'upload',
    phase: 'progress',
    bytesDone: 0,
    bytesTotal: 1024 * MIB,
    filesDone: 0,
    filesTotal: 2,
    rateBytesPerS: null,
    etaMs: null,
    elapsedMs: 0,
    ...over,
  });
}

const DONE: Partial<TransferProgress> = {
  phase: 'done',
  bytesDone: 1024 * MIB,
  bytesTotal: 1024 * MIB,
  filesDone: 2,
  rateBytesPerS: 48.7 * MIB,
  etaMs: 0,
  elapsedMs: 21_000,
};

describe('cli: a transfer on a terminal and off it', () => {
  it('on a terminal: one line redrawn in place, then the final line with the total, time and rate', () => {
    const { bus, lines, blocks } = renderer(true);
    transfer(bus, { phase: 'start' });
    assert.equal(blocks.length, 0, 'nothing shown before it has lasted a second');
    transfer(bus, {
      bytesDone: 312.4 * MIB,
      rateBytesPerS: 48.2 * MIB,
      etaMs: 14_200,
      elapsedMs: 6_500,
    });
    assert.deepEqual(blocks.at(-1), ['upload: 312.4 MiB of 1.00 GiB, 48.2 MiB/s, 15 s left']);
    // Every byte sent: the pod's check can take seconds for a GiB, and the line says so.
    transfer(bus, { phase: 'checking', bytesDone: 1024 * MIB, elapsedMs: 20_000 });
    assert.deepEqual(blocks.at(-1), ['upload: 1.00 GiB sent, the pod checks it']);
    transfer(bus, DONE);
    assert.deepEqual(blocks.at(-1), [], 'the live line goes at the end');
    assert.deepEqual(lines, ['upload: 1.00 GiB (2 files) in 21 s, 48.7 MiB/s']);
  });

  it('the transfer line sits below the boot log while a pod still boots', () => {
    const { bus, blocks } = renderer(true);
    bus.publish({ type: 'podLog', runId: 'r1', podId: 'p1', source: 'system', line: 'boot 1' });
    transfer(bus, { bytesDone: MIB, elapsedMs: TRANSFER_LIVE_AFTER_MS });
    assert.deepEqual(blocks.at(-1), [
      'pod p1 is booting; the last lines of its log:',
      '  system: boot 1',
      'upload: 1.00 MiB of 1.00 GiB',
    ]);
  });

  it('a transfer shorter than a second shows its final line alone', () => {
    const { bus, lines, blocks } = renderer(true);
    transfer(bus, { phase: 'start' });
    transfer(bus, { bytesDone: MIB, elapsedMs: TRANSFER_LIVE_AFTER_MS - 1 });
    transfer(bus, { ...DONE, elapsedMs: 900 });
    assert.equal(blocks.length, 0);
    assert.equal(lines.length, 1);
  });

  it('off a terminal: no line per chunk, the final line only', () => {
    const { bus, lines } = renderer(false);
    transfer(bus, { phase: 'start' });
    for (let s = 1; s <= 20; s++) transfer(bus, { bytesDone: s * 50 * MIB, elapsedMs: s * 1000 });
    transfer(bus, DONE);
    assert.deepEqual(lines, ['upload: 1.00 GiB (2 files) in 21 s, 48.7 MiB/s']);
  });

  it('a failed transfer leaves no line; a checkpoint copy none either (its log line says it)', () => {
    const { bus, lines, blocks } = renderer(true);
    transfer(bus, { bytesDone: MIB, elapsedMs: 2_000 });
    transfer(bus, { phase: 'failed', elapsedMs: 3_000 });
    assert.deepEqual(blocks.at(-1), []);
    transfer(bus, { ...DONE, direction: 'checkpoint' });
    assert.deepEqual(lines, []);
  });
});
