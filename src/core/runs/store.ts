/**
 * The workspace's `runs/` directory: one folder per run with its run.json,
 * pod.json, ssh/ and lock. Every method validates the run ID first, so no
 * caller can read or write outside runs/. Record I/O is synchronous on
 * purpose: the files are small, and a save must be on disk before the
 * network call it guards is sent.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { rfc3339, type Clock } from '../clock';
import { writeFileAtomicSync } from './atomic';
import { RECORD_MAX_BYTES } from './codec';
import { ioError, isRunsError, RunsError } from './runsError';
import { isValidRunId, runIdCandidate, validateRunId } from './ids';
import {
  acquireLock,
  DEFAULT_LOCK_TIMING,
  inspectLock,
  LOCK_FILE,
  TAKEOVER_FILE,
  type LockHolder,
  type LockTiming,
  type RunLock,
} from './lock';
import { decodePodRecord, encodePodRecord } from './podJson';
import { POD_FILE, type PodRecord } from './podRecord';
import { decodeRunRecord, encodeRunRecord, RUN_FILE, type RunRecord } from './runRecord';

/** The run's SSH files (keys, config, known_hosts), mode 700. */
export const SSH_DIR = 'ssh';

/** The local copy of the pod's logs. */
export const POD_LOG_DIR = '.pod';

/** Checkpoints streamed home while the job runs (src/core/pod/checkpointStream.ts). */
export const CHECKPOINTS_DIR = 'checkpoints';

/** Where each node of a cluster run keeps its own files in the run folder: `nodes/<rank>/job.log`. */
export const NODES_DIR = 'nodes';

/**
 * Top-level names of a run directory that never leave this machine: the
 * upload to a target skips them (keys, records, lock), as do atomic-write
 * temporaries (see `isAtomicTemp`).
 */
export const LOCAL_ONLY: readonly string[] = Object.freeze([
  SSH_DIR,
  POD_FILE,
  RUN_FILE,
  POD_LOG_DIR,
  LOCK_FILE,
  TAKEOVER_FILE,
  CHECKPOINTS_DIR,
  NODES_DIR,
]);

/** A run skipped by {@link RunStore.list}, and why. */
export interface RunsWarning {
  runId: string;
  message: string;
  error: RunsError;
}

export interface CreateRunOptions {
  /** The project name; run IDs start with its slug. */
  project: string;
  /** The target's name in overbrainer.toml. */
  target: string;
  /** The run directory on the target, for the new ID (e.g. `<workdir>/<id>`). */
  remoteDir: (runId: string) => string;
  /** The cost cap `[budget]`'s gate gave the run (run.json `budget_cap_usd`). */
  budgetCapUsd?: number | null;
}

/** The project's budget lock, beside the run directories (a file: listings skip it). */
export const BUDGET_LOCK_FILE = '.budget.lock';

/** How many same-second IDs (`_2`, `_3`…) are tried before giving up. */
const MAX_SAME_SECOND = 1000;

export class RunStore {
  private readonly lockTiming: LockTiming;

  constructor(
    /** The runs/ directory (created on the first run). */
    readonly runsDir: string,
    private readonly clock: Clock,
    options: { lock?: Partial<LockTiming> } = {},
  ) {
    this.lockTiming = { ...DEFAULT_LOCK_TIMING, ...options.lock };
  }

  /** The local directory of run `id`; throws `invalid_id` for an ID that would leave runs/. */
  runDir(id: string): string {
    return path.join(this.runsDir, validateRunId(id));
  }

  /**
   * Creates a new run: its ID (`<slug>_<YYYYMMDD-HHMMSS>`, then `_2`… when
   * that second is taken, claimed by an exclusive mkdir so two processes never
   * get the same one) and its run.json in state `preparing`.
   */
  create(options: CreateRunOptions): RunRecord {
    try {
      fs.mkdirSync(this.runsDir, { recursive: true });
    } catch (error) {
      throw ioError(this.runsDir, error, 'create');
    }
    const nowMs = this.clock.nowMs();
    for (let n = 1; n <= MAX_SAME_SECOND; n++) {
      const id = runIdCandidate(options.project, nowMs, n);
      const dir = this.runDir(id);
      try {
        fs.mkdirSync(dir);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') continue;
        throw ioError(dir, error, 'create');
      }
      const record: RunRecord = {
        id,
        target: options.target,
        created: rfc3339(nowMs),
        remoteDir: options.remoteDir(id),
        job: null,
        state: 'preparing',
        message: null,
      };
      if (options.budgetCapUsd !== undefined && options.budgetCapUsd !== null)
        record.budgetCapUsd = options.budgetCapUsd;
      this.saveRun(record);
      return record;
    }
    throw new RunsError(
      'io',
      `no free run ID for this second in ${this.runsDir}`,
      'Wait a second and start the run again.',
      { path: this.runsDir },
    );
  }

  /** Writes run.json atomically (mode 0600), creating the run directory if needed. */
  saveRun(record: RunRecord): void {
    const dir = this.ensureRunDir(record.id);
    writeFileAtomicSync(dir, RUN_FILE, encodeRunRecord(record));
  }

  /** The run's record; `not_found` when the run has none, `invalid` when it is damaged. */
  loadRun(id: string): RunRecord {
    const file = path.join(this.runDir(id), RUN_FILE);
    const text = this.readRecord(file);
    if (text === null) {
      throw new RunsError(
        'not_found',
        `no run ${id} in ${this.runsDir}`,
        'Pick a run from "runs ls" or the Runs view.',
        {
          path: file,
        },
      );
    }
    const record = decodeRunRecord(text, file);
    if (record.id !== id) {
      // A copied folder: saving it would write under the other run's name.
      throw new RunsError(
        'invalid',
        `${file} is the record of another run (line 1, column 1)`,
        'Rename the folder back to its run ID, or remove the copy.',
        { path: file, line: 1, column: 1 },
      );
    }
    return record;
  }

  /**
   * Every run with a readable record, newest first. Folders without run.json
   * (a run being created) are skipped silently; damaged records are skipped
   * with a warning, and nothing is changed on disk.
   */
  list(): { runs: RunRecord[]; warnings: RunsWarning[] } {
    let names: string[];
    try {
      names = fs
        .readdirSync(this.runsDir, { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .map((entry) => entry.name);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { runs: [], warnings: [] };
      throw ioError(this.runsDir, error, 'read');
    }
    const runs: RunRecord[] = [];
    const warnings: RunsWarning[] = [];
    for (const name of names) {
      if (!isValidRunId(name)) continue;
      try {
        runs.push(this.loadRun(name));
      } catch (error) {
        if (isRunsError(error, 'not_found')) continue;
        if (!isRunsError(error)) throw error;
        warnings.push({
          runId: name,
          message: `skipping run ${name}: ${error.message}`,
          error,
        });
      }
    }
    runs.sort((a, b) =>
      a.created === b.created ? compareIds(b.id, a.id) : a.created < b.created ? 1 : -1,
    );
    warnings.sort((a, b) => compareIds(b.runId, a.runId));
    return { runs, warnings };
  }

  /** Writes pod.json atomically (mode 0600), creating the run directory if needed. */
  savePod(record: PodRecord): void {
    const dir = this.ensureRunDir(record.runId);
    writeFileAtomicSync(dir, POD_FILE, encodePodRecord(record));
  }

  /** The run's pod record, null when it has none (no pod was ever asked for). */
  loadPod(id: string): PodRecord | null {
    const file = path.join(this.runDir(id), POD_FILE);
    const text = this.readRecord(file);
    if (text === null) return null;
    const record = decodePodRecord(text, file);
    if (record.runId !== id) {
      throw new RunsError(
        'invalid',
        `${file} is the pod record of another run (line 1, column 1)`,
        'Rename the folder back to its run ID, or remove the copy.',
        { path: file, line: 1, column: 1 },
      );
    }
    return record;
  }

  /** The run's ssh/ directory, created with mode 700 (and set to 700 if it existed). */
  sshDir(id: string): string {
    const dir = path.join(this.ensureRunDir(id), SSH_DIR);
    try {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      fs.chmodSync(dir, 0o700); // mkdir's mode is masked by the umask
    } catch (error) {
      throw ioError(dir, error, 'create');
    }
    return dir;
  }

  /**
   * Takes the run's lock for `owner` (e.g. "VS Code window 4711", "overbrainer
   * CLI"), or returns null when another live process holds it. `not_found`
   * when the run does not exist.
   */
  lock(id: string, owner: string): RunLock | null {
    const dir = this.runDir(id);
    if (!fs.existsSync(dir)) {
      throw new RunsError(
        'not_found',
        `no run ${id} in ${this.runsDir}`,
        'Pick a run from "runs ls" or the Runs view.',
        {
          path: dir,
        },
      );
    }
    return acquireLock(path.join(dir, LOCK_FILE), id, owner, this.clock, this.lockTiming);
  }

  /**
   * Takes the project's budget lock for `owner` (null while another live process holds it): held
   * from reading the spend to recording the new run's cap, so two trains started at once never
   * both count the same dollars as left.
   */
  lockBudget(owner: string): RunLock | null {
    try {
      fs.mkdirSync(this.runsDir, { recursive: true });
    } catch (error) {
      throw ioError(this.runsDir, error, 'create');
    }
    return acquireLock(
      path.join(this.runsDir, BUDGET_LOCK_FILE),
      'budget',
      owner,
      this.clock,
      this.lockTiming,
    );
  }

  /** Who holds the budget lock, in words ("pid 4711, VS Code window"), or null when nobody. */
  budgetLockHolder(): string | null {
    const holder = inspectLock(
      path.join(this.runsDir, BUDGET_LOCK_FILE),
      this.clock,
      this.lockTiming,
    );
    if (holder === null) return null;
    return `pid ${holder.pid ?? '?'}${holder.owner ? `, ${holder.owner}` : ''}`;
  }

  /** Who holds the run's lock (null when nobody), for messages such as "followed by pid 4711 (VS Code)". */
  lockHolder(id: string): LockHolder | null {
    return inspectLock(path.join(this.runDir(id), LOCK_FILE), this.clock, this.lockTiming);
  }

  private ensureRunDir(id: string): string {
    const dir = this.runDir(id);
    try {
      fs.mkdirSync(dir, { recursive: true });
    } catch (error) {
      throw ioError(dir, error, 'create');
    }
    return dir;
  }

  /** The text of a record file, null when it does not exist. */
  private readRecord(file: string): string | null {
    try {
      const stat = fs.statSync(file);
      if (!stat.isFile() || stat.size > RECORD_MAX_BYTES) {
        throw new RunsError(
          'invalid',
          `${file} is not a valid ${path.basename(file) === POD_FILE ? 'pod record' : 'run record'} (line 1, column 1): it is not a small regular file`,
          'Remove or restore it.',
          { path: file, line: 1, column: 1 },
        );
      }
      return fs.readFileSync(file, 'utf8');
    } catch (error) {
      if (isRunsError(error)) throw error;
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw ioError(file, error, 'read');
    }
  }
}

/** Orders IDs with their `_N` suffix numerically (`x_10` after `x_9`). */
function compareIds(a: string, b: string): number {
  const split = (id: string): [string, number] => {
    const match = /^(.*\d{8}-\d{6})_(\d+)$/.exec(id);
    return match ? [match[1] ?? id, Number(match[2])] : [id, 1];
  };
  const [baseA, nA] = split(a);
  const [baseB, nB] = split(b);
  if (baseA !== baseB) return baseA < baseB ? -1 : 1;
  return nA - nB;
}

/**
 * Whether pod.json shows no pod of the run that may still exist: no pod, or
 * one confirmed deleted, and no stray. A pod.json that
 * cannot be read shows nothing for sure (false, with `onWarning`); none at
 * all means no pod was ever asked for (true).
 */
export function noPodLeft(
  store: RunStore,
  runId: string,
  onWarning?: (message: string) => void,
): boolean {
  let record: PodRecord | null;
  try {
    record = store.loadPod(runId);
  } catch (error) {
    onWarning?.(`cannot read the pod record of run ${runId}: ${(error as Error).message}`);
    return false;
  }
  if (record === null) return true;
  return !record.mayHaveOtherPods() && (record.podId === null || record.state === 'deleted');
}
