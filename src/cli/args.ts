/**
 * The CLI's command line: `overbrainer [-C DIR] <command> …`. Each command's options are parsed
 * by `node:util` parseArgs from the command table (./commandSpecs.ts), strictly: an unknown
 * option, a missing or empty value, a value given twice or an extra argument is a usage error
 * (exit 2), so a typo never starts a billing pod with other settings than meant.
 */
import { parseArgs as nodeParseArgs } from 'node:util';
import { HintedError, describeError } from '../core/errors';
import { commandSpec, COMMAND_SPECS, subcommands, type CommandSpec } from './commandSpecs';
import { usageText } from './help';

/** The command list (`overbrainer --help`). */
export const USAGE = `${usageText()}\n`;

export type Command =
  | { kind: 'help'; topic?: string }
  | { kind: 'version' }
  | { kind: 'init'; force: boolean }
  | {
      kind: 'train';
      target: string | null;
      keepPod: boolean;
      resumeFrom: string | null;
      dryRun?: boolean;
    }
  | { kind: 'attach' | 'cancel' | 'stop' | 'keep' | 'release'; runId: string }
  | { kind: 'runs_ls'; json?: true }
  | { kind: 'runs_show'; runId: string; json?: true }
  | { kind: 'runs_ssh'; runId: string }
  | { kind: 'spend'; sinceMs: number | null; json: boolean }
  | {
      kind: 'runs_logs';
      runId: string;
      tail: number | null;
      pod: boolean;
      source: 'container' | 'system' | null;
      follow: boolean;
      /** A cluster run's node (rank): its job.log kept under runs/RUN_ID/nodes/<rank>/. */
      node?: number;
    }
  | { kind: 'pod_ls'; json?: true }
  | { kind: 'pod_rm'; runId: string; force: boolean }
  | {
      kind: 'pod_gpus';
      minVramGb: number | null;
      maxPricePerHourUsd: number | null;
      inStock: boolean;
      dataCenter?: string;
      json?: true;
    }
  | { kind: 'pod_datacenters' | 'pod_volumes' | 'pod_templates'; json?: true }
  | { kind: 'sweep'; dryRun: boolean }
  | { kind: 'sweep_attach' | 'sweep_stop'; name: string }
  | { kind: 'sweep_ls'; json?: true }
  | { kind: 'sweep_show'; name: string; json?: true };

export interface Parsed {
  /** `-C DIR`, as given (resolved against the working directory by the caller). */
  dir: string | null;
  command: Command;
}

/** A command line the CLI does not accept: printed with the command's usage, exit 2. */
export class UsageError extends HintedError<'usage'> {
  constructor(
    message: string,
    /** The command it was for (`pod rm`), when known: its usage is printed. */
    readonly command: string | null = null,
  ) {
    super(
      'usage',
      message,
      command === null
        ? 'Run `overbrainer help` for the commands and their options.'
        : `Run \`overbrainer help ${command}\` for its usage.`,
    );
    this.name = 'UsageError';
  }
}

type Values = Map<string, string | true>;

/**
 * Splits `words` into positionals and the options of `spec` with `node:util` parseArgs, and
 * turns its errors into the CLI's words.
 */
function options(
  words: readonly string[],
  spec: CommandSpec,
): { positional: string[]; values: Values } {
  const config: Record<string, { type: 'string' | 'boolean' }> = {};
  for (const [name, option] of Object.entries(spec.options)) {
    config[name.slice(2)] = { type: option.type };
  }
  let parsed;
  try {
    parsed = nodeParseArgs({
      args: [...words],
      options: config,
      strict: true,
      allowPositionals: true,
      tokens: true,
    });
  } catch (error) {
    throw new UsageError(parseErrorWords(error, spec.name), spec.name);
  }
  const values: Values = new Map();
  for (const token of parsed.tokens) {
    if (token.kind !== 'option') continue;
    const name = `--${token.name}`;
    if (values.has(name)) throw new UsageError(`${name} is given twice`, spec.name);
    if (config[token.name]?.type === 'string') {
      if (token.value === undefined || token.value === '') {
        throw new UsageError(`${name} needs a value`, spec.name);
      }
      values.set(name, token.value);
    } else values.set(name, true);
  }
  return { positional: parsed.positionals, values };
}

/** parseArgs' error (`ERR_PARSE_ARGS_*`) in the CLI's words. */
function parseErrorWords(error: unknown, what: string): string {
  const code = (error as { code?: unknown }).code;
  const message = describeError(error);
  const option = /'(-[^' ]+)/.exec(message)?.[1] ?? '';
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `${what} has no option ${option}`;
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    if (message.includes('does not take an argument')) return `${option} takes no value`;
    return `${option} needs a value`;
  }
  throw error;
}

function one(positional: readonly string[], what: string, name: string): string {
  if (positional.length === 0) throw new UsageError(`${what} needs ${name}`, what);
  if (positional.length > 1) {
    throw new UsageError(`${what} takes one ${name}, not ${positional.join(' ')}`, what);
  }
  return positional[0] ?? '';
}

function none(positional: readonly string[], what: string): void {
  if (positional.length > 0)
    throw new UsageError(`${what} takes no argument ${positional[0] ?? ''}`, what);
}

function number(value: string | true | undefined, name: string, min: number): number | null {
  if (value === undefined) return null;
  const n = typeof value === 'string' && /^\d+(\.\d+)?$/.test(value) ? Number(value) : NaN;
  if (!Number.isFinite(n) || n < min) {
    throw new UsageError(`${name} takes a number of at least ${min}, not ${String(value)}`);
  }
  return n;
}

const json = (values: Values): { json?: true } => (values.has('--json') ? { json: true } : {});

/** The command named by the leading words of `rest`: [its spec, the words after it]. */
function findCommand(rest: readonly string[]): [CommandSpec, string[]] {
  const [group, sub, ...more] = rest;
  if (group === undefined) throw new UsageError('no command given');
  const two = sub === undefined ? undefined : commandSpec(`${group} ${sub}`);
  if (two) return [two, more];
  const single = commandSpec(group);
  if (single) return [single, rest.slice(1)];
  const subs = subcommands(group);
  if (subs.length > 0) {
    throw new UsageError(`${group} has no subcommand ${sub ?? '(none)'} (${subs.join(', ')})`);
  }
  throw new UsageError(`unknown command ${group}`);
}

/** The global options (-C DIR, --help, --version), wherever they are; the other words. */
function globals(argv: readonly string[]): {
  dir: string | null;
  help: boolean;
  version: boolean;
  rest: string[];
} {
  let dir: string | null = null;
  let help = false;
  let version = false;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i] ?? '';
    if (word === '--') {
      rest.push(...argv.slice(i));
      break;
    }
    if (word === '-h' || word === '--help') {
      help = true;
      continue;
    }
    if (word === '-V' || word === '--version') {
      version = true;
      continue;
    }
    if (word.startsWith('-C') || word === '--directory' || word.startsWith('--directory=')) {
      if (dir !== null) throw new UsageError('-C is given twice');
      let value: string | undefined;
      if (word === '-C' || word === '--directory') value = argv[++i];
      else if (word.startsWith('--directory=')) value = word.slice('--directory='.length);
      else value = word.slice(2);
      if (value === undefined || value === '') throw new UsageError('-C needs a directory');
      dir = value;
      continue;
    }
    rest.push(word);
  }
  return { dir, help, version, rest };
}

/** The help topic of `words` (`pod rm`), or undefined for the command list. */
function helpTopic(words: readonly string[]): string | undefined {
  const positional = words.filter((w) => !w.startsWith('-'));
  if (positional.length === 0) return undefined;
  const [spec] = findCommand(positional);
  return spec.name;
}

/** Parses the arguments after `overbrainer`. */
export function parseArgs(argv: readonly string[]): Parsed {
  const { dir, help, version, rest } = globals(argv);
  if (help) return { dir, command: helpCommand(rest) };
  if (rest[0] === 'help') return { dir, command: helpCommand(rest.slice(1)) };
  if (version) {
    if (rest.length > 0) throw new UsageError('--version takes no command');
    return { dir, command: { kind: 'version' } };
  }
  const [spec, words] = findCommand(rest);
  const { positional, values } = options(words, spec);
  const what = spec.name;
  const str = (name: string): string | null => {
    const value = values.get(name);
    return typeof value === 'string' ? value : null;
  };
  switch (what) {
    case 'init':
      none(positional, what);
      return { dir, command: { kind: 'init', force: values.has('--force') } };
    case 'train':
      if (positional.length > 0) {
        throw new UsageError(
          `train has no subcommand ${positional[0] ?? ''} (${subcommands('train').join(', ')})`,
          what,
        );
      }
      return {
        dir,
        command: {
          kind: 'train',
          target: str('--target'),
          keepPod: values.has('--keep-pod'),
          resumeFrom: str('--resume-from'),
          ...(values.has('--dry-run') ? { dryRun: true } : {}),
        },
      };
    case 'train attach':
    case 'train stop':
    case 'train cancel':
    case 'train keep':
    case 'train release': {
      const kind = what.slice('train '.length) as 'attach' | 'stop' | 'cancel' | 'keep' | 'release';
      return { dir, command: { kind, runId: one(positional, what, 'a RUN_ID') } };
    }
    case 'runs ls':
      none(positional, what);
      return { dir, command: { kind: 'runs_ls', ...json(values) } };
    case 'runs show':
      return {
        dir,
        command: { kind: 'runs_show', runId: one(positional, what, 'a RUN_ID'), ...json(values) },
      };
    case 'runs ssh':
      return { dir, command: { kind: 'runs_ssh', runId: one(positional, what, 'a RUN_ID') } };
    case 'runs logs':
      return { dir, command: runsLogs(positional, values) };
    case 'spend': {
      none(positional, what);
      const since = str('--since');
      let sinceMs: number | null = null;
      if (since !== null) {
        sinceMs = /^\d{4}-\d{2}-\d{2}($|T)/.test(since) ? Date.parse(since) : NaN;
        if (Number.isNaN(sinceMs)) {
          throw new UsageError(
            `--since takes a date (2026-09-01) or an RFC 3339 time, not ${since}`,
            what,
          );
        }
      }
      return { dir, command: { kind: 'spend', sinceMs, json: values.has('--json') } };
    }
    case 'pod ls':
      none(positional, what);
      return { dir, command: { kind: 'pod_ls', ...json(values) } };
    case 'pod rm':
      return {
        dir,
        command: {
          kind: 'pod_rm',
          runId: one(positional, what, 'a RUN_ID'),
          force: values.has('--force'),
        },
      };
    case 'pod gpus': {
      none(positional, what);
      const dataCenter = str('--data-center');
      return {
        dir,
        command: {
          kind: 'pod_gpus',
          minVramGb: number(values.get('--min-vram'), '--min-vram', 1),
          maxPricePerHourUsd: number(values.get('--max-price'), '--max-price', 0),
          inStock: values.has('--in-stock'),
          ...(dataCenter === null ? {} : { dataCenter }),
          ...json(values),
        },
      };
    }
    case 'sweep':
      if (positional.length > 0) {
        throw new UsageError(
          `sweep has no subcommand ${positional[0] ?? ''} (${subcommands('sweep').join(', ')})`,
          what,
        );
      }
      return { dir, command: { kind: 'sweep', dryRun: values.has('--dry-run') } };
    case 'sweep start':
      none(positional, what);
      return { dir, command: { kind: 'sweep', dryRun: values.has('--dry-run') } };
    case 'sweep attach':
    case 'sweep stop':
      return {
        dir,
        command: {
          kind: what === 'sweep attach' ? 'sweep_attach' : 'sweep_stop',
          name: one(positional, what, 'a NAME'),
        },
      };
    case 'sweep ls':
      none(positional, what);
      return { dir, command: { kind: 'sweep_ls', ...json(values) } };
    case 'sweep show':
      return {
        dir,
        command: { kind: 'sweep_show', name: one(positional, what, 'a NAME'), ...json(values) },
      };
    case 'pod datacenters':
    case 'pod volumes':
    case 'pod templates':
      none(positional, what);
      return {
        dir,
        command: {
          kind:
            what === 'pod datacenters'
              ? 'pod_datacenters'
              : what === 'pod volumes'
                ? 'pod_volumes'
                : 'pod_templates',
          ...json(values),
        },
      };
  }
  throw new Error(`the command table names ${what}, which the parser does not know`);
}

function helpCommand(words: readonly string[]): Command {
  const topic = helpTopic(words);
  return topic === undefined ? { kind: 'help' } : { kind: 'help', topic };
}

function runsLogs(positional: string[], values: Values): Command {
  const source = values.get('--source');
  if (source !== undefined && source !== 'container' && source !== 'system')
    throw new UsageError(`--source takes container or system, not ${String(source)}`, 'runs logs');
  const pod = values.has('--pod');
  if (!pod && (source !== undefined || values.has('--follow')))
    throw new UsageError('--source and --follow apply to the pod log: add --pod', 'runs logs');
  const tail = number(values.get('--tail'), '--tail', 0);
  if (tail !== null && (!Number.isInteger(tail) || tail > 5000))
    throw new UsageError(`--tail takes a whole number from 0 to 5000, not ${tail}`, 'runs logs');
  const rawNode = values.get('--node');
  const node = rawNode === undefined ? null : Number(rawNode);
  if (node !== null && (rawNode === true || !/^\d+$/.test(String(rawNode)) || node > 249))
    throw new UsageError(
      `--node takes a node's rank, a whole number from 0 to 249, not ${String(rawNode)}`,
      'runs logs',
    );
  if (node !== null && pod)
    throw new UsageError("--node shows a node's job log: drop --pod", 'runs logs');
  return {
    ...(node === null ? {} : { node }),
    kind: 'runs_logs',
    runId: one(positional, 'runs logs', 'a RUN_ID'),
    tail,
    pod,
    source: source ?? null,
    follow: values.has('--follow'),
  };
}

/** Every command the table names (for tests and the README check). */
export const COMMAND_NAMES: readonly string[] = COMMAND_SPECS.map((s) => s.name);
