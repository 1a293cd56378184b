/**
 * The CLI's help, generated from the command table (./commandSpecs.ts): the command list
 * (`overbrainer --help`, and on stderr after a usage error) and each command's own help
 * (`overbrainer COMMAND --help`, `overbrainer help COMMAND`): usage line, flags, one example.
 */
import { COMMAND_SPECS, type CommandSpec } from './commandSpecs';

/** `pod gpus [--min-vram GB] [--in-stock] …`: the command's words, arguments and options. */
export function synopsis(spec: CommandSpec): string {
  const parts = [spec.name];
  if (spec.args !== '') parts.push(spec.args);
  for (const [name, option] of Object.entries(spec.options)) {
    parts.push(option.type === 'string' ? `[${name} ${option.value ?? 'VALUE'}]` : `[${name}]`);
  }
  return parts.join(' ');
}

const INDENT = 26;

function pad(left: string, right: string): string[] {
  if (left.length + 2 <= INDENT) return [`  ${left.padEnd(INDENT - 2)}${right}`];
  return [`  ${left}`, `${' '.repeat(INDENT)}${right}`];
}

const EXIT_CODES = [
  'exit codes: 0 success; 1 a failed, stopped or cancelled run, or an error;',
  '            2 a usage or configuration error (nothing was started).',
];

/** The command list: `overbrainer`, `overbrainer --help`. */
export function usageText(): string {
  const lines = [
    'usage: overbrainer [-C DIR] <command> [options]',
    '',
    'Trains on Runpod GPU pods (or on this machine) and never leaves a pod billing by mistake.',
    '',
    'commands:',
  ];
  for (const spec of COMMAND_SPECS) lines.push(...pad(synopsis(spec), spec.summary));
  lines.push(
    '',
    'options:',
    ...pad('-C DIR', 'use DIR (overbrainer.toml, runs/) instead of the current directory'),
    ...pad('-h, --help', "show this help; `overbrainer COMMAND --help` shows a command's"),
    ...pad('-V, --version', "print the CLI's version"),
    '',
    'environment:',
    '  OVERBRAINER_RUNPOD__API_KEY   the Runpod API key (never printed); else a line of .env',
    '  OVERBRAINER_RUNPOD__BASE_URL  the API base URL (https, or http on 127.0.0.1); never from .env',
    '  OVERBRAINER_LOG=debug         show debug lines too',
    '  NO_COLOR=1                    no colours and no redrawn progress lines',
    '',
    "Ctrl-C before the job starts deletes the run's pod; once the job runs it only stops",
    'following (attach again with `overbrainer train attach RUN_ID`).',
    ...EXIT_CODES,
  );
  return lines.join('\n');
}

/** One command's help: usage line, what it does, its flags, one example. */
export function commandHelp(spec: CommandSpec): string {
  const lines = [`usage: overbrainer [-C DIR] ${synopsis(spec)}`, '', spec.summary];
  for (const detail of spec.details ?? []) lines.push(detail);
  lines.push('', 'options:');
  for (const [name, option] of Object.entries(spec.options)) {
    lines.push(
      ...pad(option.type === 'string' ? `${name} ${option.value ?? 'VALUE'}` : name, option.help),
    );
  }
  lines.push(
    ...pad('-C DIR', 'use DIR instead of the current directory'),
    ...pad('-h, --help', 'show this help'),
    '',
    'example:',
    `  ${spec.example}`,
    '',
    ...EXIT_CODES,
  );
  return lines.join('\n');
}
