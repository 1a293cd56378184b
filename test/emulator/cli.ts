/**
 * `npm run emulator -- [--port N] [--state-dir D] [--api-key K] [--boot-ms MS]`
 *
 * Runs the Runpod emulator until SIGINT or SIGTERM, then kills every pod it started and exits.
 * Prints exactly one line, once it listens:
 *   runpod emulator listening on http://127.0.0.1:PORT/v2 (api key: K)
 * `--boot-ms` is the time from create to RUNNING (half provisioning, half starting; default 3000,
 * a demo's pace). Errors go to stderr with exit code 2 (bad arguments) or 1.
 */
import { startEmulator, type Emulator } from './emulator';

interface CliOptions {
  port: number;
  stateDir?: string;
  apiKey?: string;
  bootMs: number;
}

const USAGE = 'usage: npm run emulator -- [--port N] [--state-dir D] [--api-key K] [--boot-ms MS]';

function parseArgs(argv: string[]): CliOptions {
  const options: CliOptions = { port: 0, bootMs: 3000 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    const need = (): string => {
      if (value === undefined || value.startsWith('--'))
        throw new Error(`${flag} needs a value\n${USAGE}`);
      i++;
      return value;
    };
    const int = (max: number): number => {
      const raw = need();
      const n = Number(raw);
      if (!/^\d+$/.test(raw) || n > max)
        throw new Error(`${flag} takes an integer 0..${max}, not '${raw}'`);
      return n;
    };
    switch (flag) {
      case '--port':
        options.port = int(65535);
        break;
      case '--state-dir':
        options.stateDir = need();
        break;
      case '--api-key':
        options.apiKey = need();
        break;
      case '--boot-ms':
        options.bootMs = int(3_600_000);
        break;
      case '--help':
      case '-h':
        process.stdout.write(`${USAGE}\n`);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown argument '${flag}'\n${USAGE}`);
    }
  }
  return options;
}

async function main(): Promise<void> {
  let options: CliOptions;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(2);
  }
  let emulator: Emulator;
  try {
    emulator = await startEmulator({
      port: options.port,
      stateDir: options.stateDir,
      apiKey: options.apiKey,
      bootDelaysMs: {
        provisioning: Math.floor(options.bootMs / 2),
        starting: options.bootMs - Math.floor(options.bootMs / 2),
      },
    });
  } catch (error) {
    process.stderr.write(
      `runpod emulator: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(1);
  }
  process.stdout.write(
    `runpod emulator listening on ${emulator.baseUrl} (api key: ${emulator.apiKey})\n`,
  );
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    emulator.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`runpod emulator: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

void main();
