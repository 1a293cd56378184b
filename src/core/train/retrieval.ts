/**
 * Verified retrieval of a run's results. The pod lists and hashes
 * its files (a NUL-framed SHA-256 manifest made by a POSIX sh script), the
 * list is checked before anything is written (a hostile list — `..`,
 * absolute paths, duplicates, names outside the requested entries — is
 * refused as a whole), every file is downloaded into a staging directory
 * inside the run directory while it is hashed, and only when every file
 * matches its manifest hash are the files moved into place. Nothing is ever
 * written through a symlink, and nothing outside the local run directory.
 * Names are checked with the path rules of exec/pathRules.ts (what Windows
 * reads differently is refused on every platform), and nothing is downloaded
 * when the listed total is over `max_retrieve_gb` or the local disk's free
 * space (./retrievalSpace.ts).
 * A dropped connection resumes: finished files are re-hashed locally and
 * kept, a partial file continues where it stopped. A file still being written
 * while it is retrieved is never taken, even when the hash and the download
 * happened to read the same bytes: the pod marks when hashing starts and says
 * at the end which files changed since (`find -newer`).
 */
import { mkdir, rm } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { systemClock, type Clock } from '../clock';
import { ExecError, type DownloadedFile, type ExecResult, type Executor } from '../exec/executor';
import {
  ManifestError,
  MANIFEST_MAX_BYTES,
  MANIFEST_MAX_PATH_BYTES,
  normalizeEntries,
  parseListing,
  parseManifest,
  RetrievalError,
  STAGING_DIR,
  type ManifestEntry,
} from './manifest';
import { ensureOwnDir, moveInto, reuseStaged } from './retrievalStaging';
import { type Mismatch, verifyStaged } from './retrievalVerify';
import { RetrieveSpaceError, SpaceGuard, type StatFs } from './retrievalSpace';
import {
  changedScript,
  EXIT_NO_MARKER,
  listingScript,
  manifestScript,
  scriptOutput,
  splitSizes,
} from './retrievalScripts';

export {
  MANIFEST_MAX_BYTES,
  MANIFEST_MAX_ENTRIES,
  MANIFEST_MAX_NAME_BYTES,
  MANIFEST_MAX_PATH_BYTES,
  ManifestError,
  normalizeEntry,
  parseListing,
  parseManifest,
  RetrievalError,
  STAGING_DIR,
  type ManifestEntry,
  type ManifestErrorKind,
  type ParseManifestOptions,
  type RetrievalErrorKind,
} from './manifest';
export { changedScript, listingScript, manifestScript } from './retrievalScripts';
export { describeMismatches, type Mismatch } from './retrievalVerify';
export { RetrieveSpaceError, type StatFs } from './retrievalSpace';

export interface RetrieveProgress {
  /**
   * `checking`: an earlier call's staged files hashed again; `verifying`: every file is here, the
   * pod's manifest (its hashes) awaited and compared.
   */
  phase: 'listing' | 'checking' | 'downloading' | 'verifying' | 'moving';
  filesDone: number;
  filesTotal: number;
  /** Bytes of finished and partially downloaded files on disk so far. */
  bytesDone: number;
  /**
   * Bytes of all the files listed (their sizes come with the listing, in its request, when
   * `onProgress` is given); null when the pod could not tell.
   */
  bytesTotal?: number | null;
  file?: string;
}

export interface RetrieveOptions {
  executor: Executor;
  remoteRunDir: string;
  localRunDir: string;
  /** What comes back (`output/`, `metrics.jsonl`, `job.log`). */
  entries: readonly string[];
  /**
   * Names left out at any depth (`checkpoint-*`); one starting with `!` is a path brought back
   * all the same (`!output/checkpoint-12`, a stopped run's snapshot).
   */
  excludes?: readonly string[];
  signal?: AbortSignal;
  onProgress?: (progress: RetrieveProgress) => void;
  clock?: Clock;
  /** Tries in all when the connection drops (each resumes the last). Default 3. */
  attempts?: number;
  /** Wait between those tries. Default 1 s. */
  retryDelayMs?: number;
  /** Least time between two download progress reports. Default 100 ms. */
  progressIntervalMs?: number;
  /**
   * Most this retrieval brings home, GB (10^9 bytes); default 200 (`max_retrieve_gb`).
   * More, or more than the local disk's free space, throws {@link RetrieveSpaceError}.
   */
  maxRetrieveGb?: number;
  /** The local disk's free space (default `fs.statfs`; tests inject one). */
  statfs?: StatFs;
}

export interface RetrieveResult {
  /** Every listed file is in place and matched its SHA-256. */
  verified: boolean;
  /** Files the pod listed. */
  files: number;
  /** Their total size as downloaded. */
  bytes: number;
  /** Bytes that came over the wire in this call. */
  transferredBytes: number;
  /** Bytes reused from an earlier, interrupted call (staged files and partials). */
  reusedBytes: number;
  mismatches: Mismatch[];
  manifest: ManifestEntry[];
}

/**
 * Lists the files on the pod and downloads them at once, while the pod hashes
 * them (the manifest); then checks each file's SHA-256 (computed locally as
 * it was written) against the manifest, and moves the files into
 * `localRunDir` only when every one matched. Not verified → nothing moved,
 * the verified files stay staged for the next call. A refused list stops
 * everything and removes the staging directory. Throws
 * {@link ManifestError} (a hostile list), {@link RetrievalError} or ExecError.
 */
export async function retrieve(options: RetrieveOptions): Promise<RetrieveResult> {
  return new Retrieval(options).run();
}

/** One call of {@link retrieve}, in its steps. */
class Retrieval {
  private readonly clock: Clock;
  private readonly attempts: number;
  private readonly excludes: readonly string[];
  private readonly entries: string[];
  private readonly stop = new AbortController();
  private readonly signal: AbortSignal;
  /** Made on the pod before it hashes anything; see changedScript. */
  private readonly marker = randomBytes(8).toString('hex');
  private readonly staging: string;
  /** Finished files wait here, partial ones in partDir. */
  private readonly doneDir: string;
  private readonly partDir: string;
  /** The files on disk in doneDir (this call's and verified-staged ones), by path. */
  private readonly local = new Map<string, DownloadedFile>();
  // Download progress: finished bytes, bytes of files in flight, files in all.
  private settledBytes = 0;
  private readonly inFlight = new Map<string, number>();
  private filesTotal = 0;
  private bytesTotal: number | null = null;
  private lastReportMs = -Infinity;
  private readonly space: SpaceGuard;
  /** Set when the download went past the limit or the free space (it is stopped then). */
  private overSpace: RetrieveSpaceError | null = null;

  constructor(private readonly options: RetrieveOptions) {
    this.clock = options.clock ?? systemClock;
    this.attempts = Math.max(1, options.attempts ?? 3);
    this.excludes = options.excludes ?? [];
    this.entries = normalizeEntries(options.entries);
    this.signal = options.signal
      ? AbortSignal.any([options.signal, this.stop.signal])
      : this.stop.signal;
    this.staging = join(options.localRunDir, STAGING_DIR);
    this.doneDir = join(this.staging, 'files');
    this.partDir = join(this.staging, 'partial');
    this.space = new SpaceGuard(options.maxRetrieveGb, options.statfs);
  }

  async run(): Promise<RetrieveResult> {
    try {
      return await this.steps();
    } catch (error) {
      // Over the limit or the free space: nothing of it is kept, partial files included.
      if (error instanceof RetrieveSpaceError) {
        this.stop.abort();
        await rm(this.staging, { recursive: true, force: true });
      }
      throw error;
    }
  }

  private async steps(): Promise<RetrieveResult> {
    this.options.onProgress?.({ phase: 'listing', filesDone: 0, filesTotal: 0, bytesDone: 0 });
    // The pod hashes while the files already travel; a refused manifest stops the transfer.
    const manifestDone = this.hashOnPod();
    const listed = await this.listOnPod(manifestDone);
    await this.prepareStaging(listed);
    const listedSet = new Set(listed);
    const staged = await reuseStaged(this.doneDir, this.partDir, listedSet, (p) =>
      this.options.onProgress?.({ phase: 'checking', bytesDone: 0, ...p }),
    );
    for (const [path, file] of staged) {
      this.local.set(path, file);
      if (!file.missing) this.settledBytes += file.bytes;
    }
    this.filesTotal = listed.length;
    // Nothing is downloaded when the listed total is over the limit or the free space.
    const { localRunDir } = this.options;
    await this.space.before(localRunDir, this.bytesTotal, listed.length, this.settledBytes);
    this.report(undefined, true);

    let downloadError: unknown;
    await this.downloadAll(listed).catch((error: unknown) => (downloadError = error));
    if (downloadError instanceof RetrieveSpaceError) throw downloadError;
    if (!downloadError) this.report(undefined, true, 'verifying');
    const manifest = await this.distrusting(manifestDone);
    if (downloadError) throw downloadError;
    const expected = new Map(manifest.map((entry) => [entry.path, entry.sha256]));
    await this.fetchLate(manifest, expected, listedSet, new Set(staged.keys()));
    // Files written on the pod since hashing began: still being written, so whatever bytes
    // were read (the hash and the download can read the same torn bytes), none is taken.
    const changed = await this.distrusting(this.changedOnPod());

    const verdict = await verifyStaged(this.local, this.doneDir, manifest, expected, changed);
    const verified = verdict.mismatches.length === 0;
    if (verified) await this.moveIntoPlace(manifest, verdict.bytes);
    return { verified, files: manifest.length, ...verdict, manifest };
  }

  // ---- on the pod ------------------------------------------------------------------------

  /** `action`, tried again (up to `attempts` in all) when the connection drops. */
  private async withRetries<T>(action: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await action();
      } catch (error) {
        if (
          !(error instanceof ExecError && error.kind === 'connection') ||
          attempt >= this.attempts
        ) {
          throw error;
        }
        await this.clock.sleep(this.options.retryDelayMs ?? 1_000, this.signal);
      }
    }
  }

  private execScript(script: string, onTry?: () => void): Promise<ExecResult> {
    return this.withRetries(() => {
      onTry?.();
      return this.options.executor.exec(script, {
        signal: this.signal,
        maxOutputBytes: MANIFEST_MAX_BYTES,
      });
    });
  }

  /** The manifest the pod computes (it makes the change marker first); a failure stops all. */
  private hashOnPod(): Promise<ManifestEntry[]> {
    const { remoteRunDir } = this.options;
    const done = this.execScript(
      manifestScript(remoteRunDir, this.entries, this.excludes, this.marker),
    ).then((result) =>
      parseManifest(scriptOutput(result, this.options.remoteRunDir, 'hashing'), {
        entries: this.entries,
        excludes: this.excludes,
      }),
    );
    done.catch(() => this.stop.abort());
    return done;
  }

  /** The pod's listing, at once (the manifest's error when it failed first). */
  private async listOnPod(manifestDone: Promise<ManifestEntry[]>): Promise<string[]> {
    const { remoteRunDir } = this.options;
    try {
      // The files' sizes come in the same request: the total checked against the limit and
      // the free space before anything is downloaded, and the progress's total.
      const result = await this.execScript(
        listingScript(remoteRunDir, this.entries, this.excludes, true),
      );
      const split = splitSizes(scriptOutput(result, this.options.remoteRunDir, 'listing'));
      this.bytesTotal = split.sizes?.bytes ?? null;
      return parseListing(split.listing, { entries: this.entries, excludes: this.excludes });
    } catch (error) {
      this.stop.abort();
      const manifestError = await manifestDone.then(
        () => undefined,
        (caught: unknown) => caught,
      );
      // Stopped because the manifest failed first: its error is the one that explains.
      const ours =
        error instanceof ExecError && error.kind === 'aborted' && !this.options.signal?.aborted;
      throw ours && manifestError ? manifestError : error;
    }
  }

  /** Files the pod says were written since the marker; none when it could not make one. */
  private async changedOnPod(): Promise<Set<string>> {
    let tries = 0;
    const result = await this.execScript(
      changedScript(this.options.remoteRunDir, this.entries, this.excludes, this.marker),
      () => tries++,
    );
    if (result.code === EXIT_NO_MARKER) {
      // A try that ran removed the marker: a later try that finds none cannot tell.
      if (tries > 1) {
        throw new RetrievalError(
          'manifest_failed',
          'the connection dropped while checking whether the results changed during the retrieval; retry the retrieval',
        );
      }
      return new Set();
    }
    const out = scriptOutput(result, this.options.remoteRunDir, 'checking for changes in');
    return new Set(parseListing(out, { entries: this.entries, excludes: this.excludes }));
  }

  /** `promise`; when it says the pod's list is hostile, nothing the pod sent is kept. */
  private async distrusting<T>(promise: Promise<T>): Promise<T> {
    try {
      return await promise;
    } catch (error) {
      if (error instanceof ManifestError) {
        await rm(this.staging, { recursive: true, force: true });
      }
      throw error;
    }
  }

  // ---- local staging ---------------------------------------------------------------------

  private checkLength(path: string): void {
    if (Buffer.byteLength(join(this.doneDir, path)) > MANIFEST_MAX_PATH_BYTES) {
      throw new ManifestError('too_long', `./${path}`, 'would make a local path that is too long');
    }
  }

  private async prepareStaging(listed: readonly string[]): Promise<void> {
    await mkdir(this.options.localRunDir, { recursive: true });
    await ensureOwnDir(this.staging);
    listed.forEach((path) => this.checkLength(path));
  }

  // ---- download --------------------------------------------------------------------------

  private report(
    file: string | undefined,
    force: boolean,
    phase: 'downloading' | 'verifying' = 'downloading',
  ): void {
    if (!this.options.onProgress) return;
    const now = this.clock.nowMs();
    if (!force && now - this.lastReportMs < (this.options.progressIntervalMs ?? 100)) return;
    this.lastReportMs = now;
    let partial = 0;
    for (const value of this.inFlight.values()) partial += value;
    this.options.onProgress({
      phase,
      filesDone: this.local.size,
      filesTotal: this.filesTotal,
      bytesDone: this.settledBytes + partial,
      bytesTotal: this.bytesTotal,
      file,
    });
  }

  /** Downloads the files not yet on disk into the staging dir, hashing them as they land. */
  private downloadAll(files: readonly string[]): Promise<void> {
    return this.withRetries(async () => {
      const todo = files.filter((path) => !this.local.has(path));
      if (todo.length === 0) return;
      await this.options.executor.download(this.options.remoteRunDir, this.doneDir, todo, {
        signal: this.signal,
        partDir: this.partDir,
        onProgress: (p) => {
          this.inFlight.set(p.file, p.bytesDone);
          this.guardSpace();
          this.report(p.file, false);
        },
        onFile: (done) => {
          this.inFlight.delete(done.file);
          this.local.set(done.file, done);
          if (!done.missing) this.settledBytes += done.bytes;
          this.guardSpace();
          this.report(done.file, true);
        },
      });
    }).catch((error: unknown) => {
      throw this.overSpace ?? error;
    });
  }

  /** Bytes on disk past the limit or the free space (files grew, sizes lied): stops the download. */
  private guardSpace(): void {
    if (this.overSpace !== null) return;
    let partial = 0;
    for (const value of this.inFlight.values()) partial += value;
    this.overSpace = this.space.during(this.settledBytes + partial);
    if (this.overSpace !== null) this.stop.abort(this.overSpace);
  }

  /**
   * Files that appeared between the listing and the hashing, and files staged by an earlier
   * call that no longer match (the pod's copy changed since): fetched now.
   */
  private async fetchLate(
    manifest: readonly ManifestEntry[],
    expected: ReadonlyMap<string, string>,
    listed: ReadonlySet<string>,
    staged: ReadonlySet<string>,
  ): Promise<void> {
    const late = manifest.map((entry) => entry.path).filter((path) => !listed.has(path));
    for (const path of staged) {
      const file = this.local.get(path);
      if (file && !file.missing && expected.has(path) && file.sha256 !== expected.get(path)) {
        this.local.delete(path);
        this.settledBytes -= file.bytes;
        await rm(join(this.doneDir, path), { force: true });
        late.push(path);
      }
    }
    if (late.length === 0) return;
    late.forEach((path) => this.checkLength(path));
    this.filesTotal = listed.size + late.filter((path) => !listed.has(path)).length;
    await this.downloadAll(late);
  }

  /** Every file verified: moved into the run directory, the staging dir removed. */
  private async moveIntoPlace(manifest: readonly ManifestEntry[], bytes: number): Promise<void> {
    this.options.onProgress?.({
      phase: 'moving',
      filesDone: manifest.length,
      filesTotal: manifest.length,
      bytesDone: bytes,
    });
    if (manifest.length > 0) await moveInto(this.doneDir, this.options.localRunDir);
    await rm(this.staging, { recursive: true, force: true });
  }
}
