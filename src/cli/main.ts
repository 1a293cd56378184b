/**
 * The CLI's entry: parses the command line, prints the help and the version, and hands each
 * command to its family's module under ./commands/ with one {@link Session} (config, API key,
 * Ctrl-C, error words and exit codes: ./session.ts).
 *
 * Test hook: OVERBRAINER_TIMING_SCALE=<factor ≥ 1> divides every production duration of the
 * core by `factor` (./session.ts `timingFrom`). It is not in the usage on purpose.
 */
import * as path from 'node:path';
import { CLIENT_VERSION } from '../core/flow';
import { parseArgs, USAGE, UsageError, type Command } from './args';
import { commandSpec } from './commandSpecs';
import { initCommand } from './commands/init';
import { podDataCenters, podGpus, podLs, podRm, podTemplates, podVolumes } from './commands/pod';
import { runsLogs, runsLs } from './commands/runs';
import { runsShow } from './commands/runsShow';
import { runsSsh } from './commands/runsSsh';
import { spend } from './commands/spend';
import {
  sweepAttachCommand,
  sweepCommand,
  sweepDryRun,
  sweepLs,
  sweepShowCommand,
  sweepStopCommand,
} from './commands/sweep';
import { attachOrCancel, dryRun, keepCommand, stopRun, trainCommand } from './commands/train';
import { commandHelp } from './help';
import { EXIT_OK, EXIT_USAGE, Session, type CliIo } from './session';

export { CLI_OWNER, EXIT_FAILED, EXIT_OK, EXIT_USAGE, timingFrom, type CliIo } from './session';

function print(text: string, line: (l: string) => void): void {
  for (const l of text.trimEnd().split('\n')) line(l);
}

/** Runs one command line; resolves to the exit code. Never throws. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr(`overbrainer: ${error.message}`);
    io.stderr('');
    const spec = error.command === null ? undefined : commandSpec(error.command);
    if (spec === undefined) print(USAGE, io.stderr);
    else print(commandHelp(spec), io.stderr);
    return EXIT_USAGE;
  }
  const { command } = parsed;
  if (command.kind === 'help') {
    const spec = command.topic === undefined ? undefined : commandSpec(command.topic);
    print(spec === undefined ? USAGE : commandHelp(spec), io.stdout);
    return EXIT_OK;
  }
  if (command.kind === 'version') {
    io.stdout(`overbrainer ${CLIENT_VERSION}`);
    return EXIT_OK;
  }
  const dir = path.resolve(io.cwd, parsed.dir ?? '.');
  const session = new Session(dir, io);
  try {
    session.timing = session.timingOf();
    return await dispatch(session, command);
  } catch (error) {
    return session.fail(error);
  } finally {
    await session.close();
  }
}

/** The command's module. */
function dispatch(
  s: Session,
  command: Exclude<Command, { kind: 'help' | 'version' }>,
): Promise<number> | number {
  switch (command.kind) {
    case 'init':
      return initCommand(s, command.force);
    case 'train':
      if (command.dryRun) return dryRun(s, command.target);
      return trainCommand(s, command.target, command.keepPod, command.resumeFrom);
    case 'attach':
    case 'cancel':
      return attachOrCancel(s, command.kind, command.runId);
    case 'stop':
      return stopRun(s, command.runId);
    case 'keep':
    case 'release':
      return keepCommand(s, command.runId, command.kind === 'keep');
    case 'runs_ls':
      return runsLs(s, command.json === true);
    case 'runs_show':
      return runsShow(s, command.runId, command.json === true);
    case 'runs_ssh':
      return runsSsh(s, command.runId);
    case 'spend':
      return spend(s, command.sinceMs, command.json);
    case 'runs_logs':
      return runsLogs(s, command);
    case 'pod_ls':
      return podLs(s, command.json === true);
    case 'pod_rm':
      return podRm(s, command.runId, command.force);
    case 'pod_gpus':
      return podGpus(s, command);
    case 'pod_datacenters':
      return podDataCenters(s, command.json === true);
    case 'pod_volumes':
      return podVolumes(s, command.json === true);
    case 'pod_templates':
      return podTemplates(s, command.json === true);
    case 'sweep':
      return command.dryRun ? sweepDryRun(s) : sweepCommand(s);
    case 'sweep_attach':
      return sweepAttachCommand(s, command.name);
    case 'sweep_stop':
      return sweepStopCommand(s, command.name);
    case 'sweep_ls':
      return sweepLs(s, command.json === true);
    case 'sweep_show':
      return sweepShowCommand(s, command.name, command.json === true);
  }
}
