/**
 * The CLI's renderer on a bus, on a fake clock, as its unit tests read it: the lines it prints
 * and, on a terminal (`tty`), each status block it draws.
 */
import { CliRenderer } from '../../src/cli/render';
import { EventBus } from '../../src/core/events';
import { FakeClock } from './fakeClock';

export function renderer(tty: boolean): { bus: EventBus; lines: string[]; blocks: string[][] } {
  const bus = new EventBus();
  const lines: string[] = [];
  const blocks: string[][] = [];
  new CliRenderer(bus, (l) => lines.push(l), {
    clock: new FakeClock(),
    debug: false,
    ...(tty ? { status: (b: string[]) => blocks.push(b) } : {}),
  });
  return { bus, lines, blocks };
}
