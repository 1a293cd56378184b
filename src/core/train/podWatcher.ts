/**
 * The pod-side watcher of a followed job and what it pushes: one long-lived command on the
 * target streams `metrics.jsonl` on stdout and pushes on stderr, one line each, what the client
 * would otherwise have to ask for over SSH — signs of life, the job's end, and (when asked) the
 * run's checkpoints as they are saved and the disk figures the disk policy needs. So a followed
 * run costs no request while its channel speaks; the client falls back to asking only while the
 * channel is down.
 */
import type { JobStatus } from '../events';
import { sampleScript } from './disk';
import { GPU_QUERY_COMMAND } from './gpuSamples';
import { GROUP_ALIVE_SH, METRICS_FILE, parseJobStatus, shQuote, statusScript } from './job';
import { BATCH_PROBE_SH, batchCommand } from './podBatch';

export type EndedJobStatus = Exclude<JobStatus, { kind: 'running' }>;

/**
 * The watcher's tick, `tick` seconds and `per_s` ticks a second: half a second where `sleep`
 * takes fractions, else one. Every tick starts a `sleep` process for as long as a run is
 * followed; at a tenth of a second (the short waits' tick) ten followed runs on one machine
 * started 100 processes a second between them, for a job's end seen 0.4 s sooner at most. The
 * metrics do not wait on it: `tail` sends them as they come.
 */
const WATCH_TICK_SH = `if sleep 0.5 2>/dev/null; then tick=0.5 per_s=2; else tick=1 per_s=1; fi`;

/** What the pod pushes on the stream's stderr, one line each. */
export const PUSH_ALIVE = '@ob alive';
export const PUSH_STATUS = '@ob status ';
/** One line of a checkpoint look (the output of {@link lookScript}); {@link PUSH_LOOKED} ends it. */
export const PUSH_LOOK = '@ob look ';
export const PUSH_LOOKED = '@ob looked';
/** A disk sample: the line of the disk policy's sampler (train/disk.ts). */
export const PUSH_DISK = '@ob disk ';
/** A GPU sample: nvidia-smi's answer (./gpuSamples.ts), its lines joined by `;`. */
export const PUSH_GPU = '@ob gpu ';

/**
 * Lists `checkpoint-<step>` directories under the run directory (at most 4 levels down), leaving
 * out `resume/` (a resumed run's input) and hidden directories (`.pod`, a trainer's temp dirs);
 * then the files and sizes of each, and `snapshot.json` when there is one.
 */
export function lookScript(remoteRunDir: string): string {
  return [
    `cd ${shQuote(remoteRunDir)} || exit 3`,
    `find . -maxdepth 4 \\( -path ./resume -o -path './.*' -o -path '*/.*' \\) -prune -o -type d -name 'checkpoint-[0-9]*' -print -prune | while IFS= read -r d; do`,
    `  printf 'D %s\\n' "$d"`,
    `  find "$d" -type f -exec wc -c {} + 2>/dev/null | grep -v ' total$' | sort -k2 | sed 's/^/F /'`,
    `done`,
    `[ -f snapshot.json ] && { printf 'S '; tr -d '\\n' < snapshot.json; echo; }`,
    `exit 0`,
  ].join('\n');
}

/** What the watcher pushes beside the job's end, and where the client takes it. */
export interface PodPushSink {
  /** Look for checkpoints this often (ms; at least one tick of the watcher). */
  lookMs: number;
  /** Sample the disk this often (ms; at least one tick of the watcher). */
  diskMs: number;
  /** The network volume's mount (its use is what counts), or null: the run directory's filesystem. */
  volumeDir: string | null;
  /** Sample the GPUs this often (ms; at least one tick of the watcher); absent: never. */
  gpuMs?: number;
  /** A checkpoint look that differs from the one pushed before it, or repeats it once settled. */
  look(text: string): void;
  /** A disk sample's line. */
  disk(line: string): void;
  /** A GPU sample: nvidia-smi's answer, one line per GPU. */
  gpu?(text: string): void;
  /** Whether the channel is up (pushes can come) or down (the client must ask itself). */
  live(isLive: boolean): void;
}

/**
 * The checkpoint part of the watcher, every `look_every` ticks: a cheap glob of the checkpoint
 * directories and their entries (shell builtins only, no process) says whether anything changed;
 * only then, and until two looks in a row are the same, the full look runs and is pushed. The
 * repeat is pushed too: a checkpoint whose files and sizes are the same at two looks is finished.
 */
function lookSh(runDir: string): string {
  return [
    `look_ck() (\n${lookScript(runDir)}\n)`,
    'ck_seen=; ck_pushed=; ck_settled=0',
    'look_tick() {',
    '  ck_t=',
    '  for ck_d in checkpoint-[0-9]* */checkpoint-[0-9]* */*/checkpoint-[0-9]* */*/*/checkpoint-[0-9]*; do',
    '    [ -d "$ck_d" ] || continue',
    '    ck_t="$ck_t|$ck_d"',
    '    for ck_f in "$ck_d"/*; do ck_t="$ck_t:$ck_f"; done',
    '  done',
    '  if [ -e snapshot.json ]; then ck_t="$ck_t|S"; fi',
    '  if [ "$ck_t" != "$ck_seen" ]; then ck_seen=$ck_t; ck_settled=0; fi',
    '  [ "$ck_settled" = 0 ] || return 0',
    '  if [ -z "$ck_t" ]; then ck_settled=1; return 0; fi',
    `  ck_out=$(look_ck 2>/dev/null | sed 's/^/${PUSH_LOOK}/')`,
    '  if [ "$ck_out" = "$ck_pushed" ]; then ck_settled=1; fi',
    '  ck_pushed=$ck_out',
    `  if [ -n "$ck_out" ]; then printf '%s\\n${PUSH_LOOKED}\\n' "$ck_out" >&2; else printf '${PUSH_LOOKED}\\n' >&2; fi`,
    '}',
  ].join('\n');
}

/**
 * The GPU part of the watcher: every `gpuMs` (in ticks, at least one) nvidia-smi's answer to
 * {@link GPU_QUERY_COMMAND}, its lines joined by `;`, pushed as one line. Only where nvidia-smi
 * is on the PATH (a target without a GPU pushes nothing), and through `timeout` when there is one:
 * a driver that hangs nvidia-smi must not stop the watcher's signs of life. The first sample goes
 * at once.
 */
function gpuSh(gpuMs: number | undefined): string[] {
  if (gpuMs === undefined) return ['gpu_tick() { :; }'];
  const ms = Math.max(1, Math.round(gpuMs));
  return [
    'if command -v nvidia-smi >/dev/null 2>&1; then gpu_on=1; else gpu_on=; fi',
    'if command -v timeout >/dev/null 2>&1; then gpu_to="timeout 8"; else gpu_to=; fi',
    `gpu_every=$((${ms} * per_s / 1000)); [ "$gpu_every" -ge 1 ] || gpu_every=1`,
    'gpu_tick() {',
    '  [ -n "$gpu_on" ] && [ $((n % gpu_every)) -eq 0 ] || return 0',
    `  gpu_out=$($gpu_to ${GPU_QUERY_COMMAND} 2>/dev/null) || return 0`,
    `  printf '${PUSH_GPU}%s\n' "$(printf '%s' "$gpu_out" | tr '\n' ';')" >&2`,
    '}',
  ];
}

/**
 * The watcher (POSIX sh: dash, busybox sh, bash): streams `<runDir>/metrics.jsonl` from byte
 * `offset` on stdout (a `tail -F` in the background) and pushes on stderr what the client would
 * otherwise have to ask for: `@ob alive` every `heartbeatS` seconds, and once the job ended
 * (exit_code or cancelled, looked at every tick; its group gone, every second)
 * `@ob status <the status script's answer>`, after which it exits 0. With `pushes`, also the
 * checkpoint looks (see {@link lookSh}) and a disk sample every `diskMs`. So a tail never
 * outlives its job on the target even if the client vanished, a job's end reaches the client
 * within a tick, and following costs no request while the channel carries signs of life. Exit 3
 * = tail died; a closed channel ends it on its next write (SIGPIPE, exit 4).
 *
 * The file is waited for here (every tick) rather than by `tail -F`: a GNU tail started before
 * its file exists falls back to polling it once a second after it appears, instead of inotify.
 * GNU tail also gets `--pid`, so it goes with the shell if that is killed. Each write of the
 * stream wakes the client (its CPU is mostly per wake-up, issue 39), so lines leave in batches:
 * where python3 runs, the batcher of ./podBatch.ts sends what it holds once its oldest line is
 * POD_BATCH_MS (200 ms) old (a trainer logging 10 lines/s: about 3.3 writes a second); else GNU
 * tail polls every 0.2 s (`-s 0.2 ---disable-inotify`) and a poll's lines leave in one write
 * (5 a second); busybox tail polls once a second (integer `-s` only).
 */
export function streamCommand(
  runDir: string,
  offset: number,
  heartbeatS = 20,
  pushes: Pick<PodPushSink, 'lookMs' | 'diskMs' | 'volumeDir' | 'gpuMs'> | null = null,
): string {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`bad offset ${offset}`);
  if (!Number.isSafeInteger(heartbeatS) || heartbeatS < 1)
    throw new RangeError(`bad heartbeat ${heartbeatS}`);
  const lines = [
    `cd ${shQuote(runDir)} || exit 3`,
    GROUP_ALIVE_SH,
    // The job's PID read by the shell itself, not by a `cat` every second.
    'job_pid() { pid=; { IFS= read -r pid < job.pid; } 2>/dev/null; return 0; }',
    'job_over() { [ -e exit_code ] || [ -e cancelled ] || { job_pid; ! group_alive "$pid"; }; }',
    // The status script in a subshell: its `exit` ends only that.
    `job_status() (\n${statusScript(runDir)}\n)`,
    `push_end() { printf '${PUSH_STATUS}%s\\n' "$(job_status)" >&2; exit 0; }`,
    `alive() { if [ $((n % (per_s * ${heartbeatS}))) -eq 0 ]; then printf '${PUSH_ALIVE}\\n' >&2; fi; }`,
    WATCH_TICK_SH,
  ];
  if (pushes === null) {
    lines.push('pushes() { :; }');
  } else {
    const lookMs = Math.max(1, Math.round(pushes.lookMs));
    const diskMs = Math.max(1, Math.round(pushes.diskMs));
    lines.push(
      lookSh(runDir),
      `disk_sample() (\n${sampleScript(runDir, pushes.volumeDir)}\n)`,
      `disk_push() { ck_s=$(disk_sample 2>/dev/null) && printf '${PUSH_DISK}%s\\n' "$ck_s" >&2; }`,
      // Both in ticks of the watcher's loop, at least one.
      `look_every=$((${lookMs} * per_s / 1000)); [ "$look_every" -ge 1 ] || look_every=1`,
      `disk_every=$((${diskMs} * per_s / 1000)); [ "$disk_every" -ge 1 ] || disk_every=1`,
      ...gpuSh(pushes.gpuMs),
      'pushes() {',
      '  if [ $((n % look_every)) -eq 0 ]; then look_tick; fi',
      '  if [ $((n % disk_every)) -eq 0 ]; then disk_push; fi',
      '  gpu_tick',
      '}',
    );
  }
  lines.push(
    'n=0',
    `while [ ! -e ${METRICS_FILE} ]; do`,
    '  if [ $((n % per_s)) -eq 0 ] && job_over; then push_end; fi',
    '  alive',
    '  pushes',
    '  sleep $tick',
    '  n=$((n + 1))',
    'done',
    'if tail --version >/dev/null 2>&1; then opts="-s 0.2 --pid=$$"; else opts=; fi',
    // A GNU tail woken by inotify feeds the batcher (./podBatch.ts) where python3 runs; else the
    // tail polls every 0.2 s and sends a poll's lines in one write.
    `if [ -n "$opts" ] && ${BATCH_PROBE_SH}; then`,
    `  ${batchCommand(`tail -c +${offset + 1} $opts -F ${METRICS_FILE}`)} &`,
    'else',
    '  if [ -n "$opts" ] && tail ---disable-inotify --version >/dev/null 2>&1; then opts="$opts ---disable-inotify"; fi',
    `  tail -c +${offset + 1} $opts -F ${METRICS_FILE} &`,
    'fi',
    't=$!',
    `trap 'kill $t 2>/dev/null; exit 4' HUP INT TERM PIPE`,
    'while ! { [ -e exit_code ] || [ -e cancelled ]; }; do',
    '  if [ $((n % per_s)) -eq 0 ]; then',
    '    kill -0 "$t" 2>/dev/null || exit 3',
    '    job_pid',
    '    group_alive "$pid" || break',
    '  fi',
    '  alive',
    '  pushes',
    '  sleep $tick',
    '  n=$((n + 1))',
    'done',
    'kill "$t" 2>/dev/null',
    'wait "$t" 2>/dev/null',
    'push_end',
  );
  return lines.join('\n');
}

/** Reads the watcher's stderr lines: the pushes go to the sink, the job's end is kept. */
export class PushReader {
  private lookLines: string[] = [];
  /** The job's end as the pod pushed it, once it did. */
  ended: EndedJobStatus | null = null;

  constructor(private readonly sink: PodPushSink | undefined) {}

  /** True when `line` was a push; false for the watcher's own words (an error). */
  line(line: string): boolean {
    if (line === PUSH_ALIVE) return true;
    if (line.startsWith(PUSH_STATUS)) {
      const status = parseJobStatus(line.slice(PUSH_STATUS.length));
      if (status !== null && status.kind !== 'running') this.ended = status;
      return true;
    }
    if (line.startsWith(PUSH_LOOK)) {
      if (this.lookLines.length < 100_000) this.lookLines.push(line.slice(PUSH_LOOK.length));
      return true;
    }
    if (line === PUSH_LOOKED) {
      const text = this.lookLines.join('\n');
      this.lookLines = [];
      this.sink?.look(text);
      return true;
    }
    if (line.startsWith(PUSH_DISK)) {
      this.sink?.disk(line.slice(PUSH_DISK.length));
      return true;
    }
    if (line.startsWith(PUSH_GPU)) {
      this.sink?.gpu?.(line.slice(PUSH_GPU.length).split(';').join('\n'));
      return true;
    }
    return false;
  }
}
