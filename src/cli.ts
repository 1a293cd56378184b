/**
 * The thin CLI on the same core as the extension. A placeholder until the lifecycle lands: it
 * prints its usage and says which commands exist, so the bundle and the `bin` entry are real.
 */
const USAGE = `usage: overbrainer <command>

commands:
  train          start a run on the configured target
  attach <run>   follow a run again, retrieve its results, delete its pod
  cancel <run>   cancel a run's job
  runs ls        list this project's runs
  pod ls         list the account's pods with a run marker
  pod rm <run>   delete a run's pod
`;

function main(argv: string[]): number {
  const [command] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined ? 2 : 0;
  }
  process.stderr.write(`overbrainer: ${argv.join(' ')} is not available yet.\n\n${USAGE}`);
  return 2;
}

process.exitCode = main(process.argv.slice(2));
