/**
 * The disk policy while a run is followed: warn at 85 % full and
 * at every 5 % above; at 92 %, or when the free space is less than 1.5 × the newest checkpoint
 * (the next save would not fit), grow the run's network volume (by half its size and at least
 * 50 GB, never past `max_volume_gb`, seen in the API within two samples) or, when it cannot grow,
 * stop the job with a snapshot (reason `disk`). A network volume's use is `du` against 94 % of its
 * size: Runpod's quota refuses writes before the nominal size, and `df` on a network volume does
 * not show its quota.
 *
 * {@link DiskPolicy} is pure (samples in, actions out); {@link sampleScript} is the one POSIX sh
 * command (busybox-safe) that takes a sample on the target.
 */
import { noRunDirSh, shQuote } from './job';

export const DISK_POLICY = {
  /** The first warning, in percent of the usable space. */
  warnFromPercent: 85,
  /** Then one warning per step of this many percent (85, 90, 95, 100). */
  warnStepPercent: 5,
  /** At this use the volume grows, or the job stops with a snapshot. */
  actPercent: 92,
  /** Less free space than this × the newest checkpoint: the next save would not fit. */
  checkpointFactor: 1.5,
  /** Of a network volume's nominal size, what Runpod's quota lets a pod write. */
  volumeUsable: 0.94,
  /** A growth adds this share of the volume's size… */
  growShare: 0.5,
  /** …and at least this many GB. */
  growMinGb: 50,
  /** Runpod's largest network volume (the API document's maximum `size`). */
  volumeMaxGb: 4096,
  /** A growth not seen in the API within this many samples counts as failed. */
  confirmSamples: 2,
} as const;

/** Bytes in one GB of a network volume's size (Runpod counts decimal GB). */
export const GB_BYTES = 1_000_000_000;

/** One look at the run's disk. */
export interface DiskSample {
  /** Bytes in use: `df` of the run directory's filesystem, or `du` of the network volume. */
  usedBytes: number;
  /** Bytes still free (`df`); null with a network volume, whose size comes from the API. */
  availBytes: number | null;
  /** Size of the newest `checkpoint-*` directory under the run directory; 0 when none. */
  checkpointBytes: number;
}

/** The run's network volume. */
export interface VolumeLimits {
  /** Its size in GB, as the API showed it. */
  sizeGb: number;
  /** The most it may grow to (`max_volume_gb`); null: it never grows. */
  maxGb: number | null;
}

export type DiskAction =
  /** The disk crossed a warning step (`percent`: 85, 90, 95, 100). */
  | { kind: 'warn'; percent: number; text: string }
  /** Grow the network volume to `toGb` (send the PATCH; the policy waits to see it). */
  | { kind: 'grow'; fromGb: number; toGb: number; text: string }
  /** The API shows the volume at `sizeGb` (a growth confirmed, or grown by someone else). */
  | { kind: 'grown'; sizeGb: number; text: string }
  /** Ask the job for a snapshot with reason `disk`. */
  | { kind: 'snapshot'; text: string };

/** The volume size a growth from `sizeGb` asks for, or null when it cannot grow. */
export function growthTarget(sizeGb: number, maxGb: number | null): number | null {
  if (maxGb === null) return null;
  const wanted =
    sizeGb + Math.max(Math.ceil(sizeGb * DISK_POLICY.growShare), DISK_POLICY.growMinGb);
  const toGb = Math.min(wanted, maxGb, DISK_POLICY.volumeMaxGb);
  return toGb > sizeGb ? toGb : null;
}

function mb(bytes: number): string {
  return `${(bytes / 1e6).toFixed(bytes < 1e8 ? 1 : 0)} MB`;
}

/**
 * Decides, sample by sample, what the disk of one followed run calls for. Warnings are said
 * once per step (again only after the use fell a whole step below it); a growth is asked for
 * once and then awaited; a snapshot is asked for once (see {@link snapshotFailed}).
 */
export class DiskPolicy {
  private warned = 0;
  private pending: { toGb: number; samples: number } | null = null;
  private snapshotAsked = false;
  private readonly volume: VolumeLimits | null;

  /**
   * `volume`: the run's network volume (its use is then `du` against 94 % of its size), or null
   * (the use is `df` of the run directory's filesystem). `gbBytes`: bytes per GB of its size.
   */
  constructor(
    volume: VolumeLimits | null,
    private readonly gbBytes = GB_BYTES,
  ) {
    this.volume = volume === null ? null : { ...volume };
  }

  /** The volume's size in GB as the policy knows it (null without a volume). */
  get volumeGb(): number | null {
    return this.volume?.sizeGb ?? null;
  }

  /** The size a growth waits to see in the API (look the volume up with the next sample). */
  get awaitedGb(): number | null {
    return this.pending?.toGb ?? null;
  }

  /** Whether a snapshot was asked for (nothing more is decided then, warnings aside). */
  get snapshotRequested(): boolean {
    return this.snapshotAsked;
  }

  /**
   * The actions `sample` calls for. `apiSizeGb`: the volume's size in the API now, when it was
   * looked up (while a growth is awaited), else null.
   */
  decide(sample: DiskSample, apiSizeGb: number | null = null): DiskAction[] {
    const actions: DiskAction[] = apiSizeGb === null ? [] : this.seen(apiSizeGb);
    const volume = this.volume;
    if (volume !== null) {
      if (this.pending !== null) {
        if (++this.pending.samples >= DISK_POLICY.confirmSamples) {
          const toGb = this.pending.toGb;
          this.pending = null;
          return [...actions, ...this.fail(`its growth to ${toGb} GB was not seen in the API`)];
        }
      }
    }
    const capacity =
      volume !== null
        ? volume.sizeGb * this.gbBytes * DISK_POLICY.volumeUsable
        : sample.availBytes === null
          ? 0
          : sample.usedBytes + sample.availBytes;
    if (!(capacity > 0)) return actions;
    const used = Math.max(0, sample.usedBytes);
    const percent = (used / capacity) * 100;
    const where = volume !== null ? 'network volume' : 'disk';
    const figures = `${mb(used)} of ${mb(capacity)}${volume !== null ? ` (94 % of ${volume.sizeGb} GB)` : ''}`;
    const step =
      Math.floor(percent / DISK_POLICY.warnStepPercent + 1e-9) * DISK_POLICY.warnStepPercent;
    if (this.warned > 0 && percent < this.warned - DISK_POLICY.warnStepPercent) this.warned = 0;
    if (step >= DISK_POLICY.warnFromPercent && step > this.warned) {
      this.warned = step;
      actions.push({
        kind: 'warn',
        percent: step,
        text: `the run's ${where} is ${step} % full: ${figures} used`,
      });
    }
    if (this.snapshotAsked || this.pending !== null) return actions;
    const free = capacity - used;
    let why: string | null = null;
    if (percent >= DISK_POLICY.actPercent) {
      why = `it is ${Math.floor(percent)} % full (${figures})`;
    } else if (
      sample.checkpointBytes > 0 &&
      free < DISK_POLICY.checkpointFactor * sample.checkpointBytes
    ) {
      why = `its ${mb(free)} free would not hold the next checkpoint (the last was ${mb(sample.checkpointBytes)})`;
    }
    if (why === null) return actions;
    if (volume !== null) {
      const toGb = growthTarget(volume.sizeGb, volume.maxGb);
      if (toGb !== null) {
        this.pending = { toGb, samples: 0 };
        actions.push({
          kind: 'grow',
          fromGb: volume.sizeGb,
          toGb,
          text: `the run's network volume grows from ${volume.sizeGb} to ${toGb} GB: ${why}`,
        });
        return actions;
      }
      const cannot =
        volume.maxGb === null
          ? 'max_volume_gb is not set'
          : `it is at max_volume_gb (${volume.maxGb} GB)`;
      return [...actions, ...this.fail(`${why}, and it cannot grow: ${cannot}`)];
    }
    return [...actions, ...this.fail(why)];
  }

  /**
   * The volume's size as the API shows it (looked up right after a growth's PATCH, or with a
   * sample): a larger size is taken up (`grown`: hand it on), and confirms an awaited growth
   * it reaches.
   */
  seen(apiSizeGb: number): DiskAction[] {
    const volume = this.volume;
    if (volume === null || !(apiSizeGb > volume.sizeGb)) return [];
    volume.sizeGb = apiSizeGb;
    if (this.pending !== null && apiSizeGb >= this.pending.toGb) this.pending = null;
    return [
      { kind: 'grown', sizeGb: apiSizeGb, text: `the network volume is ${apiSizeGb} GB now` },
    ];
  }

  /** The growth was refused outright (Runpod said no): stop the job with a snapshot. */
  growthRefused(reason: string): DiskAction[] {
    const toGb = this.pending?.toGb;
    this.pending = null;
    if (this.snapshotAsked) return [];
    return this.fail(
      `its growth${toGb === undefined ? '' : ` to ${toGb} GB`} was refused: ${reason}`,
    );
  }

  /** The snapshot request could not be written: ask again at the next sample that calls for it. */
  snapshotFailed(): void {
    this.snapshotAsked = false;
  }

  private fail(why: string): DiskAction[] {
    if (this.snapshotAsked) return [];
    this.snapshotAsked = true;
    const where = this.volume !== null ? 'network volume' : 'disk';
    return [
      {
        kind: 'snapshot',
        text: `the run's ${where} is about to fill: ${why}; the job is asked to save a snapshot and stop (reason disk)`,
      },
    ];
  }
}

/**
 * The sh that takes one sample, one line: `used <KiB> avail <KiB|-> checkpoint <KiB>`. Without a
 * volume: `df -Pk` of the run directory; with one: `du -sk` of `volumeDir` (its quota counts
 * every file on it). The newest `checkpoint-*` directory (by mtime) anywhere under the run
 * directory is measured with `du -sk`. POSIX sh, dash and busybox. The followed job's watcher
 * runs it every `diskPollMs` (once a second at the tests' 1/60), so the fields are taken by the
 * shell, not by an `awk` behind a pipe: `df` or `du` and `find` are its only processes.
 */
export function sampleScript(runDir: string, volumeDir: string | null): string {
  const lines = [
    `cd ${shQuote(runDir)} 2>/dev/null || { ${noRunDirSh(runDir)}; exit 93; }`,
    "nl='\n'",
    'set -f',
    // `first_of TEXT`: the first field of TEXT's last line (awk's `END { print $1 }`).
    'first_of() { l=${1##*"$nl"}; set -- $l; printf \'%s\\n\' "$1"; }',
  ];
  if (volumeDir === null) {
    lines.push(
      // -P: one line per filesystem, however long its name; its fields 3 and 4 of line 2.
      'out=$(df -Pk . 2>/dev/null); l=',
      'case $out in *"$nl"*) l=${out#*"$nl"}; l=${l%%"$nl"*} ;; esac',
      'set -- $l',
      '[ -n "$4" ] || { echo "overbrainer: df gave nothing for the run directory" >&2; exit 94; }',
      'used=$3; avail=$4',
    );
  } else {
    lines.push(
      `used=$(first_of "$(du -sk ${shQuote(volumeDir)} 2>/dev/null)")`,
      '[ -n "$used" ] || { echo "overbrainer: du gave nothing for the volume" >&2; exit 94; }',
      'avail=-',
    );
  }
  lines.push(
    // A read loop: names with spaces stay whole.
    "ckpt=$(find . -type d -name 'checkpoint-*' -prune 2>/dev/null | {",
    '  newest=',
    '  while IFS= read -r d; do',
    '    if [ -z "$newest" ] || [ "$d" -nt "$newest" ]; then newest=$d; fi',
    '  done',
    '  if [ -n "$newest" ]; then first_of "$(du -sk "$newest" 2>/dev/null)"; fi',
    '})',
    'printf \'used %s avail %s checkpoint %s\\n\' "$used" "$avail" "${ckpt:-0}"',
  );
  return lines.join('\n');
}

/** Reads the sampler's line; null when it is not one. */
export function parseSample(text: string): DiskSample | null {
  const m = /^used (\d+) avail (\d+|-) checkpoint (\d+)\s*$/m.exec(text);
  if (m === null) return null;
  return {
    usedBytes: Number(m[1]) * 1024,
    availBytes: m[2] === '-' ? null : Number(m[2]) * 1024,
    checkpointBytes: Number(m[3]) * 1024,
  };
}
