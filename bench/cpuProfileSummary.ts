/**
 * Reads what bench/extHostProfiler.ts left in a folder (extension host profiles, the clicks' wall
 * times) and prints, per window, where the extension host's main thread spent the span from the
 * click on the Overbrainer container to `spanMs` after it: self and inclusive time per function
 * (inclusive: every sample whose stack holds it), and a timeline in 10 ms slices naming the
 * busiest function of ours in each.
 *
 *   npx tsx bench/cpuProfileSummary.ts DIR [spanMs=600] [top=25]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

function frameName(frame: CallFrame): string {
  const file = frame.url === '' ? '' : ` ${basename(frame.url)}:${frame.lineNumber + 1}`;
  return `${frame.functionName || '(anonymous)'}${file}`;
}

function summarise(profile: Profile, fromUs: number, toUs: number, top: number): void {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes)
    for (const child of node.children ?? []) parent.set(child, node.id);
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const slices = new Map<number, Map<string, number>>();
  let t = profile.startTime;
  let totalUs = 0;
  let idleUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i]!;
    const dt = profile.timeDeltas[i + 1] ?? 0;
    if (t < fromUs || t > toUs) continue;
    const node = byId.get(profile.samples[i]!)!;
    const name = frameName(node.callFrame);
    if (node.callFrame.functionName === '(idle)') {
      idleUs += dt;
      continue;
    }
    totalUs += dt;
    self.set(name, (self.get(name) ?? 0) + dt);
    const seen = new Set<string>();
    let ours: string | null = null;
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const frame = byId.get(id)!.callFrame;
      const n = frameName(frame);
      if (ours === null && /extension(-core)?\.js/.test(frame.url)) ours = n;
      if (seen.has(n)) continue;
      seen.add(n);
      inclusive.set(n, (inclusive.get(n) ?? 0) + dt);
    }
    const slice = Math.floor((t - fromUs) / 10_000);
    const names = slices.get(slice) ?? new Map<string, number>();
    const key = ours ?? `[${name}]`;
    names.set(key, (names.get(key) ?? 0) + dt);
    slices.set(slice, names);
  }
  const ms = (us: number): string => (us / 1000).toFixed(1);
  console.log(`  busy ${ms(totalUs)} ms, idle ${ms(idleUs)} ms in ${ms(toUs - fromUs)} ms`);
  const list = (title: string, map: Map<string, number>): void => {
    console.log(`  ${title}:`);
    for (const [name, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top))
      console.log(`    ${ms(us).padStart(7)}  ${name}`);
  };
  list('self', self);
  list('inclusive', inclusive);
  console.log(
    '  timeline (10 ms slices: busy ms, the top frames of ours or else the sampled one):',
  );
  for (const [slice, names] of [...slices].sort((a, b) => a[0] - b[0])) {
    const busy = [...names.values()].reduce((a, b) => a + b, 0);
    const tops = [...names]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 3)
      .map(([n, us]) => `${n} ${ms(us)}`)
      .join(' | ');
    console.log(`    ${String(slice * 10).padStart(5)} ms  ${ms(busy).padStart(5)}  ${tops}`);
  }
}

function main(): void {
  const [dir, spanArg, topArg] = process.argv.slice(2);
  if (dir === undefined) throw new Error('usage: cpuProfileSummary.ts DIR [spanMs] [top]');
  const spanMs = Number(spanArg ?? 600);
  const top = Number(topArg ?? 25);
  const names = readdirSync(dir).sort();
  const clicks = names
    .filter((n) => n.startsWith('click-'))
    .map(
      (n) =>
        JSON.parse(readFileSync(join(dir, n), 'utf8')) as {
          clickWallMs: number;
          runsTreeMs: number;
        },
    );
  const profiles = names.filter((n) => n.startsWith('exthost-') && n.endsWith('.cpuprofile'));
  const pages = names.filter((n) => n.startsWith('page-') && n.endsWith('.cpuprofile'));
  profiles.forEach((name, i) => {
    const click = clicks[i];
    if (click === undefined) return;
    const profile = JSON.parse(readFileSync(join(dir, name), 'utf8')) as Profile;
    const clocks = JSON.parse(readFileSync(join(dir, `${name}.clocks.json`), 'utf8')) as {
      profileNowUs: number;
      wallNowMs: number;
    };
    const clickUs = clocks.profileNowUs - (clocks.wallNowMs - click.clickWallMs) * 1000;
    console.log(`${name}: first row ${click.runsTreeMs.toFixed(0)} ms after the click`);
    summarise(profile, clickUs, clickUs + spanMs * 1000, top);
    const page = pages[i];
    if (page !== undefined) {
      const pageProfile = JSON.parse(readFileSync(join(dir, page), 'utf8')) as Profile;
      sideBySide(pageProfile, profile, clickUs, spanMs);
    }
  });
}

/** Busy µs per 20 ms slice from `fromUs`, with the top two frames (of ours, when `ours` matches). */
function busySlices(
  profile: Profile,
  fromUs: number,
  spanMs: number,
  ours: RegExp | null,
): Map<number, Map<string, number>> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes)
    for (const child of node.children ?? []) parent.set(child, node.id);
  const slices = new Map<number, Map<string, number>>();
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i]!;
    const dt = profile.timeDeltas[i + 1] ?? 0;
    if (t < fromUs || t > fromUs + spanMs * 1000) continue;
    const node = byId.get(profile.samples[i]!)!;
    if (node.callFrame.functionName === '(idle)') continue;
    let key = node.callFrame.functionName || '(anonymous)';
    for (let id: number | undefined = node.id; ours && id !== undefined; id = parent.get(id)) {
      const frame = byId.get(id)!.callFrame;
      if (ours.test(frame.url)) {
        key = frame.functionName || '(anonymous)';
        break;
      }
    }
    const slice = Math.floor((t - fromUs) / 20_000);
    const names = slices.get(slice) ?? new Map<string, number>();
    names.set(key, (names.get(key) ?? 0) + dt);
    slices.set(slice, names);
  }
  return slices;
}

/**
 * The page (the workbench's renderer) and the extension host side by side after the click, in
 * 20 ms slices: which of them the wait is in. Both profiles' clocks are the machine's monotonic
 * clock (V8's TimeTicks), so the extension host's click time serves for both.
 */
function sideBySide(page: Profile, host: Profile, clickUs: number, spanMs: number): void {
  const pageSlices = busySlices(page, clickUs, spanMs, null);
  const hostSlices = busySlices(host, clickUs, spanMs, /extension(-core)?\.js/);
  const cell = (names: Map<string, number> | undefined): string => {
    if (names === undefined) return ''.padEnd(44);
    const busy = [...names.values()].reduce((a, b) => a + b, 0);
    const tops = [...names]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 2)
      .map(([n, us]) => `${n.slice(0, 18)} ${(us / 1000).toFixed(0)}`)
      .join(', ');
    return `${(busy / 1000).toFixed(0).padStart(3)} ${tops}`.padEnd(44);
  };
  console.log('  page | extension host, busy ms per 20 ms slice and their top frames:');
  for (let slice = 0; slice * 20 <= spanMs; slice++) {
    console.log(
      `    ${String(slice * 20).padStart(5)} ms  ${cell(pageSlices.get(slice))} | ${cell(hostSlices.get(slice))}`,
    );
  }
}

main();
