/**
 * Pauses of the whole machine, seen from this process: a timer set for every 250 ms that fires
 * seconds late means nothing here ran meanwhile (a frozen VM: these shared machines have logged
 * "workqueue lockup ... stuck for 55s" in dmesg, during which every process stood still, the
 * product's and the browser's too). A wait bounded in time passes its bound across such a pause
 * although nothing had a chance to happen; `eventually` adds the paused time to its bound, and a
 * failure says whether a pause happened while its test ran (see window.ts).
 */

/** How often the watch's timer fires. */
const TICK_MS = 250;
/** A timer this late is a pause (the CPU this process used meanwhile tells whose). */
export const STALL_MS = 2_000;

export interface Stall {
  /** When the pause began (epoch ms, this machine's clock). */
  atMs: number;
  durationMs: number;
  /** CPU this process used meanwhile: near 0 when the machine (not this process) stood still. */
  ownCpuMs: number;
}

const stalls: Stall[] = [];
let timer: NodeJS.Timeout | undefined;

/** Starts the watch (once per process; its timer never keeps the process alive). */
export function watchStalls(): void {
  if (timer !== undefined) return;
  let last = performance.now();
  let lastCpu = process.cpuUsage();
  timer = setInterval(() => {
    const now = performance.now();
    const cpu = process.cpuUsage();
    const lateMs = now - last - TICK_MS;
    if (lateMs >= STALL_MS) {
      const ownCpuMs = (cpu.user - lastCpu.user + cpu.system - lastCpu.system) / 1000;
      stalls.push({ atMs: Date.now() - lateMs, durationMs: lateMs, ownCpuMs });
    }
    last = now;
    lastCpu = cpu;
  }, TICK_MS);
  timer.unref();
}

/** The pauses that began at or after `sinceMs` (epoch ms). */
export function stallsSince(sinceMs: number): Stall[] {
  return stalls.filter((s) => s.atMs >= sinceMs);
}

/** How long the machine stood still since `sinceMs`, in all. */
export function stalledMsSince(sinceMs: number): number {
  return stallsSince(sinceMs).reduce((sum, s) => sum + s.durationMs, 0);
}

/** One line for a failure: the pauses since `sinceMs`, or that there was none. */
export function describeStalls(sinceMs: number): string {
  const seen = stallsSince(sinceMs);
  if (timer === undefined) return 'machine pauses: not watched';
  if (seen.length === 0) return `machine pauses: none over ${STALL_MS / 1000} s while it ran`;
  const each = seen.map(
    (s) =>
      `${(s.durationMs / 1000).toFixed(1)} s at ${new Date(s.atMs).toISOString().slice(11, 19)} UTC (this process's own CPU meanwhile ${Math.round(s.ownCpuMs)} ms)`,
  );
  return `machine pauses while it ran: ${each.join(', ')}; with little CPU of its own, nothing let this process run (a frozen machine, or one starved by others)`;
}
