/**
 * The CLI's command line: `overbrainer [-C DIR] <command> …`. Parsing is pure
 * and strict (an unknown option or a missing value is a usage error, exit 2),
 * so a typo never starts a billing pod with other settings than meant.
 */

export const USAGE = `usage: overbrainer [-C DIR] <command> [options]

Trains on Runpod GPU pods (or on this machine) and never leaves a pod billing by mistake.

commands:
  train [--target NAME] [--keep-pod] [--resume-from RUN_ID] [--dry-run]
                          start a run on its target and follow it to its end;
                          --resume-from starts from a stopped run's snapshot;
                          --dry-run prints the quote and the plan, creates nothing
  train attach RUN_ID     follow a run again; retrieve its results and end its pod
  train stop RUN_ID       stop a run's job with a snapshot (a checkpoint to resume
                          from), retrieve it and the results, end its pod
  train cancel RUN_ID     cancel a run's job, retrieve what it wrote, end its pod
  train keep RUN_ID       keep a run's pod once its job ends (only pod rm deletes it)
  train release RUN_ID    release a kept pod: its deadline and graces apply again
  runs ls                 list this project's runs (no API call)
  spend [--since DATE] [--json]
                          each run's estimated spend beside what Runpod billed (read
                          and saved where missing); a difference over 1 % is flagged
  runs logs RUN_ID [--tail N] [--pod [--source container|system] [--follow]]
                          the job's log (runs/RUN_ID/job.log); with --pod the pod's
                          log (kept in runs/RUN_ID/.pod/pod.log, else from the API);
                          --follow streams it from the API until the pod is gone
  pod ls                  list the account's overbrainer pods, matched with runs/
  pod rm RUN_ID [--force] delete a run's pods (a run in progress needs --force);
                          or POD_ID: one pod that pod ls lists (a stray, an orphan)
  pod gpus [--min-vram GB] [--max-price P] [--in-stock]
                          list Secure-cloud GPU types, cheapest first

options:
  -C DIR                  use DIR (overbrainer.toml, runs/) instead of the current directory
  -h, --help              show this help

environment:
  OVERBRAINER_RUNPOD__API_KEY   the Runpod API key (never printed)
  OVERBRAINER_RUNPOD__BASE_URL  the API base URL (https, or http on 127.0.0.1)
  OVERBRAINER_LOG=debug         show debug lines too

Ctrl-C before the job starts deletes the run's pod; once the job runs it only stops
following (attach again with train attach). Exit codes: 0 success, 1 a failed or
cancelled run or an error, 2 a usage or configuration error.
`;

export type Command =
  | { kind: 'help' }
  | {
      kind: 'train';
      target: string | null;
      keepPod: boolean;
      resumeFrom: string | null;
      dryRun?: boolean;
    }
  | { kind: 'attach' | 'cancel' | 'stop' | 'keep' | 'release'; runId: string }
  | { kind: 'runs_ls' }
  | { kind: 'spend'; sinceMs: number | null; json: boolean }
  | {
      kind: 'runs_logs';
      runId: string;
      tail: number | null;
      pod: boolean;
      source: 'container' | 'system' | null;
      follow: boolean;
    }
  | { kind: 'pod_ls' }
  | { kind: 'pod_rm'; runId: string; force: boolean }
  | {
      kind: 'pod_gpus';
      minVramGb: number | null;
      maxPricePerHourUsd: number | null;
      inStock: boolean;
    };

export interface Parsed {
  /** `-C DIR`, as given (resolved against the working directory by the caller). */
  dir: string | null;
  command: Command;
}

/** A command line the CLI does not accept: printed with the usage, exit 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Options a command accepts: name → whether it takes a value. */
type Spec = Record<string, boolean>;

/** Splits `words` into positionals and the options of `spec` (`--name value` or `--name=value`). */
function options(
  words: readonly string[],
  spec: Spec,
  what: string,
): { positional: string[]; values: Map<string, string | true> } {
  const positional: string[] = [];
  const values = new Map<string, string | true>();
  for (let i = 0; i < words.length; i++) {
    const word = words[i] ?? '';
    if (word === '--') {
      positional.push(...words.slice(i + 1));
      break;
    }
    if (!word.startsWith('-') || word === '-') {
      positional.push(word);
      continue;
    }
    const eq = word.indexOf('=');
    const name = eq === -1 ? word : word.slice(0, eq);
    const takesValue = spec[name];
    if (takesValue === undefined) throw new UsageError(`${what} has no option ${name}`);
    if (values.has(name)) throw new UsageError(`${name} is given twice`);
    if (!takesValue) {
      if (eq !== -1) throw new UsageError(`${name} takes no value`);
      values.set(name, true);
      continue;
    }
    let value: string | undefined;
    if (eq !== -1) value = word.slice(eq + 1);
    else {
      value = words[i + 1];
      i++;
    }
    if (value === undefined || value === '' || (eq === -1 && value.startsWith('--'))) {
      throw new UsageError(`${name} needs a value`);
    }
    values.set(name, value);
  }
  return { positional, values };
}

function one(positional: readonly string[], what: string, name: string): string {
  if (positional.length === 0) throw new UsageError(`${what} needs ${name}`);
  if (positional.length > 1) {
    throw new UsageError(`${what} takes one ${name}, not ${positional.join(' ')}`);
  }
  return positional[0] ?? '';
}

function none(positional: readonly string[], what: string): void {
  if (positional.length > 0)
    throw new UsageError(`${what} takes no argument ${positional[0] ?? ''}`);
}

function number(value: string | true | undefined, name: string, min: number): number | null {
  if (value === undefined) return null;
  const n = typeof value === 'string' && /^\d+(\.\d+)?$/.test(value) ? Number(value) : NaN;
  if (!Number.isFinite(n) || n < min) {
    throw new UsageError(`${name} takes a number of at least ${min}, not ${String(value)}`);
  }
  return n;
}

/** Parses the arguments after `overbrainer`. */
export function parseArgs(argv: readonly string[]): Parsed {
  let dir: string | null = null;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i] ?? '';
    if (word === '-h' || word === '--help') return { dir, command: { kind: 'help' } };
    if (word === '-C' || word.startsWith('-C') || word.startsWith('--directory')) {
      if (dir !== null) throw new UsageError('-C is given twice');
      let value: string | undefined;
      if (word === '-C' || word === '--directory') {
        value = argv[i + 1];
        i++;
      } else if (word.startsWith('--directory=')) {
        value = word.slice('--directory='.length);
      } else if (word.startsWith('-C')) {
        value = word.slice(2);
      } else {
        throw new UsageError(`unknown option ${word}`);
      }
      if (value === undefined || value === '') throw new UsageError('-C needs a directory');
      dir = value;
      continue;
    }
    rest.push(word);
  }
  const [group, sub, ...more] = rest;
  if (group === undefined) throw new UsageError('no command given');
  if (group === 'help') return { dir, command: { kind: 'help' } };
  if (group === 'train') {
    if (
      sub === 'attach' ||
      sub === 'cancel' ||
      sub === 'stop' ||
      sub === 'keep' ||
      sub === 'release'
    ) {
      const { positional } = options(more, {}, `train ${sub}`);
      return { dir, command: { kind: sub, runId: one(positional, `train ${sub}`, 'a RUN_ID') } };
    }
    const { positional, values } = options(
      sub === undefined ? [] : [sub, ...more],
      { '--target': true, '--keep-pod': false, '--resume-from': true, '--dry-run': false },
      'train',
    );
    if (positional.length > 0) {
      throw new UsageError(
        `train has no subcommand ${positional[0] ?? ''} (attach, stop, cancel, keep, release)`,
      );
    }
    const target = values.get('--target');
    const resumeFrom = values.get('--resume-from');
    return {
      dir,
      command: {
        kind: 'train',
        target: typeof target === 'string' ? target : null,
        keepPod: values.has('--keep-pod'),
        resumeFrom: typeof resumeFrom === 'string' ? resumeFrom : null,
        ...(values.has('--dry-run') ? { dryRun: true } : {}),
      },
    };
  }
  if (group === 'runs') {
    if (sub === 'logs') {
      const { positional, values } = options(
        more,
        { '--tail': true, '--pod': false, '--source': true, '--follow': false },
        'runs logs',
      );
      const source = values.get('--source');
      if (source !== undefined && source !== 'container' && source !== 'system')
        throw new UsageError(`--source takes container or system, not ${String(source)}`);
      const pod = values.has('--pod');
      if (!pod && (source !== undefined || values.has('--follow')))
        throw new UsageError('--source and --follow apply to the pod log: add --pod');
      const tail = number(values.get('--tail'), '--tail', 0);
      if (tail !== null && (!Number.isInteger(tail) || tail > 5000))
        throw new UsageError(`--tail takes a whole number from 0 to 5000, not ${tail}`);
      return {
        dir,
        command: {
          kind: 'runs_logs',
          runId: one(positional, 'runs logs', 'a RUN_ID'),
          tail,
          pod,
          source: source ?? null,
          follow: values.has('--follow'),
        },
      };
    }
    if (sub !== 'ls') throw new UsageError(`runs has no subcommand ${sub ?? '(none)'} (ls, logs)`);
    none(options(more, {}, 'runs ls').positional, 'runs ls');
    return { dir, command: { kind: 'runs_ls' } };
  }
  if (group === 'spend') {
    const { positional, values } = options(
      sub === undefined ? [] : [sub, ...more],
      { '--since': true, '--json': false },
      'spend',
    );
    none(positional, 'spend');
    const since = values.get('--since');
    let sinceMs: number | null = null;
    if (typeof since === 'string') {
      sinceMs = /^\d{4}-\d{2}-\d{2}($|T)/.test(since) ? Date.parse(since) : NaN;
      if (Number.isNaN(sinceMs)) {
        throw new UsageError(`--since takes a date (2026-09-01) or an RFC 3339 time, not ${since}`);
      }
    }
    return { dir, command: { kind: 'spend', sinceMs, json: values.has('--json') } };
  }
  if (group === 'pod') {
    if (sub === 'ls') {
      none(options(more, {}, 'pod ls').positional, 'pod ls');
      return { dir, command: { kind: 'pod_ls' } };
    }
    if (sub === 'rm') {
      const { positional, values } = options(more, { '--force': false }, 'pod rm');
      return {
        dir,
        command: {
          kind: 'pod_rm',
          runId: one(positional, 'pod rm', 'a RUN_ID'),
          force: values.has('--force'),
        },
      };
    }
    if (sub === 'gpus') {
      const { positional, values } = options(
        more,
        { '--min-vram': true, '--max-price': true, '--in-stock': false },
        'pod gpus',
      );
      none(positional, 'pod gpus');
      return {
        dir,
        command: {
          kind: 'pod_gpus',
          minVramGb: number(values.get('--min-vram'), '--min-vram', 1),
          maxPricePerHourUsd: number(values.get('--max-price'), '--max-price', 0),
          inStock: values.has('--in-stock'),
        },
      };
    }
    throw new UsageError(`pod has no subcommand ${sub ?? '(none)'} (ls, rm, gpus)`);
  }
  throw new UsageError(`unknown command ${group}`);
}
