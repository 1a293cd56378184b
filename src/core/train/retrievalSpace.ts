/**
 * Results cannot fill the user's disk: a job can make a sparse file of terabytes on the pod for
 * free. Before a retrieval downloads anything, the total the pod listed is compared with the
 * limit (`max_retrieve_gb`) and with the free space of the local disk (which a retrieval leaves
 * {@link RETRIEVE_FREE_RESERVE_BYTES} of); while it downloads, the bytes on disk are compared
 * again (the files may grow after the listing, a pod may lie about their sizes). Over either:
 * {@link RetrieveSpaceError}, and the retrieval keeps nothing of it.
 */
import { statfs as fsStatfs } from 'node:fs/promises';
import { DEFAULT_MAX_RETRIEVE_GB } from '../config/types';
import { HintedError } from '../errors';

/** `max_retrieve_gb` counts GB of 10^9 bytes. */
export const BYTES_PER_GB = 1e9;
/** Free space a retrieval leaves on the local disk at least (1 GB). */
export const RETRIEVE_FREE_RESERVE_BYTES = BYTES_PER_GB;

/** What {@link SpaceGuard} reads of `fs.statfs` (injected in tests). */
export interface DiskSpace {
  /** Blocks free for an unprivileged user. */
  bavail: number | bigint;
  /** Bytes per block. */
  bsize: number | bigint;
}
export type StatFs = (path: string) => Promise<DiskSpace>;

export type RetrieveSpaceKind = 'over_limit' | 'disk_full';

/** The results are over the limit or the free space: nothing of them was kept. */
export class RetrieveSpaceError extends HintedError<RetrieveSpaceKind> {
  constructor(
    kind: RetrieveSpaceKind,
    message: string,
    /** Bytes the pod listed (before) or on disk when it stopped (during). */
    readonly bytes: number,
    readonly maxRetrieveGb: number,
    /** Free bytes on the local disk; null when it could not be read. */
    readonly freeBytes: number | null,
  ) {
    super(
      kind,
      message,
      kind === 'over_limit'
        ? "Raise max_retrieve_gb on the target, or narrow [training] artifacts, then retrieve again (`overbrainer train attach` with the run's ID) before the pod's retrieve grace ends."
        : "Free space on this disk, then retrieve again (`overbrainer train attach` with the run's ID) before the pod's retrieve grace ends.",
    );
    this.name = 'RetrieveSpaceError';
  }
}

/** `0.07`, `12.5`, `2000`: GB (10^9 bytes) for a message, as precise as its size needs. */
export function formatGb(bytes: number): string {
  const gb = bytes / BYTES_PER_GB;
  return gb < 10 ? gb.toFixed(2) : gb < 100 ? gb.toFixed(1) : String(Math.round(gb));
}

/** Free bytes on the disk holding `dir`, or null when this platform cannot say. */
export async function freeBytesAt(dir: string, statfs: StatFs = fsStatfs): Promise<number | null> {
  try {
    const space = await statfs(dir);
    return Number(space.bavail) * Number(space.bsize);
  } catch {
    return null;
  }
}

/**
 * One retrieval's space: checked once the pod listed its files ({@link before}), then as bytes
 * land ({@link during}).
 */
export class SpaceGuard {
  private readonly maxBytes: number;
  private freeAtStart: number | null = null;
  private onDiskAtStart = 0;
  private dir = '';

  constructor(
    readonly maxRetrieveGb: number = DEFAULT_MAX_RETRIEVE_GB,
    private readonly statfs: StatFs = fsStatfs,
  ) {
    this.maxBytes = maxRetrieveGb * BYTES_PER_GB;
  }

  /**
   * Before downloading: `listedBytes` the total the pod listed for `files` files (null when it
   * could not tell: then only {@link during} guards), `onDiskBytes` those already staged here.
   * Throws {@link RetrieveSpaceError}.
   */
  async before(
    dir: string,
    listedBytes: number | null,
    files: number,
    onDiskBytes: number,
  ): Promise<void> {
    this.dir = dir;
    this.onDiskAtStart = onDiskBytes;
    this.freeAtStart = await freeBytesAt(dir, this.statfs);
    if (listedBytes === null) return;
    const what = `the results on the pod are ${formatGb(listedBytes)} GB in ${files} file(s)`;
    if (listedBytes > this.maxBytes) {
      throw this.error(
        'over_limit',
        `${what}, over max_retrieve_gb = ${this.maxRetrieveGb}: nothing was downloaded`,
        listedBytes,
      );
    }
    const toFetch = Math.max(0, listedBytes - onDiskBytes);
    const room = this.room();
    if (room !== null && toFetch > room) {
      throw this.error(
        'disk_full',
        `${what}, ${formatGb(toFetch)} GB to download, but the disk holding ${dir} has ` +
          `${formatGb(this.freeAtStart!)} GB free (a retrieval leaves ${formatGb(RETRIEVE_FREE_RESERVE_BYTES)} GB): ` +
          `nothing was downloaded`,
        listedBytes,
      );
    }
  }

  /** While downloading, with `onDiskBytes` staged so far: the error to stop with, or null. */
  during(onDiskBytes: number): RetrieveSpaceError | null {
    if (onDiskBytes > this.maxBytes) {
      return this.error(
        'over_limit',
        `the results on the pod grew past max_retrieve_gb = ${this.maxRetrieveGb} while they ` +
          `downloaded (${formatGb(onDiskBytes)} GB so far): the download was stopped and nothing of it kept`,
        onDiskBytes,
      );
    }
    const room = this.room();
    if (room !== null && onDiskBytes - this.onDiskAtStart > room) {
      return this.error(
        'disk_full',
        `the results on the pod would leave less than ${formatGb(RETRIEVE_FREE_RESERVE_BYTES)} GB ` +
          `free on the disk holding ${this.dir} (${formatGb(onDiskBytes)} GB downloaded): the ` +
          `download was stopped and nothing of it kept`,
        onDiskBytes,
      );
    }
    return null;
  }

  /** Bytes this retrieval may still write on the local disk; null when unknown. */
  private room(): number | null {
    return this.freeAtStart === null
      ? null
      : Math.max(0, this.freeAtStart - RETRIEVE_FREE_RESERVE_BYTES);
  }

  private error(kind: RetrieveSpaceKind, message: string, bytes: number): RetrieveSpaceError {
    return new RetrieveSpaceError(kind, message, bytes, this.maxRetrieveGb, this.freeAtStart);
  }
}
