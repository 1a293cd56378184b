import assert from 'node:assert/strict';
import { colorAllowed, fitLine, liveAllowed, LiveArea } from '../../src/cli/liveArea';
import { BOOT_LOG_LINES } from '../../src/cli/render';
import { EventBus } from '../../src/core/events';
import { renderer } from '../helpers/cliRenderer';
import { hasEscapes, screenOf } from '../helpers/terminalScreen';

describe('cli: the live area on a terminal', () => {
  it('redraws its block in place below the ordinary lines, and erases it when emptied', () => {
    let out = '';
    const area = new LiveArea((c) => (out += c), { color: false, columns: () => 80 });
    area.line('pod: creating a pod');
    area.set(['booting:', '  a']);
    area.set(['booting:', '  a', '  b']);
    area.line('pod: pod p1 created');
    assert.deepEqual(screenOf(out), [
      'pod: creating a pod',
      'pod: pod p1 created',
      'booting:',
      '  a',
      '  b',
    ]);
    area.set(['booting:', '  c']);
    assert.deepEqual(screenOf(out), [
      'pod: creating a pod',
      'pod: pod p1 created',
      'booting:',
      '  c',
    ]);
    area.set([]);
    area.line('pod: pod p1 ready');
    assert.deepEqual(screenOf(out), [
      'pod: creating a pod',
      'pod: pod p1 created',
      'pod: pod p1 ready',
    ]);
  });

  it('a line to another stream (stdout) goes above the block too', () => {
    let out = '';
    const area = new LiveArea((c) => (out += c), { color: false, columns: () => 80 });
    area.set(['block']);
    area.line('final', (c) => (out += c));
    assert.deepEqual(screenOf(out), ['final', 'block']);
  });

  it('cuts status lines to the width (no wrap breaks the redraw) and hides control characters', () => {
    let out = '';
    const area = new LiveArea((c) => (out += c), { color: false, columns: () => 11 });
    area.set(['0123456789abcdef', 'x\u001b[2Jy']);
    assert.deepEqual(screenOf(out), ['012345678…', 'x?[2Jy']);
    assert.equal(fitLine('ab', 1), '');
  });

  it('colours (dims) the block only when colour is allowed', () => {
    let plain = '';
    new LiveArea((c) => (plain += c), { color: false, columns: () => 80 }).set(['a']);
    assert.equal(plain, 'a\n');
    let dim = '';
    new LiveArea((c) => (dim += c), { color: true, columns: () => 80 }).set(['a']);
    assert.equal(dim, '\u001b[2ma\n\u001b[0m');
  });

  it('colour only on a terminal, never with NO_COLOR set (any value) or TERM=dumb', () => {
    assert.equal(colorAllowed({}, true), true);
    assert.equal(colorAllowed({}, false), false);
    assert.equal(colorAllowed({ NO_COLOR: '1' }, true), false);
    assert.equal(colorAllowed({ NO_COLOR: '0' }, true), false);
    assert.equal(colorAllowed({ NO_COLOR: '' }, true), true);
    assert.equal(colorAllowed({ TERM: 'dumb' }, true), false);
  });

  it('no live area on a terminal that cannot move its cursor (TERM=dumb), nor off a terminal', () => {
    assert.equal(liveAllowed({ TERM: 'xterm' }, true), true);
    assert.equal(
      liveAllowed({ NO_COLOR: '1' }, true),
      true,
      'NO_COLOR drops colour, not the redraw',
    );
    assert.equal(liveAllowed({ TERM: 'dumb' }, true), false);
    assert.equal(liveAllowed({ TERM: 'xterm' }, false), false);
  });
});

describe('cli: the boot log while a pod provisions', () => {
  function publishBoot(bus: EventBus, count: number): void {
    bus.publish({
      type: 'pod',
      runId: 'r1',
      status: { kind: 'created', podId: 'p1', gpuType: 'A40', dataCenter: null, costPerHourUsd: 1 },
    });
    for (let i = 1; i <= count; i++)
      bus.publish({
        type: 'podLog',
        runId: 'r1',
        podId: 'p1',
        source: 'system',
        line: `boot ${i}`,
      });
  }

  it('on a terminal: the last lines in the status block, gone once the pod answers SSH', () => {
    const { bus, lines, blocks } = renderer(true);
    publishBoot(bus, BOOT_LOG_LINES + 2);
    assert.deepEqual(blocks.at(-1), [
      'pod p1 is booting; the last lines of its log:',
      ...Array.from({ length: BOOT_LOG_LINES }, (_, i) => `  system: boot ${i + 3}`),
    ]);
    bus.publish({
      type: 'pod',
      runId: 'r1',
      status: { kind: 'ready', podId: 'p1', afterMs: 1, deadline: null },
    });
    assert.deepEqual(blocks.at(-1), []);
    const shown = blocks.length;
    bus.publish({ type: 'podLog', runId: 'r1', podId: 'p1', source: 'container', line: 'after' });
    assert.equal(blocks.length, shown);
    assert.ok(!lines.some((l) => l.includes('boot')), lines.join('\n'));
  });

  it('not on a terminal: plain `pod log:` lines until the pod answers SSH, no escape', () => {
    const { bus, lines } = renderer(false);
    publishBoot(bus, 2);
    bus.publish({
      type: 'pod',
      runId: 'r1',
      status: { kind: 'ready', podId: 'p1', afterMs: 1, deadline: null },
    });
    bus.publish({ type: 'podLog', runId: 'r1', podId: 'p1', source: 'container', line: 'after' });
    assert.deepEqual(lines.slice(1), [
      'pod log: system: boot 1',
      'pod log: system: boot 2',
      lines[3],
    ]);
    assert.match(lines[3]!, /^pod: .*ready/);
    assert.equal(lines.length, 4);
    assert.ok(!hasEscapes(lines.join('\n')));
  });
});
