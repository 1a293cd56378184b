/**
 * The job's scripts (./job.ts runs them): started detached in its own session so it
 * survives the client, observed through files in its run directory, cancelled
 * by its process group. Every script here is POSIX sh and is tested under
 * dash, bash and busybox sh.
 *
 * Files in the run directory:
 *   job.pid    the wrapper's PID = the job's process group (written temp + mv)
 *   job.log    the job's stdout and stderr
 *   exit_code  the script's exit status (written temp + mv once it returns)
 *   cancelling written by cancel before it signals the group
 *   cancelled  written by cancel once the group is gone
 *   metrics.jsonl  the trainer protocol's lines ($OVERBRAINER_METRICS)
 *   snapshot.request  a snapshot is asked for ($OVERBRAINER_SNAPSHOT): one line, its reason
 *              (requested | deadline | cost | disk), written temp + mv by the client or the
 *              pod's watchdog; an existing request is never replaced. A trainer that honours
 *              it saves a checkpoint at its next step end, writes snapshot.json and exits 0.
 *   snapshot.json  {checkpoint, step, time, reason} written temp + mv by the trainer once its
 *              snapshot's checkpoint is saved; `checkpoint` is relative to the run directory
 *              (`output/checkpoint-12`). With it the run ends `stopped`, not `succeeded`.
 *   resume/checkpoint-N/  a resumed run's starting checkpoint ($OVERBRAINER_RESUME_FROM, absolute)
 */
import { shQuote } from '../exec/shell';
import { hubPushSh, type HubJob } from './hubPush';

export const METRICS_FILE = 'metrics.jsonl';
export const JOB_LOG = 'job.log';
/** The snapshot request the trainer looks for at each step end (its path is $OVERBRAINER_SNAPSHOT). */
export const SNAPSHOT_REQUEST = 'snapshot.request';
/** What a trainer writes once the snapshot's checkpoint is saved. */
export const SNAPSHOT_JSON = 'snapshot.json';
/** Where a resumed run's starting checkpoint is uploaded, under its run directory. */
export const RESUME_DIR = 'resume';
/** The env variable naming the absolute path of a resumed run's starting checkpoint. */
export const RESUME_ENV = 'OVERBRAINER_RESUME_FROM';
export const SNAPSHOT_REASONS = ['requested', 'deadline', 'cost', 'disk'] as const;
/** Seconds of work the job does after its last step (the LoRA merge), for the ETA. */
export const AFTER_ENV = 'OVERBRAINER_AFTER_S';
/** Where Axolotl's LoRA merge writes the merged model, under the run directory. */
export const MERGED_DIR = 'output/merged';
/** The pod's job environment, written by the bootstrap (absent on the local target). */
export const POD_JOB_ENV = '/etc/overbrainer/job.env';
/** How long cancel waits after SIGTERM, and again after SIGKILL (at most 10 s each). */
export const CANCEL_WAIT_S = 10;
/** How long the launcher waits for the wrapper to record its PID. */
const PID_WAIT_S = 10;

/** The one quoting helper (src/core/exec/shell.ts), re-exported for the scripts built here. */
export { shQuote };

/**
 * sh that prints `overbrainer: run directory <runDir> does not exist` on stderr, the directory
 * quoted as one word (it is a path of the user's workspace on the local target: any character).
 */
export function noRunDirSh(runDir: string, prefix = 'overbrainer: run directory'): string {
  return `printf '%s %s does not exist\\n' ${shQuote(prefix)} ${shQuote(runDir)} >&2`;
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function checkName(name: string, what: string): void {
  if (!NAME.test(name)) {
    throw new RangeError(`${what} name ${JSON.stringify(name)} is not a valid variable name`);
  }
}

function checkRunDir(runDir: string): void {
  if (!runDir.startsWith('/')) throw new RangeError(`run directory must be absolute: ${runDir}`);
}

/** Joins an absolute directory and a file name. */
export function remotePath(dir: string, name: string): string {
  return dir.endsWith('/') ? dir + name : `${dir}/${name}`;
}

/**
 * Sets `tick` and `per_s` so a loop can wait `N * per_s` ticks for N seconds:
 * tenths where `sleep` takes fractions (GNU, busybox), whole seconds otherwise.
 */
export const TICK_SH = `if sleep 0.1 2>/dev/null; then tick=0.1 per_s=10; else tick=1 per_s=1; fi`;

/**
 * `group_alive PGID`: whether a process of the group is alive. `kill -0`
 * alone counts zombies, and an orphaned job's zombies are never reaped when
 * PID 1 does not reap (some container inits): where /proc exists, a group
 * only counts if one of its processes is not a zombie. PIDs 0 and 1 and
 * non-numbers are never a job's group.
 */
export const GROUP_ALIVE_SH = `group_alive() {
  g=$1
  case $g in ''|*[!0-9]*|0|1) return 1 ;; esac
  kill -0 -"$g" 2>/dev/null || return 1
  [ -r /proc/self/stat ] || return 0
  for f in /proc/[0-9]*/stat; do
    { IFS= read -r line < "$f"; } 2>/dev/null || continue
    rest=\${line##*") "}
    set -- $rest
    if [ "$3" = "$g" ] && [ "$1" != Z ] && [ "$1" != X ]; then return 0; fi
  done
  return 1
}`;

export interface LaunchSpec {
  /** Absolute run directory on the target (it exists: the upload created it). */
  runDir: string;
  /** The job, as sh text run in a subshell in the run directory. */
  script: string;
  /** Non-secret variables exported to the job (they appear in the launcher's command text). */
  env?: Record<string, string>;
  /**
   * Secret variables (HF_TOKEN, …): only their names are in the command;
   * their values travel on the launcher's stdin, one line each.
   */
  secretNames?: readonly string[];
}

/**
 * The wrapper the detached `sh -c` runs: records its PID (= the group), runs
 * the job in a subshell with OVERBRAINER_METRICS and OVERBRAINER_SNAPSHOT exported, records the exit
 * status, exits with it. A signal that kills the wrapper leaves no exit_code:
 * the status is then `cancelled` (markers) or `lost`.
 */
export function wrapperScript(
  runDir: string,
  script: string,
  secretNames: readonly string[] = [],
): string {
  const metrics = shQuote(remotePath(runDir, METRICS_FILE));
  const snapshot = shQuote(remotePath(runDir, SNAPSHOT_REQUEST));
  const job = [
    '(',
    `OVERBRAINER_METRICS=${metrics}`,
    `OVERBRAINER_SNAPSHOT=${snapshot}`,
    'export OVERBRAINER_METRICS OVERBRAINER_SNAPSHOT',
    script,
    ')',
  ];
  const run =
    secretNames.length === 0
      ? [...job, 'code=$?']
      : [
          // The job's output goes through the redactor on its way to job.log: no secret value
          // is ever written there, so nothing that reads or copies the log can see one.
          'rm -f .job_status',
          '(',
          ...job,
          'echo $? > .job_status',
          `) 2>&1 | awk -v names=${shQuote(secretNames.join(' '))} ${shQuote(REDACT_AWK)}`,
          'code=$(cat .job_status 2>/dev/null)',
          'rm -f .job_status',
          'case $code in ""|*[!0-9]*) code=1 ;; esac',
        ];
  return [
    'echo $$ > job.pid.tmp && mv -f job.pid.tmp job.pid',
    ...run,
    'echo "$code" > exit_code.tmp && mv -f exit_code.tmp exit_code',
    'exit "$code"',
  ].join('\n');
}

/** What a secret's value becomes in the job's log. */
export const REDACTED = '[redacted]';

/**
 * awk (POSIX: mawk, gawk, busybox) that copies its input line by line, each occurrence of the
 * value of every variable named in `names` (read from its environment, never an argument)
 * replaced by {@link REDACTED}, flushed after each line so the log is followed live.
 */
const REDACT_AWK = `BEGIN { n = split(names, k, " "); for (i = 1; i <= n; i++) v[i] = ENVIRON[k[i]] }
{
  line = $0
  for (i = 1; i <= n; i++) {
    if (length(v[i]) < 4) continue
    out = ""
    while ((p = index(line, v[i])) > 0) {
      out = out substr(line, 1, p - 1) "${REDACTED}"
      line = substr(line, p + length(v[i]))
    }
    line = out line
  }
  print line
  fflush()
}`;

/** A sweep trial's params as `NAME='value'` lines, sourced by the launcher when present. */
export const PARAMS_ENV = 'params.env';

/**
 * The launcher: cd into the run dir, clear the markers of an earlier
 * attempt, read the secrets from stdin, start the wrapper detached in its own
 * session (`setsid nohup sh -c … > job.log 2>&1 < /dev/null &`), wait until it
 * recorded its PID (so a status right after the start never reads `lost`),
 * and print `$!`.
 */
export function launcherScript(spec: LaunchSpec): string {
  checkRunDir(spec.runDir);
  const lines: string[] = [
    `cd ${shQuote(spec.runDir)} || { ${noRunDirSh(spec.runDir)}; exit 90; }`,
    'rm -f exit_code cancelling cancelled job.pid job.pid.tmp exit_code.tmp',
  ];
  for (const name of spec.secretNames ?? []) {
    checkName(name, 'secret');
    lines.push(
      `IFS= read -r ${name} || { echo "overbrainer: no value for ${name} on stdin" >&2; exit 91; }`,
      `export ${name}`,
    );
  }
  for (const [name, value] of Object.entries(spec.env ?? {})) {
    checkName(name, 'environment variable');
    lines.push(`${name}=${shQuote(value)}`, `export ${name}`);
  }
  // A sweep trial's params (OVERBRAINER_PARAM_*), written beside params.json: in the run
  // directory, so a job started again on a new pod gets them too.
  lines.push(`if [ -f ${PARAMS_ENV} ]; then set -a; . ./${PARAMS_ENV}; set +a; fi`);
  const wrapped = shQuote(wrapperScript(spec.runDir, spec.script, spec.secretNames ?? []));
  lines.push(
    // A job script that does not parse would die before recording its PID
    // and read as `lost`; say so now, with the shell's own words.
    `err=$(sh -n -c ${wrapped} 2>&1) || { echo "overbrainer: the job's script is not valid sh: $err" >&2; exit 97; }`,
    'command -v setsid >/dev/null 2>&1 || { echo "overbrainer: setsid is missing on the target (install util-linux or busybox)" >&2; exit 92; }',
    // nohup is redundant after setsid (no controlling terminal, so no hangup)
    // and busybox lacks it: used where present, harmless there, skipped where absent.
    'if command -v nohup >/dev/null 2>&1; then nohup=nohup; else nohup=; fi',
    `setsid $nohup sh -c ${wrapped} > job.log 2>&1 < /dev/null &`,
    'pid=$!',
    TICK_SH,
    `n=0; while [ ! -s job.pid ] && [ ! -e exit_code ] && [ "$n" -lt $((${PID_WAIT_S} * per_s)) ]; do sleep $tick; n=$((n + 1)); done`,
    // Dead without a trace: say so now. Alive but slow: its PID is still right.
    'if [ ! -s job.pid ] && [ ! -e exit_code ] && ! kill -0 "$pid" 2>/dev/null; then',
    '  echo "overbrainer: the job died before it started: $(tail -c 300 job.log 2>/dev/null)" >&2',
    '  exit 98',
    'fi',
    'echo "$pid"',
  );
  return lines.join('\n');
}

/**
 * Prints one word (or `exited N`): `cancelled` if `cancelled` exists; while
 * `cancelling` exists, `running` or `cancelled` by the group's liveness; else
 * `exited <code>` from exit_code; else `running` or `lost`. A missing run
 * directory is `lost`.
 */
export function statusScript(runDir: string): string {
  checkRunDir(runDir);
  return [
    `cd ${shQuote(runDir)} 2>/dev/null || { echo lost; exit 0; }`,
    GROUP_ALIVE_SH,
    'if [ -e cancelled ]; then echo cancelled; exit 0; fi',
    'pid=$(cat job.pid 2>/dev/null)',
    'if [ -e cancelling ]; then',
    '  if group_alive "$pid"; then echo running; else echo cancelled; fi',
    '  exit 0',
    'fi',
    'exited() {',
    '  code=$(cat exit_code 2>/dev/null)',
    '  case $code in',
    "    ''|*[!0-9]*) echo lost ;;",
    '    *) echo "exited $code" ;;',
    '  esac',
    '}',
    'if [ -e exit_code ]; then exited; exit 0; fi',
    'if group_alive "$pid"; then echo running; exit 0; fi',
    // The job may have written exit_code and ended between the two looks.
    'if [ -e exit_code ]; then exited; else echo lost; fi',
  ].join('\n');
}

export interface CancelWaits {
  /** Seconds to wait for the group after SIGTERM (default {@link CANCEL_WAIT_S}). */
  termWaitS?: number;
  /** Seconds to wait after SIGKILL (default {@link CANCEL_WAIT_S}). */
  killWaitS?: number;
}

/**
 * Cancels the job: nothing to do when exit_code or cancelled exists
 * (prints `ended`: a finished job or a recycled PID is never signalled); else
 * writes `cancelling`, TERMs the group, waits, KILLs, waits, and writes
 * `cancelled` (prints `cancelled`). A group that outlives SIGKILL fails the
 * script with `cancelling` kept, so the status keeps saying `running`.
 */
export function cancelScript(runDir: string, waits: CancelWaits = {}): string {
  checkRunDir(runDir);
  const termS = wholeSeconds(waits.termWaitS ?? CANCEL_WAIT_S);
  const killS = wholeSeconds(waits.killWaitS ?? CANCEL_WAIT_S);
  return [
    `cd ${shQuote(runDir)} 2>/dev/null || { ${noRunDirSh(runDir)}; exit 93; }`,
    'if [ -e exit_code ] || [ -e cancelled ]; then echo ended; exit 0; fi',
    GROUP_ALIVE_SH,
    TICK_SH,
    'wait_gone() { n=0; while group_alive "$pid" && [ "$n" -lt $(($1 * per_s)) ]; do sleep $tick; n=$((n + 1)); done; }',
    'pid=$(cat job.pid 2>/dev/null)',
    ': > cancelling || { echo "overbrainer: cannot write the cancelling marker" >&2; exit 94; }',
    'if group_alive "$pid"; then',
    '  kill -TERM -"$pid" 2>/dev/null',
    `  wait_gone ${termS}`,
    'fi',
    'if group_alive "$pid"; then',
    '  kill -KILL -"$pid" 2>/dev/null',
    `  wait_gone ${killS}`,
    'fi',
    'if group_alive "$pid"; then',
    `  echo "overbrainer: the job's process group $pid is still alive after SIGKILL" >&2`,
    '  exit 95',
    'fi',
    ': > cancelled || { echo "overbrainer: cannot write the cancelled marker" >&2; exit 94; }',
    'echo cancelled',
  ].join('\n');
}

function wholeSeconds(value: number): number {
  if (!Number.isInteger(value) || value < 0) {
    throw new RangeError(`a wait must be whole seconds >= 0, got ${value}`);
  }
  return value;
}

/** What the job runs: the trainers of `[training]`. */
export type TrainerJob =
  | {
      trainer: 'command';
      /** The configured shell command, run as is in the run directory. */
      command: string;
      /** The push to the Hub after it succeeded (`hub_model_id`), with `python3`. */
      hub?: HubJob;
    }
  | {
      trainer: 'axolotl';
      /** The Axolotl config, relative to the run directory (`axolotl.yaml`). */
      config: string;
      /** The Python venv holding axolotl (its `bin/axolotl` is run). */
      venv: string;
      /** `axolotl merge-lora` after training (into `output/merged/`), unless a snapshot stopped it. */
      merge?: boolean;
      /**
       * Seconds of work after the last step (the merge), told to the metrics plugin as
       * `$OVERBRAINER_AFTER_S` so the ETA counts it.
       */
      afterS?: number;
      /** The push to the Hub after training and the merge (`hub_model_id`), with the venv's Python. */
      hub?: HubJob;
    };

export interface JobScriptOptions {
  runDir: string;
  /**
   * The target's job environment file to source first (the pod's
   * {@link POD_JOB_ENV}); null on the local target, which has none.
   */
  jobEnvFile: string | null;
}

/**
 * The job's sh text for a trainer. Axolotl (native runtime):
 * `. job.env && export AXOLOTL_DO_NOT_TRACK=1 PYTHONPATH=<runDir>/plugin(:inherited)
 * OVERBRAINER_METRICS=<runDir>/metrics.jsonl && <venv>/bin/axolotl train <config>`.
 * A command: sourced job.env (if any), then the command.
 */
export function jobScript(job: TrainerJob, options: JobScriptOptions): string {
  checkRunDir(options.runDir);
  const envFile = options.jobEnvFile === null ? null : shQuote(options.jobEnvFile);
  const source = envFile === null ? null : `. ${envFile}`;
  if (job.trainer === 'command') {
    if (job.command.trim() === '') throw new RangeError('the training command is empty');
    const lines: string[] = [];
    if (source !== null) {
      lines.push(
        `${source} || { printf 'overbrainer: cannot read %s\\n' ${envFile} >&2; exit 96; }`,
      );
    }
    if (job.hub === undefined) {
      lines.push(job.command);
      return lines.join('\n');
    }
    // The command in a subshell: its status decides the push, and an `exit` in it ends only it.
    lines.push('(', job.command, `) && ${hubPushSh(job.hub, 'python3', SNAPSHOT_JSON)}`);
    return lines.join('\n');
  }
  const plugin = shQuote(remotePath(options.runDir, 'plugin'));
  const metrics = shQuote(remotePath(options.runDir, METRICS_FILE));
  const axolotl = shQuote(remotePath(job.venv, 'bin/axolotl'));
  const after =
    job.afterS !== undefined && job.afterS > 0 ? ` ${AFTER_ENV}=${Math.ceil(job.afterS)}` : '';
  const parts = [
    `export AXOLOTL_DO_NOT_TRACK=1 PYTHONPATH=${plugin}\${PYTHONPATH:+:$PYTHONPATH} OVERBRAINER_METRICS=${metrics}${after}`,
    `${axolotl} train ${shQuote(job.config)}`,
  ];
  if (job.merge === true) {
    // A snapshot stops the run: its adapter is not final, so it is not merged.
    parts.push(
      `{ [ -e ${SNAPSHOT_JSON} ] || { printf '{"event":"stage","time":%s,"stage":"merge"}\\n' "$(date +%s)" >> ${metrics}; ${axolotl} merge-lora ${shQuote(job.config)}; }; }`,
    );
  }
  if (job.hub !== undefined) {
    parts.push(hubPushSh(job.hub, shQuote(remotePath(job.venv, 'bin/python')), SNAPSHOT_JSON));
  }
  if (source !== null) parts.unshift(source);
  return parts.join(' && ');
}
