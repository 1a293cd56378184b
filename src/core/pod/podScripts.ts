/**
 * The pod's own programs: the bootstrap (the pod's `cmd`) and the watchdog it installs and
 * execs, plus the create call's env that drives them. The scripts are files beside
 * this module (`scripts/bootstrap.sh`, `scripts/watchdog.sh`), read once: under tsx from
 * src/core/pod/scripts/, from the bundle from dist/scripts/ (the build copies them there).
 *
 * The file names and markers below are the contract between the client and the watchdog:
 * the client writes the lease, the retrieved marker and the keep marker in the run dir on the
 * pod; the watchdog writes its verdict and its log there.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { HintedError } from '../errors';

import type { Timing } from '../timing';

/** The client's lease, in the run dir on the pod: its mtime holds `max_hours` off. */
export const LEASE_FILE = '.pod/lease';
/** Written by the client once the results are verified: the watchdog deletes the pod at once. */
export const RETRIEVED_MARKER = '.pod/retrieved';
/** Runtime keep marker: while it exists the watchdog treats the pod as kept; remove it to release the pod. */
export const KEEP_MARKER = '.pod/keep';
/** The watchdog's log, in the run dir on the pod. */
export const WATCHDOG_LOG = '.pod/watchdog.log';
/** The watchdog's verdict of its startup proof (one line, see {@link parseWatchdogVerdict}). */
export const WATCHDOG_VERDICT = '.pod/watchdog';
/** The bootstrap's log, in the run dir on the pod. */
export const BOOTSTRAP_LOG = '.pod/bootstrap.log';
/** The bootstrap's failure reason (one line), when it failed. */
export const BOOTSTRAP_FAILED = '.pod/bootstrap_failed';
/**
 * The release of a pod kept at its creation: unix seconds, written by the client. The watchdog
 * takes it as its deadline in place of its env's (none), no longer keeps the pod for its env's
 * OVERBRAINER_KEEP_POD, and counts a job that ended before it as ended at the release.
 */
export const DEADLINE_FILE = '.pod/deadline';
/** Unix seconds after which the watchdog deletes the pod (`max_cost_usd`), written by the client. */
export const COST_CAP_FILE = '.pod/cost_cap_at';
/** Unix seconds at which the watchdog requests a snapshot with reason `cost` (before {@link COST_CAP_FILE}). */
export const SNAPSHOT_AT_FILE = '.pod/snapshot_at';
/** A cluster member's cluster ID, written by the client: the watchdog's delete is that cluster's. */
export const CLUSTER_FILE = '.pod/cluster';
/** `refused http_<code>`, written by a member's watchdog whose key may not delete its cluster. */
export const CLUSTER_DELETE_FILE = '.pod/cluster_delete';
/** The network volume's size in GB, written by the client (and rewritten when it grows) for the watchdog's disk rule. */
export const VOLUME_GB_FILE = '.pod/volume_gb';
/** The run dir's claim: holds the `OVERBRAINER_CLAIM` value (the pod's host public key) and a newline. */
export const CLAIM_FILE = '.claim';
/** Where the bootstrap puts the files of a run dir whose claim it refused. */
export const REFUSED_RUN_DIR = '/root/overbrainer-refused-run';
/** Sourced by the job's shell (PATH, LD_LIBRARY_PATH, HF_HOME); written by the bootstrap. */
export const JOB_ENV_PATH = '/etc/overbrainer/job.env';
/** The installed watchdog on the pod. */
export const WATCHDOG_PATH = '/etc/overbrainer/watchdog.sh';
/** The watchdog's User-Agent is this plus `OVERBRAINER_VERSION`. */
export const WATCHDOG_USER_AGENT_PREFIX = 'overbrainer-watchdog/';

/** The bound kept on the pod's `cmd` (100 KiB): Runpod rejects a larger one. */
export const POD_CMD_MAX_BYTES = 100 * 1024;
/** The bound kept on the create call's env: at most 50 variables. */
export const POD_ENV_MAX_VARS = 50;

const WATCHDOG_HEREDOC = 'OVERBRAINER_WATCHDOG_EOF';

type ScriptName = 'bootstrap.sh' | 'watchdog.sh';
const scripts = new Map<ScriptName, string>();

function readScript(name: ScriptName): string {
  let text = scripts.get(name);
  if (text === undefined) {
    const file = path.join(__dirname, 'scripts', name);
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (error) {
      throw new PodScriptError(
        'unreadable',
        `cannot read the pod script ${file} (${(error as Error).message}): ` +
          'reinstall the extension, or run the build so it copies src/core/pod/scripts/ to dist/scripts/',
      );
    }
    scripts.set(name, text);
  }
  return text;
}

export type PodScriptErrorKind =
  /** A pod script is missing from the installation. */
  | 'unreadable'
  /** The scripts cannot be sent as a pod cmd (too long, a heredoc broken). */
  | 'bad_script'
  /** A value of the pod env is refused. */
  | 'bad_env';

/** A pod script or the pod env cannot be built; the message says what to fix. */
export class PodScriptError extends HintedError<PodScriptErrorKind> {
  override readonly name = 'PodScriptError';

  constructor(kind: PodScriptErrorKind, message: string) {
    super(
      kind,
      message,
      kind === 'unreadable'
        ? 'Reinstall Overbrainer: a pod script it ships is missing.'
        : 'Fix what the message names in the target or the environment it takes (overbrainer.toml, .env), then train again.',
    );
  }
}

/** The bootstrap, as written in scripts/bootstrap.sh (functions only; {@link podCmd} runs it). */
export function bootstrapScript(): string {
  return readScript('bootstrap.sh');
}

/** The watchdog, as written in scripts/watchdog.sh. */
export function watchdogScript(): string {
  return readScript('watchdog.sh');
}

let cmd: string | undefined;

/**
 * The pod's `cmd` for the create call: `bash -c` of the bootstrap, the watchdog embedded as the
 * quoted heredoc of a `write_watchdog` function, and the call of `bootstrap_main`.
 */
export function podCmd(): string[] {
  if (cmd === undefined) {
    const watchdog = watchdogScript();
    if (watchdog.split('\n').includes(WATCHDOG_HEREDOC)) {
      throw new PodScriptError(
        'bad_script',
        `watchdog.sh contains the line ${WATCHDOG_HEREDOC}, which ends its heredoc: rename it in the script`,
      );
    }
    const body = watchdog.endsWith('\n') ? watchdog : `${watchdog}\n`;
    const script =
      `${bootstrapScript()}\n` +
      `write_watchdog() {\n  cat <<'${WATCHDOG_HEREDOC}'\n${body}${WATCHDOG_HEREDOC}\n}\n\n` +
      'bootstrap_main\n';
    const bytes = Buffer.byteLength(script, 'utf8');
    if (bytes >= POD_CMD_MAX_BYTES) {
      throw new PodScriptError(
        'bad_script',
        `the pod cmd is ${bytes} bytes, over Runpod's ${POD_CMD_MAX_BYTES}: shorten the pod scripts`,
      );
    }
    cmd = script;
  }
  return ['bash', '-c', cmd];
}

/** What the create call's env is built from (never the account API key or HF token). */
export interface PodEnvParams {
  /** The run marker: every pod of the run carries it. */
  runId: string;
  /** `/workspace/overbrainer`, or `/workspace/data/overbrainer` with a network volume. */
  workdir: string;
  /** The watchdog's `max_hours` deadline; null for a kept pod (and only then). */
  deadlineUnixS: number | null;
  bootGraceS: number;
  retrieveGraceS: number;
  keepPod: boolean;
  /** Where the network volume is mounted (`/workspace/data`), when there is one. */
  volumeDir?: string | null;
  /** The client's Runpod API base URL (`https://api.runpod.io/v2`); the watchdog calls it. */
  apiUrl: string;
  /** The run's client public key (one OpenSSH line). */
  authorizedKey: string;
  /** The pod's host public key, the `.claim` owner. */
  claim: string;
  /** The extension's version: the watchdog's User-Agent. */
  version: string;
  /**
   * Base64 of the OpenSSH private host key, or a `{{ RUNPOD_SECRET_<name> }}` reference to the
   * account secret holding it.
   */
  hostKey: string;
  timing: Pick<
    Timing,
    | 'watchdogIntervalS'
    | 'watchdogProbeTries'
    | 'watchdogProbeWaitS'
    | 'snapshotLeadS'
    | 'snapshotWaitS'
    | 'leaseTtlMs'
    | 'preflightTimeoutMs'
  >;
}

const RUN_ID = /^[A-Za-z0-9_-]{1,64}$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const SECRET_REF = /^\{\{ RUNPOD_SECRET_[A-Za-z0-9_.-]+ \}\}$/;
const PUBLIC_KEY = /^(ssh-|ecdsa-)[A-Za-z0-9-]+ [A-Za-z0-9+/]+={0,2}( [^\r\n]*)?$/;

function wholeSeconds(field: string, value: number, min: number): string {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new PodScriptError(
      'bad_env',
      `${field} must be a whole number of seconds >= ${min}, got ${value}`,
    );
  }
  return String(value);
}

function absoluteDir(field: string, value: string): string {
  if (!/^\/[A-Za-z0-9._/-]*$/.test(value) || value.includes('..') || /.\/$/.test(value)) {
    throw new PodScriptError(
      'bad_env',
      `${field} must be an absolute path of letters, digits, ._-/ without a trailing slash, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/**
 * The create call's env: the run marker, the bootstrap's and the watchdog's settings, and the
 * host key (or its secret reference). Never the account API key (the watchdog uses the pod's
 * own `RUNPOD_API_KEY`), `HF_TOKEN` or `PUBLIC_KEY`.
 *
 * @throws PodScriptError when a value would break the pod scripts (the message names the field).
 */
export function podEnv(p: PodEnvParams): Record<string, string> {
  if (!RUN_ID.test(p.runId)) {
    throw new PodScriptError(
      'bad_env',
      `run id must be 1-64 letters, digits, - or _, got ${JSON.stringify(p.runId)}`,
    );
  }
  const workdir = absoluteDir('workdir', p.workdir);
  let apiUrl: URL;
  try {
    apiUrl = new URL(p.apiUrl);
  } catch {
    throw new PodScriptError('bad_env', `apiUrl is not a URL: ${JSON.stringify(p.apiUrl)}`);
  }
  if (
    !['https:', 'http:'].includes(apiUrl.protocol) ||
    apiUrl.username !== '' ||
    apiUrl.password !== '' ||
    apiUrl.search !== '' ||
    apiUrl.hash !== ''
  ) {
    throw new PodScriptError(
      'bad_env',
      'apiUrl must be an http(s) base URL without credentials, query or fragment (e.g. https://api.runpod.io/v2)',
    );
  }
  if (!PUBLIC_KEY.test(p.authorizedKey)) {
    throw new PodScriptError('bad_env', 'authorizedKey must be one OpenSSH public key line');
  }
  if (!PUBLIC_KEY.test(p.claim)) {
    throw new PodScriptError('bad_env', 'claim must be the pod host public key, one OpenSSH line');
  }
  if (!BASE64.test(p.hostKey) && !SECRET_REF.test(p.hostKey)) {
    throw new PodScriptError(
      'bad_env',
      'hostKey must be the base64 of the OpenSSH private host key or a {{ RUNPOD_SECRET_<name> }} reference',
    );
  }
  if (!/^[A-Za-z0-9.+_-]{1,64}$/.test(p.version)) {
    throw new PodScriptError(
      'bad_env',
      `version must be a plain version string, got ${JSON.stringify(p.version)}`,
    );
  }
  const env: Record<string, string> = {
    OVERBRAINER_RUN_ID: p.runId,
    OVERBRAINER_WORKDIR: workdir,
    OVERBRAINER_RUN_DIR: `${workdir === '/' ? '' : workdir}/${p.runId}`,
  };
  if (p.keepPod) {
    if (p.deadlineUnixS !== null) {
      throw new PodScriptError(
        'bad_env',
        'a kept pod has no deadline: pass deadlineUnixS null with keepPod',
      );
    }
  } else {
    if (p.deadlineUnixS === null) {
      throw new PodScriptError(
        'bad_env',
        'a pod that is not kept needs its max_hours deadline (deadlineUnixS)',
      );
    }
    env.OVERBRAINER_DEADLINE = wholeSeconds('deadlineUnixS', p.deadlineUnixS, 1);
  }
  env.OVERBRAINER_BOOT_GRACE = wholeSeconds('bootGraceS', p.bootGraceS, 1);
  env.OVERBRAINER_RETRIEVE_GRACE = wholeSeconds('retrieveGraceS', p.retrieveGraceS, 0);
  env.OVERBRAINER_KEEP_POD = p.keepPod ? '1' : '0';
  if (p.volumeDir !== undefined && p.volumeDir !== null) {
    env.OVERBRAINER_VOLUME_DIR = absoluteDir('volumeDir', p.volumeDir);
  }
  env.OVERBRAINER_API_URL = p.apiUrl.replace(/\/+$/, '');
  env.OVERBRAINER_AUTHORIZED_KEY = p.authorizedKey;
  env.OVERBRAINER_CLAIM = p.claim;
  env.OVERBRAINER_VERSION = p.version;
  env.JUPYTER_DISABLE = '1';
  env.OVERBRAINER_HOST_KEY = p.hostKey;
  env.OVERBRAINER_INTERVAL = wholeSeconds(
    'timing.watchdogIntervalS',
    p.timing.watchdogIntervalS,
    1,
  );
  env.OVERBRAINER_PROBE_TRIES = wholeSeconds(
    'timing.watchdogProbeTries',
    p.timing.watchdogProbeTries,
    1,
  );
  env.OVERBRAINER_PROBE_WAIT = wholeSeconds(
    'timing.watchdogProbeWaitS',
    p.timing.watchdogProbeWaitS,
    0,
  );
  env.OVERBRAINER_LEASE_TTL = String(Math.max(1, Math.round(p.timing.leaseTtlMs / 1000)));
  // After a failed bootstrap that started sshd, the watchdog leaves the client its preflight
  // limit to read the verdict and delete the pod itself (so the run is refused at once).
  env.OVERBRAINER_FAIL_GRACE = String(Math.max(1, Math.ceil(p.timing.preflightTimeoutMs / 1000)));
  env.OVERBRAINER_SNAPSHOT_LEAD = wholeSeconds('timing.snapshotLeadS', p.timing.snapshotLeadS, 0);
  env.OVERBRAINER_SNAPSHOT_WAIT = wholeSeconds('timing.snapshotWaitS', p.timing.snapshotWaitS, 0);
  if (Object.keys(env).length > POD_ENV_MAX_VARS) {
    throw new PodScriptError('bad_env', `the pod env has more than ${POD_ENV_MAX_VARS} variables`);
  }
  return env;
}

/** The watchdog's verdict, as the client's preflight reads it. */
export type WatchdogVerdict =
  | { kind: 'ready' }
  /** The bootstrap failed: the watchdog deletes the pod; the run is refused. */
  | { kind: 'bootstrap_failed'; reason: string }
  /** The watchdog cannot delete its pod (missing_key, no_curl, unreachable, http_<code>). */
  | { kind: 'failed'; reason: string };

/**
 * How much of the verdict file the client reads (4096 bytes), and keeps (200 printable ASCII
 * characters): the pod writes it, so it is untrusted.
 */
export const VERDICT_READ_MAX_BYTES = 4096;
export const VERDICT_KEEP_MAX_CHARS = 200;

/**
 * Parses the verdict file's text (read up to {@link VERDICT_READ_MAX_BYTES}): the first line,
 * reduced to printable ASCII and {@link VERDICT_KEEP_MAX_CHARS} characters. Null when it is no
 * verdict (empty or a word the watchdog never writes): the caller keeps waiting.
 */
export function parseWatchdogVerdict(text: string): WatchdogVerdict | null {
  const firstLine = text.slice(0, VERDICT_READ_MAX_BYTES).split(/\r?\n/, 1)[0] ?? '';
  const line = firstLine
    .replace(/[^\x20-\x7e]/g, '')
    .slice(0, VERDICT_KEEP_MAX_CHARS)
    .trim();
  if (line === 'ready') return { kind: 'ready' };
  const boot = /^failed bootstrap: ?(.*)$/.exec(line);
  if (boot) return { kind: 'bootstrap_failed', reason: boot[1] || 'unknown' };
  const failed = /^failed (\S.*)$/.exec(line);
  if (failed?.[1] !== undefined) return { kind: 'failed', reason: failed[1] };
  return null;
}
